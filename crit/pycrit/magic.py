# Image magics, as CRIU's format numbers them, and the protobuf message of each image's
# entries. An image starts with IMG_COMMON (IMG_SERVICE for the service images below)
# and then its own magic; inventory.img starts with its own magic only.

IMG_COMMON = 0x54564319
IMG_SERVICE = 0x55105940

# Images whose first word is IMG_SERVICE, and the one that has no first word at all.
SERVICE_IMAGES = ("STATS", "IRMAP_CACHE")
BARE_IMAGES = ("INVENTORY",)

# name: (magic, message of its entries). None: not protobuf entries (raw data).
IMAGES = {
    "INVENTORY": (0x58313116, "inventory_entry"),
    "PSTREE": (0x50273030, "pstree_entry"),
    "FDINFO": (0x56213732, "fdinfo_entry"),
    "PAGEMAP": (0x56084025, "pagemap_entry"),
    "CORE": (0x55053847, "core_entry"),
    "IDS": (0x54432030, "task_kobj_ids_entry"),
    "VMAS": (0x54123737, "vma_entry"),
    "PIPES": (0x56513555, "pipe_entry"),
    "PIPES_DATA": (0x56453709, "pipe_data_entry"),
    "FIFO": (0x58364939, "fifo_entry"),
    "FIFO_DATA": (0x59333054, "pipe_data_entry"),
    "SIGACT": (0x55344201, "sa_entry"),
    "UNIXSK": (0x54373943, "unix_sk_entry"),
    "INETSK": (0x56443851, "inet_sk_entry"),
    "PACKETSK": (0x60454618, "packet_sock_entry"),
    "ITIMERS": (0x57464056, "itimer_entry"),
    "POSIX_TIMERS": (0x52603957, "posix_timer_entry"),
    "SK_QUEUES": (0x56264026, "sk_packet_entry"),
    "UTSNS": (0x54473203, "utsns_entry"),
    "CREDS": (0x54023547, "creds_entry"),
    "IPC_VAR": (0x53115007, "ipc_var_entry"),
    "IPCNS_SHM": (0x46283044, "ipc_shm_entry"),
    "IPCNS_MSG": (0x55453737, "ipc_msg_entry"),
    "IPCNS_SEM": (0x59573019, "ipc_sem_entry"),
    "REG_FILES": (0x50363636, "reg_file_entry"),
    "EXT_FILES": (0x59255641, "ext_file_entry"),
    "FS": (0x51403912, "fs_entry"),
    "MM": (0x57492820, "mm_entry"),
    "REMAP_FPATH": (0x59133954, "remap_file_path_entry"),
    "GHOST_FILE": (0x52583605, "ghost_file_entry"),
    "TCP_STREAM": (0x51465506, "tcp_stream_entry"),
    "EVENTFD_FILE": (0x44523722, "eventfd_file_entry"),
    "EVENTPOLL_FILE": (0x45023858, "eventpoll_file_entry"),
    "EVENTPOLL_TFD": (0x44433746, "eventpoll_tfd_entry"),
    "SIGNALFD": (0x57323820, "signalfd_entry"),
    "INOTIFY_FILE": (0x48424431, "inotify_file_entry"),
    "INOTIFY_WD": (0x54562009, "inotify_wd_entry"),
    "MNTS": (0x55563928, "mnt_entry"),
    "NETDEV": (0x57373951, "net_device_entry"),
    "NETNS": (0x55933752, "netns_entry"),
    "TTY_FILES": (0x59433025, "tty_file_entry"),
    "TTY_INFO": (0x59453036, "tty_info_entry"),
    "TTY_DATA": (0x59413026, "tty_data_entry"),
    "FILE_LOCKS": (0x54323616, "file_lock_entry"),
    "RLIMIT": (0x57113925, "rlimit_entry"),
    "FANOTIFY_FILE": (0x55096122, "fanotify_file_entry"),
    "FANOTIFY_MARK": (0x56506035, "fanotify_mark_entry"),
    "SIGNAL": (0x59255647, "signal_queue_entry"),
    "NETLINK_SK": (0x58005614, "netlink_sk_entry"),
    "NS_FILES": (0x61394011, "ns_file_entry"),
    "TUNFILE": (0x57143751, "tunfile_entry"),
    "CGROUP": (0x59383330, "cgroup_entry"),
    "TIMERFD": (0x50493712, "timerfd_entry"),
    "CPUINFO": (0x61404013, "cpuinfo_entry"),
    "USERNS": (0x55474906, "userns_entry"),
    "SECCOMP": (0x64413049, "seccomp_entry"),
    "CPUINFO": (0x61404013, "cpuinfo_entry"),
    "BINFMT_MISC": (0x67343323, "binfmt_misc_entry"),
    "AUTOFS": (0x49353943, "autofs_entry"),
    "FILES": (0x56303138, "file_entry"),
    "MEMFD_INODE": (0x48453499, "memfd_inode_entry"),
    "TIMENS": (0x43114433, "timens_entry"),
    "PIDNS": (0x61157326, "pidns_entry"),
    "BPFMAP_FILE": (0x57506142, "bpfmap_file_entry"),
    "BPFMAP_DATA": (0x64324033, "bpfmap_data_entry"),
    "APPARMOR": (0x59423047, "apparmor_entry"),
    "STATS": (0x57093306, "stats_entry"),
    "IRMAP_CACHE": (0x57004059, "irmap_cache_entry"),
    "KDAT": (0x57023458, None),
    # This criu's own images (images/ext.proto), unknown to CRIU's tools.
    "MM_EXT": (0x43524d01, "cr_mm_ext_entry"),
    "IPCNS_MQ": (0x43524d02, "cr_posix_mq_entry"),
    "PIDNS_NESTED": (0x43524d03, "cr_nested_pid_entry"),
    "INETSK_EXT": (0x43524d04, "cr_inet_sk_ext_entry"),
}

BY_MAGIC = {magic: name for name, (magic, _) in IMAGES.items()}

# A net namespace's images that hold what tools wrote, with no magic: `ip ... save`'s binary
# dumps, iptables-save's and nft's text, as CRIU keeps them.
NET_RAW_PREFIXES = ("ifaddr-", "route-", "route6-", "rule-", "iptables-", "ip6tables-",
                    "nftables-")


def first_word(name):
    """The u32 written before an image's own magic, or None (inventory.img)."""
    if name in BARE_IMAGES:
        return None
    return IMG_SERVICE if name in SERVICE_IMAGES else IMG_COMMON
