/*
 * Terminals (tty.c): the steps of a restored session leader whose controlling terminal is
 * a pty of the tree, and the bytes queued in a pty's line disciplines (pty-queue.c).
 */
#ifndef CR_TTY_H
#define CR_TTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <termios.h>

struct pstree_item;

/*
 * The kernel's termios, as TCGETS, TCSETS and the locked-termios ioctls pass it: glibc's
 * struct termios is laid out otherwise and its tcsetattr() may rework the speed bits.
 */
#define KERNEL_NCCS 19
struct kernel_termios {
	tcflag_t c_iflag, c_oflag, c_cflag, c_lflag;
	cc_t c_line;
	cc_t c_cc[KERNEL_NCCS];
};

/*
 * In a restored task, after prepare_inherited_files() and before it forks its children
 * (they inherit the controlling terminal, as they did): a session leader takes its pty
 * back as its controlling terminal (TIOCSCTTY through the master, which the planner gave
 * it: fdtype_ops.needed_by). Other tasks: nothing. 0 or -errno.
 */
int tty_restore_ctty(const struct pstree_item *item);
/*
 * In the same task, once every group of the tree exists (after GROUPS) and before
 * prepare_fds() closes the inherited master: the terminal's foreground group (TIOCSPGRP).
 * 0 or -errno.
 */
int tty_restore_foreground(const struct pstree_item *item);

/* A discipline holds 4 KiB; the kernel's flip buffers in front of it up to 64 KiB more. */
#define PTY_QUEUE_MAX (128 << 10)

/*
 * The bytes queued in a pty, both directions: output the slave wrote that the master has
 * not read, as it arrived there; input the slave has not read, as the keystrokes that
 * queue it again (pty_queue_input()). malloc'ed.
 */
struct pty_queues {
	uint8_t *output;
	size_t output_len;
	uint8_t *input;
	size_t input_len;
};

/*
 * Dump: read both queues out through master_fd and slave_fd (criu's own opening of the
 * slave, non-blocking), then queue them again, so the pty holds what it held. termios: the
 * slave's, whose locked bits (TIOCSLCKTRMIOS) the caller has cleared. 0 or -errno, after
 * one line naming what.
 */
int pty_read_queues(int master_fd, int slave_fd, const struct kernel_termios *termios, bool packet,
		    struct pty_queues *q, const char *what);
/*
 * Restore (and dump, putting them back): queue the input keystrokes and the output bytes
 * through slave_fd, non-blocking, of a pty whose termios are set; they are set again
 * afterwards. Needs CAP_SYS_ADMIN (TIOCSTI on a terminal not our own). 0 or -errno.
 */
int pty_queue_input(int slave_fd, const struct kernel_termios *termios, const uint8_t *keys,
		    size_t len, const char *what);
int pty_queue_output(int slave_fd, const struct kernel_termios *termios, const uint8_t *bytes,
		     size_t len, const char *what);
void pty_queues_free(struct pty_queues *q);

#endif
