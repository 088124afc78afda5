# How --pretty shows some integer fields, as upstream crit does: hex, names of flag bits,
# major:minor, names of values, IP addresses. Upstream marks these fields with options in
# its .proto files; ours carry none, so the list lives here, by message and field name.

HEX = ("hex",)
DEV = ("dev",)  # the kernel's dev_t encoding: major << 20 | minor
ODEV = ("odev",)  # glibc's dev_t encoding (os.makedev)
IPADDR = ("ip",)  # repeated uint32: one IPv4 or four IPv6 words, network order
QUOPRI = ("quopri",)  # a bytes field shown quoted-printable instead of base64

MMAP_PROT = (("PROT_READ", 0x1), ("PROT_WRITE", 0x2), ("PROT_EXEC", 0x4))

MMAP_FLAGS = (("MAP_SHARED", 0x1), ("MAP_PRIVATE", 0x2), ("MAP_DROPPABLE", 0x8),
              ("MAP_ANON", 0x20), ("MAP_GROWSDOWN", 0x100))

VMA_STATUS = (("VMA_AREA_REGULAR", 1 << 0), ("VMA_AREA_STACK", 1 << 1),
              ("VMA_AREA_VSYSCALL", 1 << 2), ("VMA_AREA_VDSO", 1 << 3),
              ("VMA_AREA_HEAP", 1 << 5), ("VMA_FILE_PRIVATE", 1 << 6),
              ("VMA_FILE_SHARED", 1 << 7), ("VMA_ANON_SHARED", 1 << 8),
              ("VMA_ANON_PRIVATE", 1 << 9), ("VMA_AREA_SYSVIPC", 1 << 10),
              ("VMA_AREA_SOCKET", 1 << 11), ("VMA_AREA_VVAR", 1 << 12),
              ("VMA_AREA_AIORING", 1 << 13), ("VMA_AREA_MEMFD", 1 << 14),
              ("VMA_AREA_SHSTK", 1 << 15), ("VMA_AREA_UPROBES", 1 << 17),
              ("VMA_UNSUPP", 1 << 31))

OPEN_FLAGS = (("O_WRONLY", 0o1), ("O_RDWR", 0o2), ("O_CREAT", 0o100), ("O_EXCL", 0o200),
              ("O_NOCTTY", 0o400), ("O_TRUNC", 0o1000), ("O_APPEND", 0o2000),
              ("O_NONBLOCK", 0o4000), ("O_DSYNC", 0o10000), ("FASYNC", 0o20000),
              ("O_DIRECT", 0o40000), ("O_LARGEFILE", 0o100000),
              ("O_DIRECTORY", 0o200000), ("O_NOFOLLOW", 0o400000),
              ("O_NOATIME", 0o1000000), ("O_CLOEXEC", 0o2000000))

SEALS = (("F_SEAL_SEAL", 0x1), ("F_SEAL_SHRINK", 0x2), ("F_SEAL_GROW", 0x4),
         ("F_SEAL_WRITE", 0x8), ("F_SEAL_FUTURE_WRITE", 0x10))

PAGEMAP_FLAGS = (("PE_PARENT", 1 << 0), ("PE_LAZY", 1 << 1), ("PE_PRESENT", 1 << 2))

TASK_STATES = {1: "Alive", 3: "Zombie", 6: "Stopped"}
SK_FAMILIES = {1: "UNIX", 2: "INET", 10: "INET6", 16: "NETLINK", 17: "PACKET"}
SK_TYPES = {1: "STREAM", 2: "DGRAM", 3: "RAW", 5: "SEQPACKET", 10: "PACKET"}
SK_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1",
             5: "FIN_WAIT2", 6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK",
             10: "LISTEN"}
SK_PROTOS = {0: "IP", 6: "TCP", 17: "UDP", 136: "UDPLITE"}


def flags(table):
    return ("flags", table)


def names(table):
    return ("names", table)


def _all_hex(*fields):
    return {f: HEX for f in fields}


STYLES = {
    "mm_entry": _all_hex("mm_start_code", "mm_end_code", "mm_start_data", "mm_end_data",
                         "mm_start_stack", "mm_start_brk", "mm_brk", "mm_arg_start",
                         "mm_arg_end", "mm_env_start", "mm_env_end"),
    "vma_entry": {"start": HEX, "end": HEX, "prot": flags(MMAP_PROT),
                  "flags": flags(MMAP_FLAGS), "status": flags(VMA_STATUS), "madv": HEX,
                  "fdflags": HEX},
    "pagemap_entry": {"vaddr": HEX, "flags": flags(PAGEMAP_FLAGS)},
    "reg_file_entry": {"flags": flags(OPEN_FLAGS)},
    "memfd_file_entry": {"flags": flags(OPEN_FLAGS)},
    "bpfmap_file_entry": {"flags": flags(OPEN_FLAGS)},
    "memfd_inode_entry": {"seals": flags(SEALS)},
    # Every integer inside gpregs is hex too: the style is inherited by sub-messages.
    "thread_info_x86": _all_hex("clear_tid_addr", "gpregs"),
    "task_core_entry": {"blk_sigset": HEX, "blk_sigset_extended": HEX,
                        "task_state": names(TASK_STATES)},
    "sa_entry": _all_hex("sigaction", "restorer", "mask", "mask_extended", "flags"),
    "pipe_entry": _all_hex("flags"),
    "tty_file_entry": _all_hex("flags"),
    "ghost_file_entry": {"dev": DEV, "rdev": ODEV},
    "irmap_cache_entry": {"dev": ODEV},
    "mnt_entry": {"flags": HEX, "sb_flags": HEX, "root_dev": DEV},
    "inotify_file_entry": _all_hex("flags"),
    "inotify_wd_entry": {"mask": HEX, "ignored_mask": HEX, "s_dev": DEV},
    "fanotify_file_entry": _all_hex("flags", "faflags", "evflags"),
    "fanotify_mark_entry": {"mflags": HEX, "mask": HEX, "ignored_mask": HEX, "s_dev": DEV},
    "signalfd_entry": _all_hex("flags", "sigmask"),
    "timerfd_entry": _all_hex("flags", "settime_flags"),
    "tcp_stream_entry": _all_hex("opt_mask"),
    "net_device_entry": _all_hex("flags"),
    "tun_link_entry": _all_hex("flags"),
    "netlink_sk_entry": _all_hex("flags"),
    "packet_sock_entry": _all_hex("flags"),
    "unix_sk_entry": {"flags": HEX, "uflags": HEX, "name": QUOPRI,
                      "type": names(SK_TYPES), "state": names(SK_STATES)},
    "inet_sk_entry": {"flags": HEX, "src_addr": IPADDR, "dst_addr": IPADDR,
                      "family": names(SK_FAMILIES), "type": names(SK_TYPES),
                      "state": names(SK_STATES), "proto": names(SK_PROTOS)},
    "sit_entry": {"local": IPADDR, "remote": IPADDR, "rd_prefix": IPADDR,
                  "relay_prefix": IPADDR},
}


def style(message_name, field_name):
    """The style tuple of a field (HEX, DEV, flags(...), ...), or None: a plain number."""
    return STYLES.get(message_name, {}).get(field_name)
