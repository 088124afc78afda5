/* The `criu check` command (cr-check.c): the feature names CRIU knows and their answers. */
#ifndef CR_CR_CHECK_H
#define CR_CR_CHECK_H

#include <stdbool.h>

/* What `criu check` is asked: one feature, or the required ones and these groups. */
struct check_request {
	const char *feature; /* --feature NAME; NULL: the groups */
	bool extra; /* --extra */
	bool experimental; /* --experimental */
};

/* criu check: "NAME is supported" or "Looks good." on stdout and 0, else -1. */
int cr_check(const struct check_request *req);

/* Whether name is a feature `criu check --feature` knows (upstream's names and ours). */
bool check_feature_known(const char *name);
/* Every feature name, NULL-terminated. */
const char *const *check_feature_names(void);

#endif
