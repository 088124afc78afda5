/*
 * Embeds the flat restorer blob (criu/pie/restorer.bin) into criu as
 * restorer_blob .. restorer_blob_end; restorer-setup.c copies it into the task.
 */
	.section .rodata
	.balign 64
	.globl restorer_blob
restorer_blob:
	.incbin "criu/pie/restorer.bin"
	.globl restorer_blob_end
restorer_blob_end:

	.section .note.GNU-stack,"",@progbits
