/*
 * The parasite's first bytes (PARASITE_SYSCALL_OFF, PARASITE_ENTRY_OFF in
 * parasite-proto.h): the syscall instruction compel's injected syscalls run, then the
 * entry. parasite_main() never returns (criu interrupts it, or it returns to the task).
 */
	.section .text.entry,"ax"
	.globl parasite_head
parasite_head:
	syscall
	int3
	.balign 8
parasite_entry:
	call parasite_main
	ud2

	.section .note.GNU-stack,"",@progbits
