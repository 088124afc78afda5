/*
 * binfmt_misc mounts: the handlers registered in the tree's own binfmt_misc instance
 * (binfmt-misc.img), dumped from a mount of it and registered again in the new one.
 */
#ifndef CR_MNT_BINFMT_H
#define CR_MNT_BINFMT_H

/*
 * Dump, for a binfmt_misc mount (mnt, a detached clone of it): its handlers into
 * binfmt-misc.img when the instance is the tree's own (not the one criu sees: then the
 * handlers are not the tree's to save). 0 or -errno after one error line.
 */
int binfmt_dump(int mnt, unsigned int mnt_id);
/*
 * Restore, in the root task, once binfmt_misc is mounted at path: the image's handlers
 * registered there, except those the instance already has. On failure what this call
 * registered is removed again. 0 or -errno after one error line.
 */
int binfmt_restore(const char *path);

#endif
