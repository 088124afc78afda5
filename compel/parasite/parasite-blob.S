/*
 * Embeds the flat parasite blob (compel/parasite/parasite.bin) into criu as
 * parasite_blob .. parasite_blob_end; compel/infect-parasite.c copies it into the task.
 */
	.section .rodata
	.balign 64
	.globl parasite_blob
parasite_blob:
	.incbin "compel/parasite/parasite.bin"
	.globl parasite_blob_end
parasite_blob_end:

	.section .note.GNU-stack,"",@progbits
