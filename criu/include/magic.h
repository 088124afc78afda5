/* The magic numbers CRIU's image format puts at the head of each image file. */
#ifndef CR_MAGIC_H
#define CR_MAGIC_H

#define IMG_COMMON_MAGIC 0x54564319u /* first u32 of every image but inventory.img */
#define IMG_SERVICE_MAGIC 0x55105940u /* first u32 of stats-* */

#define INVENTORY_MAGIC 0x58313116u
#define PSTREE_MAGIC 0x50273030u
#define FDINFO_MAGIC 0x56213732u
#define PAGEMAP_MAGIC 0x56084025u
#define CORE_MAGIC 0x55053847u
#define IDS_MAGIC 0x54432030u
#define MM_MAGIC 0x57492820u
#define FILES_MAGIC 0x56303138u
#define FS_MAGIC 0x51403912u
#define REMAP_FPATH_MAGIC 0x59133954u
#define GHOST_FILE_MAGIC 0x52583605u
#define PIPES_DATA_MAGIC 0x56453709u
#define FIFO_DATA_MAGIC 0x59333054u
#define TTY_INFO_MAGIC 0x59453036u
#define TTY_DATA_MAGIC 0x59413026u
#define MEMFD_INODE_MAGIC 0x48453499u
#define FILE_LOCKS_MAGIC 0x54323616u
#define SK_QUEUES_MAGIC 0x56264026u
#define SECCOMP_MAGIC 0x64413049u
#define STATS_MAGIC 0x57093306u
/* Ours: images CRIU's tools do not know (ext.proto). */
#define MM_EXT_MAGIC 0x43524d01u

#endif
