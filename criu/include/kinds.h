/* The tables of resource kinds (kinds.c). */
#ifndef CR_KINDS_H
#define CR_KINDS_H

/* Gives the fd and namespace engines their kinds: once, before any command runs. */
void register_kinds(void);

#endif
