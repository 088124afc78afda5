/*
 * The robust futex list head survives: get_robust_list returns the head and length
 * the test registered, not glibc's default or the restorer's.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zdtmtst.h"

/* an empty list: the head points at itself */
static struct robust_list_head own_head = { .list = { &own_head.list } };

int main(int argc, char **argv)
{
	struct robust_list_head *head = NULL;
	size_t len = 0;

	test_init(argc, argv);

	if (syscall(SYS_set_robust_list, &own_head, sizeof(own_head)))
		test_fail_errno("set_robust_list");

	test_ready();
	test_wait_sigterm();

	if (syscall(SYS_get_robust_list, 0, &head, &len))
		test_fail_errno("get_robust_list");
	if (head != &own_head || len != sizeof(own_head))
		test_fail("robust list %p len %zu, expected %p len %zu", head, len, &own_head,
			  sizeof(own_head));
	test_pass();
}
