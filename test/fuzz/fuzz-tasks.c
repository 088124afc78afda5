/*
 * Fuzz target for restore's decoding of the process tree and every task's images, as the
 * restore reads them before forking: pstree_read(), ns_restore_collect() against
 * inventory.img's root ids (the root's own namespaces' images: utsns, ipcns-*, timens,
 * pidns, netns, netdev), files_collect() (a memfd VMA needs the file table), task_images_collect() (core,
 * ids, mm, mm-ext, pagemap).
 */
#include <fcntl.h>
#include <stdint.h>

#include "files.h"
#include "fuzz.h"
#include "image.h"
#include "kinds.h"
#include "namespaces.h"
#include "pstree.h"
#include "task-image.h"

#include "inventory.pb-c.h"

/* inventory.img's record, or NULL; restore's own reader is private to cr-restore.c. */
static InventoryEntry *read_inventory(void)
{
	struct cr_img *img;
	InventoryEntry *inv = NULL;

	if (!img_exists(CR_IMG_INVENTORY, 0))
		return NULL;
	img = open_image(CR_IMG_INVENTORY, O_RDONLY, 0);
	if (img) {
		if (pb_read_one_required(img, (void **)&inv))
			inv = NULL;
		close_image(img);
	}
	return inv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool kinds_registered;
	InventoryEntry *inv;

	if (!kinds_registered) {
		register_kinds(); /* as criu's main() does */
		kinds_registered = true;
	}
	fuzz_put_images(data, size);
	fuzz_fds_begin();
	inv = read_inventory();
	if (!pstree_read()) {
		if (!ns_restore_collect(inv ? inv->root_ids : NULL) && !files_collect() &&
		    !task_images_collect())
			task_images_free();
		files_collect_fini();
		ns_fini();
		pstree_free();
	}
	if (inv)
		inventory_entry__free_unpacked(inv, NULL);
	fuzz_fds_end();
	fuzz_clear_images();
	return 0;
}
