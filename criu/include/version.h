/*
 * Versions: this criu's own (the packages', GitID of criu -V, gitid of the RPC's answer)
 * and the version of CRIU's interface it implements, which runtimes check (criu -V, RPC).
 */
#ifndef CR_VERSION_H
#define CR_VERSION_H
#define CRIU_VERSION "0.1"
#define CRIU_IFACE_MAJOR   4
#define CRIU_IFACE_MINOR   2
#define CRIU_IFACE_VERSION "4.2"
#endif
