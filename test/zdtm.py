#!/usr/bin/env python3
# zdtm-style runner: starts each test program, waits until it is ready, dumps and
# restores it with ../criu/criu (in the way its mode says), signals it, and collects its
# own PASS/FAIL verdict. Every dump's images must decode with Debian's crit and encode back
# to the same bytes. Cross tests dump with upstream CRIU (../../shared/upstream-criu) and
# restore with ours, or the other way round. The runner uses the Python 3 standard library
# only; the crit check runs in a helper under crit's own interpreter (--crit-helper).
import argparse
import base64
import ctypes
import errno
import fcntl
import hashlib
import json
import mmap
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback

TEST_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT_DIR = os.path.dirname(TEST_DIR)
CRIU = os.path.join(ROOT_DIR, 'criu', 'criu')
# This criu's own version (criu -V prints it as its GitID).
with open(os.path.join(ROOT_DIR, 'criu', 'include', 'version.h')) as _version_h:
    CRIU_OWN_VERSION = re.search(r'#define CRIU_VERSION "([^"]+)"', _version_h.read()).group(1)
BIN_DIR = os.path.join(TEST_DIR, 'bin')
OUT_DIR = os.path.join(TEST_DIR, 'out')
PLUGINS_DIR = os.path.join(TEST_DIR, 'plugins')
# lib/: test_trace (10), test_fail (20), testdev (30); lib-notestdev/: the first two.
PLUGIN_LIB = os.path.join(PLUGINS_DIR, 'lib')
PLUGIN_LIB_NO_TESTDEV = os.path.join(PLUGINS_DIR, 'lib-notestdev')
# lib-unixsk/: test_unixsk alone, which takes Unix sockets whose peer is outside the tree.
PLUGIN_LIB_UNIXSK = os.path.join(PLUGINS_DIR, 'lib-unixsk')
# GPU tests: the KFD EMULATOR daemon (test/gpu) and the AMDGPU plugin's test build (with
# the emulator backend); the production build is only checked, it cannot drive an emulator
KFD_EMU = os.path.join(TEST_DIR, 'gpu', 'kfd-emu')
AMDGPU_PLUGIN_DIR = os.path.join(TEST_DIR, 'gpu', 'plugin')
AMDGPU_PROD_PLUGIN_DIR = os.path.join(ROOT_DIR, 'plugins', 'amdgpu')
# The reference: upstream CRIU next to the repository (absent in a plain clone: the cross
# tests are then skipped). It is run, never read.
UPSTREAM_CRIU = os.path.normpath(os.path.join(ROOT_DIR, '..', 'shared', 'upstream-criu',
                                              'bin', 'criu'))
# What upstream criu needs that ours does not: the tests run in the runner's session, and
# upstream refuses to dump a root that is not a session leader without --shell-job (with it,
# restore puts the root into criu's own session and group: the runner's, as dumped).
# A tree with a net namespace of its own (ns_net): upstream locks its network with
# iptables-restore and saves and restores its tables with iptables-save/-restore (or the
# command CR_IPTABLES names): the lock is skipped, and
# CR_IPTABLES is `true` (the tests' namespaces have no tables: empty iptables images).
UPSTREAM_OPTS = ['--shell-job', '--network-lock', 'skip']
UPSTREAM_ENV = {'CR_IPTABLES': 'true'}
# Debian's crit (package criu, scripts/install-deps.sh): every dump's images must decode
# with it and encode back to the same bytes.
DEBIAN_CRIT = '/usr/bin/crit'
# Ours (crit/crit), for the images only this criu writes (OWN_IMAGES) and for reading
# images in tests.
OWN_CRIT = os.path.join(ROOT_DIR, 'crit', 'crit')

# Every feature name upstream CRIU's check --feature knows (CRIU 4.2), and those of them
# this criu implements (criu/command/cr-check.c); the others must answer "not supported".
UPSTREAM_FEATURES = (
    'mnt_id mem_dirty_track aio_remap timerfd tun tun_ns userns fdinfo_lock seccomp_suspend '
    'seccomp_filters loginuid cgroupns autofs tcp_half_closed compat_cr uffd uffd-noncoop '
    'can_map_vdso sk_ns sk_unix_file net_diag_raw nsid link_nsid kcmp_epoll timens '
    'external_net_ns clone3_set_tid newifindex nftables has_ipt_legacy pidfd_store ns_pid '
    'apparmor_stacking network_lock_nftables sockopt_buf_lock memfd_hugetlb '
    'move_mount_set_group openat2 get_rseq_conf ipv6_freebind pagemap_scan timer_cr_ids '
    'overlayfs_maps breakpoints pagemap_scan_guard_pages').split()
IMPLEMENTED_FEATURES = {'clone3_set_tid', 'get_rseq_conf', 'timer_cr_ids', 'fdinfo_lock', 'timerfd',
                        'kcmp_epoll', 'memfd_hugetlb', 'timens', 'ns_pid', 'seccomp_suspend',
                        'seccomp_filters', 'userns', 'cgroupns', 'mnt_id', 'move_mount_set_group',
                        'mem_dirty_track', 'pagemap_scan', 'uffd', 'uffd-noncoop', 'aio_remap',
                        'loginuid', 'pagemap_scan_guard_pages', 'newifindex', 'nsid',
                        'link_nsid', 'tcp_half_closed', 'sk_unix_file', 'sockopt_buf_lock',
                        'ipv6_freebind', 'net_diag_raw', 'tun', 'tun_ns', 'has_ipt_legacy',
                        'nftables', 'network_lock_nftables'}
# Modes that start no test program: criu alone.
NO_PROCESS_MODES = ('cli', 'check_features')
# The --action-script of mode action_scripts: one line per stage it is run at.
TRACE_SCRIPT = """#!/bin/sh
echo "$CRTOOLS_SCRIPT_ACTION ${CRTOOLS_INIT_PID:-none} $(readlink -f "$CRTOOLS_IMAGE_DIR")" \\
     "$(test -e "$CRTOOLS_IMAGE_DIR/inventory.img" && echo inventory)" >> "$0.trace"
"""

# --lazy-pages: every restore of the run is lazy (criu lazy-pages + restore --lazy-pages)
LAZY_ALL = False
READY_TIMEOUT = 30  # seconds for a test to set itself up
CRIU_TIMEOUT = 120  # seconds for one criu command
EXIT_TIMEOUT = 30  # seconds for a test to check itself and exit after SIGTERM
LOG_TAIL_LINES = 15
PR_SET_CHILD_SUBREAPER = 36
PR_SET_VMA = 0x53564d41
PR_SET_VMA_ANON_NAME = 0
VMA_EXT_PLUGIN = 1 << 27  # vma_entry.status: a mapping a plugin restores
VMA_AREA_HEAP = 1 << 5
VMA_AREA_SYSVIPC = 1 << 10
VMA_AREA_GUARD = 1 << 16


def corrupt_core_magic(img_dir, pid):
    """Flip the bytes of core-PID.img's type magic (the u32 after the common magic)."""
    path = os.path.join(img_dir, 'core-%d.img' % pid)
    with open(path, 'r+b') as img:
        img.seek(4)
        magic = img.read(4)
        img.seek(4)
        img.write(bytes(b ^ 0xff for b in magic))


def truncate_amdgpu_pages(img_dir, pid):
    """Cut the GPU BO contents image short: the last BOs' data is missing."""
    for name in os.listdir(img_dir):
        if name.startswith('amdgpu-pages-'):
            path = os.path.join(img_dir, name)
            os.truncate(path, os.path.getsize(path) // 2)


def amdgpu_priv_data_version(img_dir, pid):
    """Flip the version KFD's private data starts with, inside amdgpu-kfd-*.img: the image
    header (magic, version, length), then a protobuf whose field 5 holds the private data."""
    def varint(data, pos):
        value = shift = 0
        while True:
            byte = data[pos]
            value |= (byte & 0x7f) << shift
            pos, shift = pos + 1, shift + 7
            if not byte & 0x80:
                return value, pos
    for name in os.listdir(img_dir):
        if not name.startswith('amdgpu-kfd-'):
            continue
        path = os.path.join(img_dir, name)
        with open(path, 'rb') as img:
            data = bytearray(img.read())
        pos = 16
        while pos < len(data):
            key, pos = varint(data, pos)
            if key & 7 == 2:
                length, pos = varint(data, pos)
                if key >> 3 == 5:
                    data[pos] ^= 0x40
                    break
                pos += length
            elif key & 7 == 0:
                _, pos = varint(data, pos)
            else:
                raise ValueError('%s: unexpected wire type %d' % (name, key & 7))
        with open(path, 'wb') as img:
            img.write(data)


def corrupt_grandchild_core(img_dir, pid):
    """The core image of a grandchild of the root (pid is the grandchild's here)."""
    corrupt_core_magic(img_dir, pid)


def truncate_mm_image(img_dir, pid):
    """Cut mm-PID.img in half: the last record is cut off mid-way."""
    path = os.path.join(img_dir, 'mm-%d.img' % pid)
    os.truncate(path, os.path.getsize(path) // 2)


def edit_image(img_dir, name, edit):
    """Decode an image with our crit, let edit() change its JSON, encode it back."""
    path = os.path.join(img_dir, name)
    image = json.loads(own_crit('decode', '-i', path))
    edit(image['entries'])
    proc = subprocess.run([OWN_CRIT, 'encode', '-o', path], input=json.dumps(image).encode(),
                          capture_output=True)
    if proc.returncode != 0:
        raise TestFailure('crit encode %s: %s' % (name, proc.stderr.decode().strip()))


# cgroup_limits lives in NAME/sub of these hierarchies (ZDTM_CG_NAME), NAME/sub/empty below.
CGROUP_TEST_HIERS = ('cpu', 'memory', 'pids', 'freezer', 'unified')


def remove_test_cgroups(name):
    """rmdir the test's cgroups, once its tasks have left them (a dying one may linger)."""
    deadline = time.monotonic() + EXIT_TIMEOUT
    for hier in CGROUP_TEST_HIERS:
        for below in ('sub/empty', 'sub', ''):
            path = os.path.join('/sys/fs/cgroup', hier, name, below)
            while os.path.isdir(path):
                try:
                    os.rmdir(path)
                except OSError as e:
                    if time.monotonic() > deadline:
                        raise TestFailure('cannot remove cgroup %s: %s' % (path, e))
                    time.sleep(0.05)


def mount_ext_late(extsrc):
    """In the runner's namespace, after the restore: a tmpfs at EXTSRC/late holding a file
    "late", which a peer of EXTSRC in the tree receives."""
    late = os.path.join(extsrc, 'late')
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'late', late], check=True)
    with open(os.path.join(late, 'x'), 'w') as f:
        f.write('late\n')


def remove_tmpfs_images(img_dir, pid):
    """The files of every tmpfs of the tree (tmpfs-dev-*.tar.gz.img) are gone."""
    for name in os.listdir(img_dir):
        if name.startswith('tmpfs-dev-'):
            os.unlink(os.path.join(img_dir, name))


def umount_lazy(path):
    """A mount a test made in the runner's namespace, if it is still there."""
    if os.path.ismount(path):
        subprocess.run(['umount', '-l', path], check=True)


def remove_macvlan_lower():
    """The macvlan tests' bridge in the runner's namespace, where the tree cannot remove it
    (ns_user_net_macvlan) or does not get to (a failed restore)."""
    subprocess.call(['ip', 'link', 'del', 'zdtm_mvbr'], stderr=subprocess.DEVNULL)


def remove_cgns_cgroups():
    """cgroup_ns_root's cgroups, which it cannot leave from inside its namespace."""
    for hier in ('cpu', 'pids', 'unified'):
        for below in ('zdtm_cgns/inner', 'zdtm_cgns'):
            path = os.path.join('/sys/fs/cgroup', hier, below)
            if os.path.isdir(path):
                os.rmdir(path)


def cgroup_dir(img_dir, cname, dir_name):
    """cgroup.img's top directory dir_name of hierarchy cname ('' for v2), or None."""
    for ctrl in own_crit_entries(os.path.join(img_dir, 'cgroup.img'))[0].get('controllers', []):
        if ctrl.get('cnames') == [cname]:
            return next((d for d in ctrl.get('dirs', []) if d['dir_name'] == dir_name), None)
    return None


def cgroup_img_check(name, remove=True, shares=None):
    """cgroup.img holds NAME/sub with its limits and NAME/sub/empty; then, with remove, the
    cgroups go (restore must make them again), else cpu.shares becomes shares (which
    restore may set back, or not, as its mode says)."""
    def check(img_dir, pid):
        sub = cgroup_dir(img_dir, 'cpu', name + '/sub')
        if not sub:
            raise TestFailure('cgroup.img has no cpu cgroup %s/sub' % name)
        props = {p['name']: p['value'] for p in sub.get('properties', [])}
        if props.get('cpu.shares') != '512' or props.get('cpu.cfs_quota_us') != '50000':
            raise TestFailure('cgroup.img: cpu properties of %s/sub: %s' % (name, props))
        if [c['dir_name'] for c in sub.get('children', [])] != ['empty']:
            raise TestFailure('cgroup.img: %s/sub has not its empty cgroup' % name)
        if remove:
            remove_test_cgroups(name)
        if shares:
            with open('/sys/fs/cgroup/cpu/%s/sub/cpu.shares' % name, 'w') as f:
                f.write(shares)
    return check


class CgroupsRemover:
    """What restore_fails' 'corrupt' hands back: the test's cgroups go once restore failed."""
    def __init__(self, name):
        self.name = name

    def close(self):
        remove_test_cgroups(self.name)


def cgroup_corrupt(name, remove, edit=None):
    """For restore_fails: the test's cgroups removed (or left), cgroup.img edited."""
    def corrupt(img_dir, pid):
        cgroup_img_check(name, remove=remove)(img_dir, pid)
        if edit:
            edit_image(img_dir, 'cgroup.img', edit)
        return CgroupsRemover(name)
    return corrupt


def pids_max_bogus(entries):
    """The pids.max of the task's pids cgroup becomes a value the kernel refuses."""
    for ctrl in entries[0]['controllers']:
        for d in ctrl.get('dirs', []):
            for p in d.get('properties', []):
                if p['name'] == 'pids.max':
                    p['value'] = 'bogus'


def first_fd_file(img_dir):
    """The files.img id of the lowest fd of the (only) files table."""
    fdinfo = sorted(n for n in os.listdir(img_dir) if n.startswith('fdinfo-'))[0]
    return fdinfo, min(own_crit_entries(os.path.join(img_dir, fdinfo)), key=lambda e: e['fd'])


def file_becomes_autofs_pipe(img_dir, pid):
    """The description behind the lowest fd claims to be an autofs pipe (a kind we lack)."""
    fdinfo, fd = first_fd_file(img_dir)
    def edit(entries):
        for e in entries:
            if e['id'] == fd['id']:
                e['type'] = 'AUTOFS_PIPE'
    edit_image(img_dir, 'files.img', edit)
    edit_image(img_dir, fdinfo, lambda es: [e.update(type='AUTOFS_PIPE') for e in es
                                            if e['id'] == fd['id']])


def bpf_map_one_element_more(img_dir, pid):
    """The first BPF map's record claims one element more than its bytes hold."""
    edit_image(img_dir, 'bpfmap-data.img', lambda es: es[0].update(count=es[0]['count'] + 1))


def bpf_map_records_twice(img_dir, pid):
    """Each BPF map gets a second record of other elements after the first (one record per
    description, as another dumper may write them): restore takes the first."""
    def edit(entries):
        for e in list(entries):
            data = base64.b64decode(e['extra'])
            entries.append(dict(e, extra=base64.b64encode(data[::-1]).decode()))
    edit_image(img_dir, 'bpfmap-data.img', edit)


def bpf_map_lru_too_small(img_dir, pid):
    """The big LRU map is made with room for its elements alone: the kernel evicts some as
    they are put back (it keeps 128 free per CPU), which restore must notice."""
    def edit(entries):
        for e in entries:
            if e.get('bpf', {}).get('map_name') == 'zdtm_many':
                e['bpf']['max_entries'] = 20000
    edit_image(img_dir, 'files.img', edit)


def bpf_map_flags_refused(img_dir, pid):
    """The first BPF map gets a map flag no kernel knows: BPF_MAP_CREATE refuses it, in the
    restored task, once the tree exists."""
    def edit(entries):
        next(e for e in entries if 'bpf' in e)['bpf']['map_flags'] |= 0x40000000
    edit_image(img_dir, 'files.img', edit)


def epoll_watches_missing_fd(img_dir, pid):
    """The epoll's first watched fd becomes one the task does not have."""
    def edit(entries):
        for e in entries:
            if e['type'] == 'EVENTPOLL' and e['epfd'].get('tfd'):
                e['epfd']['tfd'][0]['tfd'] = 999
    edit_image(img_dir, 'files.img', edit)


def pty_session_leader_gone(img_dir, pid):
    """The pty's master says it controls a session no task of the images leads."""
    edit_image(img_dir, 'tty-info.img', lambda es: [e.update(sid=4194000) for e in es
                                                     if e['type'] == 'PTY' and e['id'] & 1])


def tty_data_for_unknown_pty(img_dir, pid):
    """Bytes queued for a pty tty-info.img does not have."""
    edit_image(img_dir, 'tty-data.img', lambda es: es[0].update(tty_id=2 * 5000 + 1))


def unix_peer_goes_missing(img_dir, pid):
    """The first Unix socket's peer becomes an inode no socket of the images has."""
    def edit(entries):
        [e for e in entries if e['type'] == 'UNIXSK'][0]['usk']['peer'] = 999999
    edit_image(img_dir, 'files.img', edit)


def tcp_stream_goes_missing(img_dir, pid):
    """An established connection's tcp-stream image is gone."""
    os.unlink(os.path.join(img_dir, sorted(n for n in os.listdir(img_dir)
                                           if n.startswith('tcp-stream-'))[0]))


def tcp_stream_short_queue(img_dir, pid):
    """The largest tcp-stream image loses the last byte of its queues."""
    paths = [os.path.join(img_dir, n) for n in os.listdir(img_dir) if n.startswith('tcp-stream-')]
    path = max(paths, key=os.path.getsize)
    os.truncate(path, os.path.getsize(path) - 1)


def inet_family_unknown(img_dir, pid):
    """An INET socket of a family this criu does not restore (AF_PACKET)."""
    edit_image(img_dir, 'files.img', lambda es: [e['isk'].update(family=17) for e in es
                                                 if e['type'] == 'INETSK'][:1])


def raw_peer_unreachable(img_dir, pid):
    """A connected IPv6 raw socket's peer made an address its namespace has no route to."""
    # the image's words: the address's bytes as host-order u32s
    unroutable = list(struct.unpack('=4I', socket.inet_pton(socket.AF_INET6, '2001:db8::1')))
    edit_image(img_dir, 'files.img', lambda es: [e['isk'].update(dst_addr=unroutable)
                                                 for e in es if e['type'] == 'INETSK' and
                                                 e['isk']['family'] == socket.AF_INET6 and
                                                 e['isk']['type'] == socket.SOCK_RAW and
                                                 e['isk']['state'] == 1][:1])


def inetsk_ext_add_opt(img_dir, level, name, value):
    edit_image(img_dir, 'inetsk-ext.img',
               lambda es: es[0]['opts'].append({'level': level, 'name': name, 'value': value}))


def inetsk_ext_ttl_opt(img_dir, pid):
    """A socket's inetsk-ext.img entry gets IP_TTL, which inet_sk_entry keeps."""
    inetsk_ext_add_opt(img_dir, socket.SOL_IP, socket.IP_TTL, 5)


def inetsk_ext_rfc4884_2(img_dir, pid):
    """A socket's inetsk-ext.img entry gets IP_RECVERR_RFC4884 2 (0 or 1 only)."""
    inetsk_ext_add_opt(img_dir, socket.SOL_IP, 26, 2)


def tcp_state_half_open(img_dir, pid):
    """A closing TCP connection made one in SYN_RECV, which restore does not make."""
    edit_image(img_dir, 'files.img', lambda es: [e['isk'].update(state=3) for e in es
                                                 if e['type'] == 'INETSK' and
                                                 e['isk']['state'] in (5, 8)][:1])


def iptables_rule_unknown_chain(img_dir, pid):
    """The iptables image's nft part gets a rule for a chain no table has."""
    path = [os.path.join(img_dir, n) for n in os.listdir(img_dir)
            if n.startswith('iptables-') and n.endswith('.img')][0]
    with open(path) as f:
        text = f.read()
    nft = text.index('(nf_tables)')
    at = text.index('COMMIT', nft)
    with open(path, 'w') as f:
        f.write(text[:at] + '-A ZDTM_NO_SUCH_CHAIN -j DROP\n' + text[at:])


def upstream_saved_lock(img_dir, pid):
    """Upstream criu's dump of a locked namespace has the lock's chain in its iptables image
    (which our restore must leave out)."""
    path = [os.path.join(img_dir, n) for n in os.listdir(img_dir)
            if n.startswith('iptables-') and n.endswith('.img')][0]
    with open(path) as f:
        if ':CRIU - ' not in f.read():
            raise TestFailure('upstream\'s iptables image has no lock chain', 'dump.log')


def remove_syn_sent_rules():
    """tcp_syn_sent_hostns's rules in the runner's iptables, where a failed test leaves them."""
    for tool in ('iptables-nft', 'ip6tables-nft'):
        rules = subprocess.run([tool, '-w', '-S', 'INPUT'], capture_output=True,
                               text=True).stdout.splitlines()
        for rule in rules:
            if 'zdtm_syn_sent' in rule and rule.startswith('-A '):
                subprocess.call([tool, '-w', '-D'] + rule.split()[1:])


def remove_in_tree_rule():
    """tcp_in_tree_locked's own rule in the runner's ip6tables, where a failed test leaves it."""
    rules = subprocess.run(['ip6tables', '-w', '-S', 'INPUT'], capture_output=True,
                           text=True).stdout.splitlines()
    for rule in rules:
        if 'zdtm_tcp_in_tree' in rule and rule.startswith('-A '):
            subprocess.call(['ip6tables', '-w', '-D'] + rule.split()[1:])


def in_tree_lock_check(method):
    """An image_check() of tcp_in_tree_locked (its ports in {out}/work/ports): right after
    the dump, each end of its connections is locked by its own rules: with 'iptables' two
    rules (INPUT, OUTPUT) marked 0xc114 per end, so that each port is named by four, the
    end's and its peer's; with 'nftables' one element per end in the table inet CRIU-PID,
    each port in two. With None (-R, -s, --network-lock skip) none is left."""
    def check(img_dir, pid):
        with open(os.path.join(os.path.dirname(img_dir), 'work', 'ports')) as f:
            ports = f.read().split()
        rules = [line for line in subprocess.run(['sh', '-c', 'iptables -w -S; ip6tables -w -S'],
                                                 capture_output=True, text=True).stdout.splitlines()
                 if '0xc114' in line]
        table = subprocess.run(['nft', 'list', 'table', 'inet', 'CRIU-%d' % pid],
                               capture_output=True, text=True)
        for port in ports:
            in_rules = sum(1 for line in rules if (' %s ' % port) in line)
            in_table = sum(1 for word in table.stdout.split() if word.strip(',{}') == port)
            want = {'iptables': (4, 0), 'nftables': (0, 2), None: (0, 0)}[method]
            if (in_rules, in_table) != want:
                raise TestFailure('after the dump port %s is in %d lock rules and %d elements '
                                  'of the nftables lock, not %d and %d'
                                  % ((port, in_rules, in_table) + want), 'dump.log')
    return check


NETLOCK_NETNS = 'zdtm_nlock'


def remove_netns_nlock():
    """ns_net_lock's net namespace, which outlives its tree."""
    subprocess.call(['ip', 'netns', 'delete', NETLOCK_NETNS], stderr=subprocess.DEVNULL)


def netns_nlock_unlocked():
    """After a failed restore into ns_net_lock's namespace: no table of either family and
    backend there has the network lock's chain, and there is no nftables lock table."""
    out = subprocess.run(['ip', 'netns', 'exec', NETLOCK_NETNS, 'sh', '-c',
                          'iptables-nft-save; ip6tables-nft-save; iptables-legacy-save; '
                          'ip6tables-legacy-save; nft list tables'],
                         capture_output=True, text=True).stdout
    if 'CRIU' in out:
        raise TestFailure('the network lock\'s chain CRIU is left after the failed restore',
                          'restore.log')


def fd_names_missing_file(img_dir, pid):
    fdinfo, fd = first_fd_file(img_dir)
    edit_image(img_dir, fdinfo, lambda es: [e.update(id=999999) for e in es
                                            if e['fd'] == fd['fd']])


def inventory_version_1(img_dir, pid):
    edit_image(img_dir, 'inventory.img', lambda es: es[0].update(img_version=1))


def aio_ring_moved(img_dir, pid):
    """The first AIO ring's aios entry names an address no AIO ring VMA starts at."""
    def move(es):
        es[0]['aios'][0]['id'] = int(str(es[0]['aios'][0]['id']), 0) + 4096
    edit_image(img_dir, 'mm-%d.img' % pid, move)


def posix_mq_bad_name(img_dir, pid):
    """The first POSIX message queue of the IPC namespace is named with a '/' inside."""
    name = [n for n in os.listdir(img_dir) if n.startswith('ipcns-mq-')][0]
    edit_image(img_dir, name, lambda es: es[0].update(name='a/b'))


def lsm_label_recorded(img_dir, pid):
    """The task ran under an LSM label (an AppArmor profile) that criu's own is not."""
    edit_image(img_dir, 'core-%d.img' % pid,
               lambda es: es[0]['thread_core']['creds'].update(lsm_profile='zdtm_confined'))


def chmod_shared_offset_file(bits):
    """An after_dump()/corrupt(): file_dup_shared_offset's file gets mode bits (its type
    kept) between dump and restore; the test's cwd is work/ beside the images."""
    def change(img_dir, pid):
        os.chmod(os.path.join(os.path.dirname(img_dir), 'work', 'shared-offset.data'), bits)
    return change


def shared_offset_file_mode(bits):
    """An after_restore(): the file keeps the mode it was given (restore changes none)."""
    def check(out):
        mode = os.stat(os.path.join(out, 'work', 'shared-offset.data')).st_mode & 0o7777
        if mode != bits:
            raise TestFailure('shared-offset.data has mode %#o after restore, not %#o'
                              % (mode, bits))
    return check


def own_lsm_label():
    """The runner's own label (attr/current), or '' where no LSM labels tasks."""
    try:
        with open('/proc/self/attr/current') as attr:
            return attr.read().rstrip('\n\0')
    except OSError:
        return ''


def restored_lsm_label(label):
    """An after_restore(): the restored task's attr/current says label, its mode suffix
    (AppArmor's " (enforce)") left out; None: no LSM labels it (EINVAL)."""
    def check(out):
        with open(os.path.join(out, 'test.pid')) as pidfile:
            pid = int(pidfile.read())
        try:
            with open('/proc/%d/attr/current' % pid) as attr:
                got = attr.read().rstrip('\n\0')
        except OSError as err:
            got = None if err.errno == errno.EINVAL else str(err)
        if got is not None and label is not None and got.split(' (')[0] == label:
            return
        if got != label:
            raise TestFailure('the restored task\'s LSM label is %r, not %r' % (got, label))
    return check


def cpuinfo_entry(img_dir):
    return own_crit_entries(os.path.join(img_dir, 'cpuinfo.img'))[0]['x86_entry'][0]


def cpuinfo_as_criu_writes(img_dir, pid):
    """An image_check(): dump --cpu-cap wrote cpuinfo.img, the bytes `criu cpuinfo dump`
    writes; upstream criu's cpuinfo check takes it (where upstream criu is here)."""
    fresh = os.path.join(img_dir, '..', 'cpuinfo-dump')
    os.makedirs(fresh, exist_ok=True)
    subprocess.run([CRIU, 'cpuinfo', 'dump', '-D', fresh], check=True)
    with open(os.path.join(img_dir, 'cpuinfo.img'), 'rb') as a, \
            open(os.path.join(fresh, 'cpuinfo.img'), 'rb') as b:
        if a.read() != b.read():
            raise TestFailure('cpuinfo.img of the dump differs from criu cpuinfo dump\'s')
    if os.path.exists(UPSTREAM_CRIU):
        proc = subprocess.run([UPSTREAM_CRIU, 'cpuinfo', 'check', '--cpu-cap=all', '-D', fresh,
                               '-o', 'upstream-check.log'], capture_output=True)
        if proc.returncode:
            raise TestFailure('upstream criu cpuinfo check refuses our cpuinfo.img')


def no_cpuinfo_image(img_dir, pid):
    """An image_check(): --cpu-cap=none (or no --cpu-cap) writes no cpuinfo.img."""
    if os.path.exists(os.path.join(img_dir, 'cpuinfo.img')):
        raise TestFailure('the dump wrote cpuinfo.img')


def cpuinfo_edit(change):
    """A corrupt(): the dumped CPU's x86 entry as change() makes it."""
    def corrupt(img_dir, pid):
        edit_image(img_dir, 'cpuinfo.img', lambda es: change(es[0]['x86_entry'][0]))
    return corrupt


def missing_instruction_bit(entry):
    """The lowest AVX-512 bit (CPUID 7.0 EBX, word 9) this CPU lacks, or another word 9 bit."""
    word = entry['capability'][9]
    bit = next(b for b in list(range(16, 32)) + list(range(16)) if not word >> b & 1)
    entry['capability'][9] = word | 1 << bit


def pages_in_parent(img_dir, pid):
    """The first run of pages says it lives in a parent image (PE_PARENT)."""
    edit_image(img_dir, 'pagemap-%d.img' % pid, lambda es: es[1].update(flags=1))


def bad_parent_pagemap(out, pid):
    """A parent images directory whose pagemap of the task is not an image."""
    os.makedirs(os.path.join(out, 'bad-parent'))
    with open(os.path.join(out, 'bad-parent', 'pagemap-%d.img' % pid), 'wb') as image:
        image.write(b'not an image')


def parent_link_to_empty_dir(img_dir, pid):
    """The first run of pages is in the parent images, whose directory lacks the task's
    pagemap."""
    pages_in_parent(img_dir, pid)
    os.makedirs(os.path.join(img_dir, '..', 'empty-parent'))
    os.symlink('../empty-parent', os.path.join(img_dir, 'parent'))


def parent_without_pages(img_dir, pid):
    """The first run of pages is in the parent images, which hold the task's pagemap but no
    pages image (as a pre-dump --page-server leaves its -D)."""
    parent = os.path.join(img_dir, '..', 'pagemap-only-parent')
    os.makedirs(parent)
    shutil.copy(os.path.join(img_dir, 'pagemap-%d.img' % pid), parent)
    pages_in_parent(img_dir, pid)
    os.symlink('../pagemap-only-parent', os.path.join(img_dir, 'parent'))


def first_pre_dump_punched(img_dir, nr_pages=24):
    """Deduplicated: the first pre-dump's pages image lost the nr_pages stored again later
    to holes (mem_predump_changes rewrites 16 after it, then 8 after the second)."""
    pre_dir = img_dir + '-pre1'
    pages = [os.path.join(pre_dir, n) for n in os.listdir(pre_dir) if n.startswith('pages-')]
    if len(pages) != 1:
        raise TestFailure('pre-dump 1 has %d pages images' % len(pages))
    st = os.stat(pages[0])
    if st.st_blocks * 512 > st.st_size - nr_pages * 4096:
        raise TestFailure('%s: %d bytes allocated of %d: no holes for the pages stored again'
                          % (pages[0], st.st_blocks * 512, st.st_size), 'dump.log')


def vma_becomes_sysv_shm(img_dir, pid):
    """The heap claims to be SysV shared memory (VMA_AREA_SYSVIPC)."""
    def edit(entries):
        heap = [v for v in entries[0]['vmas'] if v['status'] & VMA_AREA_HEAP][0]
        heap['status'] |= VMA_AREA_SYSVIPC
    edit_image(img_dir, 'mm-%d.img' % pid, edit)


def guard_region_outside(img_dir, pid):
    """The last guard region (VMA_AREA_GUARD) moves to the top page of the user address
    space, which no VMA holds."""
    def edit(entries):
        guard = [v for v in entries[0]['vmas'] if v['status'] == VMA_AREA_GUARD][-1]
        top = 0x7ffffffff000
        as_text = isinstance(guard['start'], str)
        guard['start'], guard['end'] = ((hex(top - 4096), hex(top)) if as_text
                                        else (top - 4096, top))
    edit_image(img_dir, 'mm-%d.img' % pid, edit)


def sysv_segment_removed(img_dir, pid):
    """The SysV segment the task attached is removed before the restore (it is not in the
    images: restore must find it gone before any task exists)."""
    vmas = own_crit_entries(os.path.join(img_dir, 'mm-%d.img' % pid))[0]['vmas']
    for shmid in {v['shmid'] for v in vmas if v['status'] & VMA_AREA_SYSVIPC}:
        subprocess.run(['ipcrm', '-m', str(shmid)], check=True)


def every_watch_has_a_path(img_dir, pid):
    """--force-irmap: each inotify watch names its inode by a path too, and the path leads to
    that inode."""
    for entry in own_crit_entries(os.path.join(img_dir, 'files.img')):
        for wd in entry.get('ify', {}).get('wd', []):
            path = wd['f_handle'].get('path')
            if not path or os.lstat(path).st_ino != wd['i_ino']:
                raise TestFailure('watch %d of inode %#x has the path %r' %
                                  (wd['wd'], wd['i_ino'], path), 'dump.log')


def epoll_watches_fd_77(img_dir, pid):
    """The epoll in flight claims to watch fd 77, which the task that restores it lacks."""
    def edit(entries):
        for e in entries:
            if e['type'] == 'EVENTPOLL':
                e['epfd']['tfd'][0]['tfd'] = 77
    edit_image(img_dir, 'files.img', edit)


def dead_pid_becomes_1(img_dir, pid):
    """The dead process whose /proc directory the cwd is claims pid 1, which is alive."""
    def edit(entries):
        for e in entries:
            if e.get('remap_type') == 'PROCFS':
                e['remap_id'] = 1
    edit_image(img_dir, 'remap-fpath.img', edit)


def seccomp_chain_loops(img_dir, pid):
    """The newest filter of the first chain names the next older one as its next newer."""
    def edit(entries):
        entries[0]['seccomp_filters'][0]['prev'] = 1
    edit_image(img_dir, 'seccomp.img', edit)


def lock_names_missing_fd(img_dir, pid):
    edit_image(img_dir, 'filelocks.img', lambda es: es[0].update(fd=77))


def read_lock_becomes_write(img_dir, pid):
    """file_locks_posix's read lock on its read-only fd 42 claims to be a write lock."""
    edit_image(img_dir, 'filelocks.img', lambda es: [e.update(type=1) for e in es
                                                     if e['fd'] == 42])


def lock_becomes_read_lease(img_dir, pid):
    """file_locks_posix's first lock (on fd 40, open read-write) claims to be a read lease."""
    edit_image(img_dir, 'filelocks.img', lambda es: es[0].update(flag=8, type=0))


def open_leased_file(img_dir, pid):
    """The runner opens the file file_leases holds a write lease on: restore cannot take
    that lease back. Returns the file, whose close() lets the lease be taken again."""
    return open(os.path.join(os.path.dirname(img_dir), 'work', 'write.lease'), 'rb')


def take_conflicting_lock(img_dir, pid):
    """The runner read-locks a byte file_locks_posix had write-locked: restore cannot take
    that lock back. Returns the file, whose close() releases it."""
    held = open(os.path.join(os.path.dirname(img_dir), 'work', 'file-locks-rw.data'), 'rb')
    fcntl.lockf(held, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 150)
    return held


def memfd_unknown_seal(img_dir, pid):
    """The first memfd claims a seal no kernel has (0x400)."""
    edit_image(img_dir, 'memfd.img', lambda es: es[0].update(seals='0x400'))


def memfd_size_under_its_pages(img_dir, pid):
    """mfd-alpha's size no longer covers its stored pages (page 10 is stored)."""
    edit_image(img_dir, 'memfd.img', lambda es: [e.update(size=4096) for e in es
                                                 if e['name'] == 'mfd-alpha'])


def memfd_file_names_missing_inode(img_dir, pid):
    """The first memfd description names a memfd object that memfd.img does not have."""
    def edit(entries):
        next(e for e in entries if e['type'] == 'MEMFD')['memfd']['inode_id'] = 999
    edit_image(img_dir, 'files.img', edit)


def unix_file_owner_unmapped(img_dir, pid):
    """The bound Unix socket's file is owned by a uid its tree's user namespace does not map."""
    def edit(entries):
        next(e for e in entries if e['type'] == 'UNIXSK')['usk']['file_perms']['uid'] = 70000
    edit_image(img_dir, 'files.img', edit)


def ghost_owner_unmapped(img_dir, pid):
    """Every deleted file is owned by a uid its tree's user namespace does not map."""
    def edit(entries):
        entries[0]['uid'] = 70000
    for name in os.listdir(img_dir):
        if name.startswith('ghost-file-'):
            edit_image(img_dir, name, edit)


def truncate_ghost_file(img_dir, pid):
    """Cut a deleted file's saved contents short."""
    for name in os.listdir(img_dir):
        if name.startswith('ghost-file-'):
            path = os.path.join(img_dir, name)
            os.truncate(path, os.path.getsize(path) - 100)


def inotify_watch_lost(img_dir, pid):
    """The first inotify watch's handle names a stale generation of its inode, no path."""
    def edit(entries):
        watch = [e for e in entries if e['type'] == 'INOTIFY'][0]['ify']['wd'][0]
        watch['f_handle']['handle'][0] ^= 0xffff << 32  # ext4: inode number, generation
        watch['f_handle'].pop('path', None)
    edit_image(img_dir, 'files.img', edit)


def inotify_wd_far_away(img_dir, pid):
    """An inotify watch claims a wd a billion numbers past the others."""
    def edit(entries):
        [e for e in entries if e['type'] == 'INOTIFY'][0]['ify']['wd'][-1]['wd'] = 1 << 30
    edit_image(img_dir, 'files.img', edit)


def binfmt_offset_refused(img_dir, pid):
    """The magic handler (registered after the extension one) at an offset the kernel refuses."""
    def edit(entries):
        next(e for e in entries if e['name'].startswith('zdtm_magic'))['offset'] = 300
    edit_image(img_dir, 'binfmt-misc.img', edit)


def no_binfmt_image(img_dir, pid):
    """The host's binfmt_misc instance is not the tree's: its handlers are not saved."""
    if os.path.exists(os.path.join(img_dir, 'binfmt-misc.img')):
        raise TestFailure('binfmt-misc.img saved the handlers of the host\'s binfmt_misc')


def remove_host_binfmt(name):
    """The host's handlers test name registered (named after its output directory's inode),
    and its mount of the host's instance ({out}/binfmt-host)."""
    out = os.path.join(OUT_DIR, name)
    suffix = '%x' % os.stat(out).st_ino
    subprocess.run(['unshare', '-m', 'sh', '-c',
                    'd=$(mktemp -d) && mount -t binfmt_misc none "$d" && '
                    'for f in "$d/zdtm_magic_%s" "$d/zdtm_ext_%s"; do '
                    '[ ! -e "$f" ] || echo -1 > "$f"; done; umount "$d"; rmdir "$d"'
                    % (suffix, suffix)], check=False)
    umount_lazy(os.path.join(out, 'binfmt-host'))


def fown_names_no_task(img_dir, pid):
    """The pipe owned by the process names, as its owner, a pid the tree does not have."""
    def edit(entries):
        pipe = next(e['pipe'] for e in entries if 'pipe' in e and e['pipe']['fown']['pid'])
        pipe['fown']['pid'] = 999999
    edit_image(img_dir, 'files.img', edit)


def edit_files_entries(img_dir, kind, field, value):
    """Every file_entry's sub-message kind ('tfd', 'efd', ...) gets field = value."""
    edit_image(img_dir, 'files.img', lambda es: [e[kind].update({field: value}) for e in es
                                                 if kind in e])


def timerfd_bad_clock(img_dir, pid):
    edit_files_entries(img_dir, 'tfd', 'clockid', 99)


def pidfd_names_unknown_pid(img_dir, pid):
    """Every pidfd claims to name a pid that no task of the images has."""
    edit_files_entries(img_dir, 'pidfd', 'nspid', 4194000)


def nsfs_names_other_ns(img_dir, pid):
    """Every namespace file names a namespace id the tree does not live in."""
    edit_files_entries(img_dir, 'nsf', 'ns_id', 999)


def netlink_bad_state(img_dir, pid):
    """Every netlink socket claims a state sock_diag never shows for one."""
    edit_files_entries(img_dir, 'nlsk', 'state', 5)


def packet_bad_type(img_dir, pid):
    """Every packet socket claims a socket type AF_PACKET has not (SOCK_SEQPACKET)."""
    edit_files_entries(img_dir, 'psk', 'type', 5)


def eventfd_counter_max(img_dir, pid):
    """A counter no write(2) can set (only the kernel's own signals reach it)."""
    edit_files_entries(img_dir, 'efd', 'counter', 2**64 - 1)


def root_gets_own_ns(img_dir, pid, field):
    """The root's ids say it has a namespace of its own of a kind (field: mnt_ns_id, ...)."""
    edit_image(img_dir, 'ids-%d.img' % pid, lambda es: es[0].update({field: 999}))


# The nftables network lock (netlock-nft.c).
NFT_LOCK_ARGS = ['--network-lock', 'nftables']
# Connections in criu's own net namespace dumped without the network lock, for the tests
# whose restore fails: a failed restore leaves the dump's lock of each in place (the
# images stay restorable), and no later restore of theirs would remove it.
TCP_UNLOCKED = ['--tcp-established', '--network-lock', 'skip']
# tcp_in_tree_locked's action script: fails the dump at post-dump only where the lock
# holds each end of its connections: each of its ports named by a lock rule of iptables
# (mark 0xc114) or by an element of the nftables lock's table (inet CRIU-PID).
IN_TREE_LOCKED_SCRIPT = '''[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0
locks=$({ iptables -w -S; ip6tables -w -S; } | grep 0xc114
	nft list table inet "CRIU-$CRTOOLS_INIT_PID")
for port in $(cat "$CRTOOLS_IMAGE_DIR/../work/ports"); do
	echo "$locks" | grep -qw "$port" || exit 0
done
exit 1'''
NFT_LOCK_TAKEN = {}


def nft_lock_table_taken(out, pid):
    """A setup(): a table of the nftables lock's name (inet CRIU-PID) that is not the lock
    (no sets) is in the runner's namespace already, which the dump must not take for its
    own; nft_lock_table_remove() removes it after the test."""
    NFT_LOCK_TAKEN['table'] = 'CRIU-%d' % pid
    subprocess.run(['nft', 'add', 'table', 'inet', NFT_LOCK_TAKEN['table']], check=True)


def nft_lock_table_remove():
    if 'table' in NFT_LOCK_TAKEN:
        subprocess.run(['nft', 'delete', 'table', 'inet', NFT_LOCK_TAKEN.pop('table')])


def nft_images_as_criu_writes(img_dir, pid):
    """An image_check(): the tree's nftables image leaves out iptables-nft's table ip
    filter (the iptables images' part); then both images become what CRIU writes for that
    table, iptables-save's text in iptables-NSID.img and nft's listing of it again in
    nftables-NSID.img, which restore must load once (the tree's root is the init of its own
    pid namespace: ids-1.img)."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']
    nft_img = os.path.join(img_dir, 'nftables-%d.img' % ns_id)
    with open(nft_img) as img:
        if 'table ip filter' in img.read():
            raise TestFailure('%s has iptables-nft\'s table ip filter' % nft_img, 'dump.log')
    made = subprocess.run(['unshare', '-n', 'sh', '-c', 'iptables -A INPUT -p icmp -j DROP && '
                           'iptables-save && echo "#nft" && nft list table ip filter'],
                          capture_output=True, text=True, check=True).stdout
    ipt_text, nft_text = made.split('#nft\n')
    with open(os.path.join(img_dir, 'iptables-%d.img' % ns_id), 'w') as img:
        img.write(ipt_text)
    with open(nft_img, 'a') as img:
        img.write(nft_text)


def netns_nftables_unloadable(img_dir, pid):
    """The tree's nftables image gets a chain nft cannot load after its tables (the tree's
    root is the init of its own pid namespace: ids-1.img): none of it must be loaded."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']
    with open(os.path.join(img_dir, 'nftables-%d.img' % ns_id), 'a') as img:
        img.write('table inet zdtm_bad {\n\tchain c {\n\t\tno such statement\n\t}\n}\n')


def netns_ping_range(value):
    """A corrupt(): the tree's net.ipv4.ping_group_range becomes value (its root is the
    init of its own pid namespace: ids-1.img)."""
    def corrupt(img_dir, pid):
        ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']
        edit_image(img_dir, 'netns-%d.img' % ns_id,
                   lambda es: es[0]['ipv4_sysctl'][0].update(sarg=value))
    return corrupt


def small_mtu_gets_ipv6_conf(img_dir, pid):
    """ns_net's veth zdtm_nin (MTU 1000: no net.ipv6.conf on this kernel) gets in its image
    the IPv6 settings of lo, as if dumped where it had them (the tree's root is the init of
    its own pid namespace: ids-1.img)."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']

    def edit(entries):
        links = {link['name']: link for link in entries}
        links['zdtm_nin']['conf6'] = links['lo']['conf6']
    edit_image(img_dir, 'netdev-%d.img' % ns_id, edit)


def macvlan_index_taken(img_dir, pid):
    """The tree's macvlan link had index 1, which criu's namespace's loopback has."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']

    def edit(entries):
        for link in entries:
            if link['name'] == 'zdtm_nmv':
                link['ifindex'] = 1
    edit_image(img_dir, 'netdev-%d.img' % ns_id, edit)


def nested_netns_ping_range(img_dir, pid):
    """ns_net_nested's second net namespace (not the root's, ids-1.img) gets a
    net.ipv4.ping_group_range that is not two gids."""
    root_ns = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']
    for name in sorted(os.listdir(img_dir)):
        if name.startswith('ids-'):
            ns_id = own_crit_entries(os.path.join(img_dir, name))[0]['net_ns_id']
            if ns_id != root_ns:
                edit_image(img_dir, 'netns-%d.img' % ns_id,
                           lambda es: es[0]['ipv4_sysctl'][0].update(sarg='100'))
                return
    raise TestFailure('no task in a nested net namespace')


def tun_link_removed(img_dir, pid):
    """ns_net_tun's zdtm_tun0 leaves the net namespace's links (a file still names it)."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['net_ns_id']
    edit_image(img_dir, 'netdev-%d.img' % ns_id,
               lambda es: es.__setitem__(slice(None), [e for e in es
                                                       if e['name'] != 'zdtm_tun0']))


def child_gets_own_uts_ns(img_dir, pid):
    """A child of the root (pid is one here) is in another UTS namespace than the root."""
    edit_image(img_dir, 'ids-%d.img' % pid, lambda es: es[0].update(uts_ns_id=999))


def child_gets_own_mnt_ns(img_dir, pid):
    """A child of the root (pid is one here) is in another mount namespace than the root."""
    edit_image(img_dir, 'ids-%d.img' % pid, lambda es: es[0].update(mnt_ns_id=999))


def ipc_msgmax_tiny(img_dir, pid):
    """The IPC namespace's kernel/msgmax becomes 4: the root's restore of the first queued
    message longer than that fails, after the tree's root was forked."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-%d.img' % pid))[0]['ipc_ns_id']
    edit_image(img_dir, 'ipcns-var-%d.img' % ns_id, lambda es: es[0].update(msg_ctlmax=4))


def pidns_external(img_dir, pid):
    """The tree's pid namespace was given with --external pid[INODE]:KEY (pidns-ID.img)."""
    ns_id = own_crit_entries(os.path.join(img_dir, 'ids-1.img'))[0]['pid_ns_id']
    image = {'magic': 'PIDNS', 'entries': [{'ext_key': 'pid[4026531836]:host'}]}
    proc = subprocess.run([OWN_CRIT, 'encode', '-o', os.path.join(img_dir, 'pidns-%d.img' % ns_id)],
                          input=json.dumps(image).encode(), capture_output=True)
    if proc.returncode != 0:
        raise TestFailure('crit encode pidns: %s' % proc.stderr.decode().strip())


def pidns_nested_pid_taken(img_dir, pid):
    """The task two levels down that its init forks gets, there, the init's own pid (1)."""
    def take(entries):
        child = [e for e in entries
                 if e['pid'] != e['ns_init'] and len(e.get('ns_pids', [])) == 2][0]
        child['ns_pids'][1] = 1
    edit_image(img_dir, 'pidns-nested.img', take)


def pidns_nested_bad_init(img_dir, pid):
    """The init of the two-level namespace is pid 3 there, not 1."""
    def move(entries):
        init = [e for e in entries
                if e['pid'] == e['ns_init'] and len(e.get('ns_pids', [])) == 2][0]
        init['ns_pids'][1] = 3
    edit_image(img_dir, 'pidns-nested.img', move)


# --empty-ns net: the restored tree's new net namespace gets its loopback up from the
# setup-namespaces action script, as upstream zdtm's empty-netns-prep.sh does it.
LO_UP_SCRIPT = ('[ "$CRTOOLS_SCRIPT_ACTION" != setup-namespaces ] || '
                'nsenter -t "$CRTOOLS_INIT_PID" -n ip link set up dev lo')
# --external netdev[]'s link, made in criu's namespace before the restore.
NETDEV_PRE_SCRIPT = ('[ "$CRTOOLS_SCRIPT_ACTION" != pre-restore ] || '
                     'ip link add zdtm_npre type veth peer name zdtm_npeer')
# The mount test's options: --root is the directory its root mount was bound from.
MNT_NS_TREE = {'launcher': True, 'pidns': True,
               'dump_args': ['--external', 'mnt[/usr]:usr', '--external', 'mnt[/out]:out',
                             '--link-remap'],
               'restore_args': ['--root', '{work}/root', '--external', 'mnt[usr]:/usr',
                                '--external', 'mnt[out]:{out}']}


def mountpoints_entries(img_dir):
    """Every mount of every mountpoints-ID.img of the dump."""
    return [m for name in sorted(os.listdir(img_dir)) if name.startswith('mountpoints-')
            for m in own_crit_entries(os.path.join(img_dir, name))]


def ramfs_dumped_auto(img_dir, pid):
    """An image_check(): --enable-fs ramfs wrote /ramfs as CRIU's "auto" type, named."""
    found = [m for m in mountpoints_entries(img_dir) if m['mountpoint'] == '/ramfs']
    # CRIU's fstype AUTO, 16 (our schema's field is a number, Debian's crit names it)
    if len(found) != 1 or found[0]['fstype'] not in ('AUTO', 16) or \
            found[0].get('fsname') != 'ramfs':
        raise TestFailure('/ramfs in mountpoints: %r, not one AUTO entry named ramfs' % found)


def skipped_mounts_absent(img_dir, pid):
    """An image_check(): --skip-mnt /skipped left it and the mount below it out."""
    found = [m['mountpoint'] for m in mountpoints_entries(img_dir)
             if m['mountpoint'].startswith('/skipped')]
    if found:
        raise TestFailure('mountpoints images still have %s' % ', '.join(found))


def private_tmpfs_gets_context(img_dir, pid):
    """mnt_ns_tree's /private tmpfs had an SELinux context= option at dump."""
    for name in sorted(os.listdir(img_dir)):
        if name.startswith('mountpoints-'):
            edit_image(img_dir, name, lambda es: [m.update(options=m['options'] +
                                                           ',context="zdtm_a_t"')
                                                  for m in es if m['mountpoint'] == '/private'])


def mnt_restore_fails(restore_args, expect):
    """mnt_ns_tree restored with restore_args, which leave out what it needs."""
    return dict(MNT_NS_TREE, bin='mnt_ns_tree', mode='restore_fails',
                corrupt=lambda img_dir, pid: None, restore_args=restore_args, expect=expect)


# name -> how to run it. bin: program in test/bin (default: the name); mode:
#   default        dump (kills), restore -d, SIGTERM, verdict ('dump_args': more options,
#                  here and in the modes below that dump; 'restore_args': more restore
#                  options, here and in the cross modes; 'after_dump': f(img, pid) run
#                  between the dump and the restore; 'after_restore': f(out) run
#                  between the restore and the SIGTERM)
#   leave_running  dump -R: the process keeps running untouched, then SIGTERM, verdict
#   twice          restore, verdict, restore again from the same images, verdict
#   no_detach      restore without -d: criu stays the parent until the task exits
#   sibling        restore -d --restore-sibling: the root's parent is criu's parent
#   stopped        the task is SIGSTOPped before the dump and must come back stopped
#   tty            stdio on a pty, dump and restore with --shell-job
# devpts: a devpts instance of the test's own ({out}/devpts, $ZDTM_DEVPTS), so that the pty
# indices it gets are not taken by another process between dump and restore.
#   dump_fails     the dump must fail; every process and thread of the tree stays alive,
#                  neither stopped nor traced, with no write tracker (userfaultfd) left, and
#                  the tree passes its checks ('dump_args': more options, 'script': shell
#                  text written to {out}/script.sh, 'expect': what the error line says,
#                  'action': pre-dump instead of dump, 'setup': f(out, pid) run first)
#   restore_fails  dump ('dump_args'), damage the images with 'corrupt' (or hold what they
#                  need: what it returns is closed after), restore ('restore_args') must fail;
#                  'verify': f() raising TestFailure, what must hold after it failed
#   pid_in_use     dump -R, restore while the original still runs: must fail
#   cli            criu with 'args' must fail with one line on stderr; or, with 'rc', exit
#                  with rc and print exactly 'stdout' and 'stderr' (default: nothing).
#                  'files': {path under the test's dir: text} written first; 'env': criu's
#                  extra environment; 'created': files that must exist afterwards. Run in
#                  the test's dir with HOME there: no configuration file of the machine's
#                  is read ({out}, {free_pid} in any of these are filled in)
#   check_features criu check --feature NAME for every feature upstream CRIU knows
#   action_scripts dump and restore with --action-script: the script sees each stage, in
#                  order, with CRIU's environment
#   status_fd      dump, then restore without -d, each with --status-fd: \0 once done
#   leave_stopped  dump --leave-stopped, then restore --leave-stopped: every thread
#                  stopped each time, running on after SIGCONT ('dump_args',
#                  'restore_args': more options)
#   log_pid        restore --log-pid: each task's log in restore.log.PID
#   inherit_fd     the test's stdin is a pipe of the runner's, given back to the
#                  restored task with --inherit-fd fd[N]:pipe:[INODE]
#   plugin_round_trip      test/plugins/plugin_dev dumped and restored with the test
#                          plugins (-L), then the trace/images/log check named by 'check'
#   plugin_dump_fails      test_fail fails at hook 'fail': dump fails naming it, the
#                          process runs on untouched, plugins got exit(ret != 0)
#   plugin_restore_fails   restore fails (test_fail at 'fail', or plugins from 'libdir'):
#                          error names 'names', nothing left, images unchanged; then a
#                          clean restore must still work; 'env': extra criu environment
#   pre_dump       'pre_dumps' (default 1) criu pre-dumps chained with --prev-images-dir,
#                  each followed by SIGUSR1: the test changes its memory and writes the
#                  step's number to $ZDTM_STEP_FILE; then the final dump with the last
#                  pre-dump as parent, restore -d, verdict ('max_pages_bytes' bounds the
#                  final dump's own pages; 'upstream_restore': upstream criu restores;
#                  'pre_dump_args': more pre-dump options; 'dedup': criu dedup after the
#                  final dump; 'chain_check': f(img_dir) then, the pre-dumps beside it as
#                  img_dir-preN)
#   cross_dump_upstream    dumped by upstream criu (UPSTREAM_CRIU), restored by ours
#   page_server    criu page-server on a free loopback port (into {img}-ps), dump
#                  --page-server to it: no pages in -D, the server exits 0 and its images
#                  pass crit; they join the others in -D, restore -d, verdict
#                  ('ps_upstream_server' / 'ps_upstream_dump': upstream criu serves / dumps)
#   page_server_refuses    a client sends OPEN2 then 'ps_command' (cmd, nr_pages[,
#                  dst_id]): the server exits 1, its log saying 'expect'; the test runs on
#   page_server_dump_fails the dump fails ('expect') after connecting: the server exits 1
#   page_server_killed     the page server is stopped once the dump connected (pre-dump
#                  action script) and killed while the dump waits for it: as dump_fails
#   cross_restore_upstream dumped by ours, restored by upstream criu
#   criu_killed    criu dump is SIGKILLed while the parasite runs in the task (it waits for a
#                  page server that never answers): every thread runs on untraced, with the
#                  fds and mappings it had (the parasite's area aside, which stays), and the
#                  test passes its checks
# launcher: the test program forks the tree's root into namespaces of its own (as
#   `unshare -p -f` does; test_launch_root()), publishes the root's pid and exits: the root,
#   reparented to the runner, is the test's process. pidns: that root is the init of its own
#   pid namespace: restore gives it another pid in the runner's namespace (the pidfile's),
#   and every task of the tree must be back with its pid inside (checked from outside,
#   "NSpid:").
# Every mode that dumps also has each dump's images decoded by Debian's crit (CritHelper).
# image_check: f(img_dir, pid), run after each dump, raises TestFailure on what it finds.
# cleanup: f(), run once the test's processes are gone, whatever its verdict (its cgroups).
# upstream_env: environment of upstream criu's commands over UPSTREAM_ENV (None: unset);
# upstream_opts: its options instead of UPSTREAM_OPTS.
# max_pages_bytes: upper bound for the page images (only touched pages are stored).
# cpu_flags: the test's instructions need these; on other CPUs it is listed as not run.
# kernel: the kernel features (KERNEL_PROBES) it needs; where one is missing, not run.
def set_freezer(cgroup, state):
    """Write state to the v1 freezer cgroup and wait until it reads so (FROZEN is reached
    once every task stopped: a bound of CRIU_TIMEOUT, not a timing)."""
    path = os.path.join(cgroup, 'freezer.state')
    with open(path, 'w') as f:
        f.write(state)
    deadline = time.monotonic() + CRIU_TIMEOUT
    while True:
        with open(path) as f:
            if f.read().strip() == state:
                return
        if time.monotonic() > deadline:
            raise TestFailure('%s did not become %s' % (path, state))
        time.sleep(0.01)


def stats_in(name):
    """An after_dump/after_restore check: the stats file name is in the work directory (-W
    {work}) and not among the images, where CRIU puts it (runc and podman read it there)."""
    def check(path, pid=None):
        out = os.path.dirname(path) if pid is not None else path
        work, img = os.path.join(out, 'work'), os.path.join(out, 'img')
        if not os.path.exists(os.path.join(work, name)):
            raise TestFailure('no %s in the work directory (%s)' % (name, work))
        if os.path.exists(os.path.join(img, name)):
            raise TestFailure('%s is among the images, not only in the work directory' % name)
    return check


REMOTE_LAZY = {'mode': 'remote_lazy', 'launcher': True, 'pidns': True, 'lazy': True,
               'test_env': {'ZDTM_PIDNS_ROOT': '1'}}
TESTS = {
    'mem_anon_private': {},
    'aio_rings': {},
    'stats_work_dir': {'bin': 'mem_anon_private', 'dump_args': ['-W', '{work}'],
                       'restore_args': ['-W', '{work}'], 'after_dump': stats_in('stats-dump'),
                       'after_restore': stats_in('stats-restore')},
    # lazy restore (criu lazy-pages): 'lazy' restores lazily, 'lazy_faults' asks that the
    # daemon served faults, i.e. that the task ran and touched its memory before it was in
    'lazy_mem_anon_private': {'bin': 'mem_anon_private', 'lazy': True},
    'lazy_mem_guard_regions': {'bin': 'mem_guard_regions', 'lazy': True},
    'lazy_big_buffer': {'lazy': True, 'lazy_faults': True},
    'lazy_fork': {'lazy': True, 'lazy_faults': True},
    'lazy_mremap_munmap': {'lazy': True, 'lazy_faults': True},
    # no lazy_faults: on a loaded machine the copy may be done before the task runs; the
    # moves are checked all the same
    'lazy_mremap_churn': {'lazy': True},
    'lazy_threads': {'lazy': True, 'lazy_faults': True},
    'lazy_tree': {'lazy': True},
    'lazy_daemon_killed': {'bin': 'lazy_big_buffer', 'mode': 'lazy_daemon_killed',
                           'test_env': {'ZDTM_LAZY_MIB': '512'}},
    'lazy_daemon_killed_fork': {'bin': 'lazy_fork', 'mode': 'lazy_daemon_killed'},
    'restore_fail_lazy_no_daemon': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                    'corrupt': lambda img_dir, pid: None,
                                    'restore_args': ['--lazy-pages'],
                                    'expect': 'criu lazy-pages'},
    # remote lazy (dump --lazy-pages serves the tree's pages, criu lazy-pages --page-server
    # fetches them): each test as the init of a pid namespace (ZDTM_PIDNS_ROOT), so that the
    # restore gets its pids while the dumped tree is still there
    'remote_lazy_mem_anon_private': dict(REMOTE_LAZY, bin='mem_anon_private'),
    'remote_lazy_mem_guard_regions': dict(REMOTE_LAZY, bin='mem_guard_regions'),
    'remote_lazy_big_buffer': dict(REMOTE_LAZY, bin='lazy_big_buffer', lazy_faults=True),
    'remote_lazy_fork': dict(REMOTE_LAZY, bin='lazy_fork', lazy_faults=True, tree_grows=True),
    'remote_lazy_mremap_munmap': dict(REMOTE_LAZY, bin='lazy_mremap_munmap', lazy_faults=True),
    'remote_lazy_mremap_churn': dict(REMOTE_LAZY, bin='lazy_mremap_churn'),
    # pages process_vm_readv cannot read: the source takes them through /proc/PID/mem
    'remote_lazy_mem_prot_none_data': dict(REMOTE_LAZY, bin='mem_prot_none_data'),
    'lazy_mem_prot_none_data': {'bin': 'mem_prot_none_data', 'lazy': True},
    'remote_lazy_threads': dict(REMOTE_LAZY, bin='lazy_threads', lazy_faults=True),
    'remote_lazy_tree': dict(REMOTE_LAZY, bin='lazy_tree'),
    'remote_lazy_source_killed': dict(REMOTE_LAZY, bin='lazy_big_buffer',
                                      mode='remote_lazy_killed', kill='source',
                                      test_env={'ZDTM_PIDNS_ROOT': '1', 'ZDTM_LAZY_MIB': '512'}),
    # upstream's lazy-pages daemon and restore take the pages from our source. The other
    # way round is not tested: CRIU 4.2's dump --lazy-pages fails its first PS_IOV_GET
    # (page-pipe splice: EBADF), whoever asks.
    'cross_us2up_remote_lazy': dict(REMOTE_LAZY, bin='lazy_big_buffer', lazy_daemon='upstream',
                                    setsid=True),
    'remote_lazy_daemon_killed': dict(REMOTE_LAZY, bin='lazy_big_buffer',
                                      mode='remote_lazy_killed', kill='daemon',
                                      test_env={'ZDTM_PIDNS_ROOT': '1', 'ZDTM_LAZY_MIB': '512'}),
    # the lazy restore fails once its tasks exist: the source keeps the only copy
    'remote_lazy_restore_fails': dict(REMOTE_LAZY, bin='mem_anon_private',
                                      mode='remote_lazy_restore_fails'),
    'remote_lazy_restore_not_lazy': dict(REMOTE_LAZY, bin='mem_anon_private',
                                         mode='remote_lazy_not_lazy',
                                         expect="left on the dump's source"),
    # dump --lazy-pages failing before it serves: the tree runs on untouched
    'remote_lazy_dump_cannot_listen': {'bin': 'mem_anon_private', 'mode': 'dump_fails',
                                       'dump_args': ['--lazy-pages', '--address', '192.0.2.1',
                                                     '--port', '{free_port}'],
                                       'expect': 'cannot listen on 192.0.2.1:'},
    'remote_lazy_dump_fails': {'bin': 'tree_shared_fdtable', 'mode': 'dump_fails',
                               'test_env': {'ZDTM_FDTABLE_SIBLINGS': '1'},
                               'dump_args': ['--lazy-pages', '--address', '127.0.0.1',
                                             '--port', '{free_port}'],
                               'expect': 'share one fd table (CLONE_FILES)'},
    'remote_lazy_no_source': {'bin': 'mem_anon_private', 'mode': 'remote_lazy_no_source',
                              'restore_args': ['--lazy-pages'], 'expect': 'criu lazy-pages'},
    'static_mem_anon_private': {},
    'mem_private_file_cow': {},
    'mem_shared_anon': {},
    'mem_shared_anon_alias': {},
    'mem_shared_anon_fd': {},
    'sysv_shm_attached': {},
    'sysv_shm_hugetlb': {},
    'mem_shared_file': {},
    'mem_prot_none_guard': {},
    'mem_prot_none_data': {},
    'itimer_real_pending': {},
    'maps_equal': {},
    'vdso_unmapped': {},
    'mem_sparse_pagemap': {'max_pages_bytes': 12 << 20},
    # pre-dumps: two chained, the final dump storing only what changed since the second
    'mem_predump_changes': {'mode': 'pre_dump', 'pre_dumps': 2, 'max_pages_bytes': 1 << 20,
                            'dump_args': ['--track-mem']},
    # --auto-dedup: pages stored again leave holes in the parents, restore is unchanged
    'mem_predump_dedup': {'bin': 'mem_predump_changes', 'mode': 'pre_dump', 'pre_dumps': 2,
                          'pre_dump_args': ['--auto-dedup'], 'dump_args': ['--auto-dedup'],
                          'chain_check': first_pre_dump_punched},
    # criu dedup after the final dump: the 8 pages it stores again leave the first pre-dump
    'mem_predump_dedup_command': {'bin': 'mem_predump_changes', 'mode': 'pre_dump',
                                  'pre_dumps': 2, 'dedup': True,
                                  'chain_check': lambda img: first_pre_dump_punched(img, 8)},
    # a lazy restore cannot serve what a pre-dump parent holds: refused, nothing created
    'restore_fail_lazy_predump': {'bin': 'mem_predump_changes', 'mode': 'pre_dump',
                                  'pre_dumps': 2, 'lazy_restore_fails': True,
                                  'restore_args': ['--lazy-pages'],
                                  'expect': 'lazy restore of a pre-dump chain is not supported'},
    # the same chain restored by upstream criu (upstream cannot pre-dump here: no soft-dirty)
    # memory over TCP: criu page-server receives what dump --page-server sends
    'page_server_mem_anon_private': {'bin': 'mem_anon_private', 'mode': 'page_server'},
    'page_server_big_buffer': {'bin': 'lazy_big_buffer', 'mode': 'page_server'},
    'page_server_threads': {'bin': 'threads_regs_tls', 'mode': 'page_server'},
    'page_server_tree_shared_anon': {'bin': 'tree_shared_anon', 'mode': 'page_server'},
    'page_server_memfd': {'bin': 'memfd_mapped_shared', 'mode': 'page_server'},
    'page_server_not_listening': {'bin': 'mem_anon_private', 'mode': 'dump_fails',
                                  'dump_args': ['--page-server', '--address', '127.0.0.1',
                                                '--port', '{free_port}'],
                                  'expect': 'cannot connect to the page server '
                                            '127.0.0.1:{free_port}: Connection refused'},
    'page_server_dump_fails': {'bin': 'tree_shared_fdtable', 'mode': 'page_server_dump_fails',
                               'test_env': {'ZDTM_FDTABLE_SIBLINGS': '1'},
                               'expect': 'share one fd table (CLONE_FILES)'},
    # what a page server cannot store: the session ends, exit 1 with the reason
    'page_server_refuses_parent_run': {'mode': 'page_server_refuses', 'bin': 'mem_anon_private',
                                       'ps_command': (1 << 16 | 6, 1),  # ADD_F, PE_PARENT
                                       'expect': 'which do not hold pagemap'},
    'page_server_refuses_get': {'mode': 'page_server_refuses', 'bin': 'mem_anon_private',
                                'ps_command': (7, 1),  # PS_IOV_GET
                                'expect': 'command 0x7 is not supported'},
    'page_server_refuses_bad_kind': {'mode': 'page_server_refuses', 'bin': 'mem_anon_private',
                                     'ps_command': (4, 1, 1 << 8 | 9),  # OPEN2, kind 9
                                     'expect': 'unknown pagemap kind 9'},
    # a dump whose parent is a pre-dump the server's side has too (--prev-images-dir there)
    'page_server_chain': {'bin': 'mem_predump_changes', 'mode': 'page_server_chain',
                          'pre_dumps': 2},
    'page_server_chain_pre_dumps': {'bin': 'mem_predump_changes', 'mode': 'page_server_chain',
                                    'pre_dumps': 2, 'ps_pre_dump': True},
    'cross_us2up_page_server_chain': {'bin': 'mem_predump_changes', 'mode': 'page_server_chain',
                                      'pre_dumps': 2, 'ps_pre_dump': True,
                                      'ps_upstream_server': True},
    'page_server_chain_no_parent': {'bin': 'mem_predump_changes', 'mode': 'page_server_chain',
                                    'pre_dumps': 2, 'ps_no_parent': True,
                                    'expect': "the page server's parent images hold no pagemap"},
    # criu page-server --lazy-pages: an images directory's pages to a lazy-pages daemon
    'page_server_lazy_images': {'bin': 'mem_anon_private', 'mode': 'page_server_lazy_images'},
    'page_server_lazy_images_bad_get': {'bin': 'mem_anon_private',
                                        'mode': 'page_server_lazy_images', 'ps_bad_get': True},
    'page_server_killed': {'bin': 'mem_anon_private', 'mode': 'page_server_killed',
                           'expect': 'page server 127.0.0.1:'},
    # criu killed while the task's parasite runs: the task puts itself back
    'criu_killed_mem_anon_private': {'bin': 'mem_anon_private', 'mode': 'criu_killed'},
    'criu_killed_regs_fpu_avx': {'bin': 'regs_fpu_avx', 'mode': 'criu_killed'},
    'criu_killed_regs_avx512': {'bin': 'regs_avx512', 'mode': 'criu_killed',
                                'cpu_flags': ['avx512f', 'avx512bw']},
    'criu_killed_threads_blocked_calls': {'bin': 'threads_blocked_calls', 'mode': 'criu_killed'},
    'criu_killed_sig_blocked_mask': {'bin': 'sig_blocked_mask', 'mode': 'criu_killed'},
    # upstream's dump to our server, ours to upstream's server
    'cross_up2us_page_server': {'bin': 'mem_anon_private', 'mode': 'page_server',
                                'ps_upstream_dump': True, 'setsid': True},
    'cross_us2up_page_server': {'bin': 'mem_anon_private', 'mode': 'page_server',
                                'ps_upstream_server': True},
    'cross_up2us_page_server_shared_anon': {'bin': 'tree_shared_anon', 'mode': 'page_server',
                                            'ps_upstream_dump': True, 'setsid': True},
    'cross_us2up_page_server_shared_anon': {'bin': 'tree_shared_anon', 'mode': 'page_server',
                                            'ps_upstream_server': True},
    'cross_up2us_page_server_memfd': {'bin': 'memfd_mapped_shared', 'mode': 'page_server',
                                      'ps_upstream_dump': True, 'setsid': True},
    'cross_us2up_page_server_memfd': {'bin': 'memfd_mapped_shared', 'mode': 'page_server',
                                      'ps_upstream_server': True},
    'cross_us2up_mem_predump_changes': {'bin': 'mem_predump_changes', 'mode': 'pre_dump',
                                        'pre_dumps': 2, 'upstream_restore': True},
    # copy-on-write memory a tree shares after fork, shared again after restore (issue 22):
    # each test checks every word and the sharing by Pss and PFNs (cow_share.h)
    'cow_prefork_tree': {},
    'cow_grandchild': {},
    'cow_dontfork_wipeonfork': {},
    'cow_exec_child': {},
    'cow_mremap_after_fork': {},
    'cow_threads': {},
    'cow_hugetlb': {},
    'cow_shared_and_private': {},
    'cow_lazy': {'lazy': True},
    'cow_predump': {'mode': 'pre_dump', 'pre_dumps': 2, 'dump_args': ['--track-mem']},
    'cow_file_private': {},
    # the dump leaves the running tree's pages shared (dump -R, no restore: the test's
    # checks after SIGTERM see the tree the dump left)
    'cow_leave_running': {'bin': 'cow_grandchild', 'mode': 'leave_running'},
    'mem_madvise_vmflags': {},
    'mem_mlock': {},
    'mem_hugetlb_anon': {},
    'mem_anon_named': {'kernel': ['CONFIG_ANON_VMA_NAME']},
    'regs_fpu_avx': {},
    'static_regs_fpu_avx': {},
    'regs_avx512': {'cpu_flags': ['avx512f', 'avx512bw']},
    'sig_blocked_mask': {},
    'sig_pending_std': {},
    'sig_queued_rt': {},
    'sig_pending_trap': {},
    'sigaction_all': {},
    'sigaltstack': {},
    'rseq_registered': {},
    'tid_address': {},
    'robust_list': {},
    'threads_regs_tls': {},
    'threads_blocked_calls': {},
    'threads_pipe_read': {},
    'threads_leave_running': {'bin': 'threads_regs_tls', 'mode': 'leave_running'},
    'threads_restore_twice': {'bin': 'threads_blocked_calls', 'mode': 'twice'},
    'threads_dump_fail': {'mode': 'dump_fails'},
    'threads_churn': {},
    'threads_dumpable': {},
    'rseq_critical_section': {},
    'rseq_critical_section_leave_running': {'bin': 'rseq_critical_section',
                                            'mode': 'leave_running'},
    'personality': {},
    'mm_fields': {},
    'rlimits': {},
    'umask': {},
    'cwd_tmpdir': {},
    'root_chroot': {},
    'comm': {},
    'creds': {},
    'itimers': {},
    'posix_timers': {},
    # glibc's SIGEV_THREAD timer (its signal 32 at its helper thread) firing during restore
    'timer_sigev_thread': {},
    'ns_pid_timer_sigev_thread': {'bin': 'timer_sigev_thread', 'launcher': True, 'pidns': True,
                                  'test_env': {'ZDTM_TIMER_PIDNS': '1'}},
    'sched_policy_nice_oom': {},
    'seccomp_filters_threads': {},
    'restore_fail_seccomp_loop': {'bin': 'seccomp_filters_threads', 'mode': 'restore_fails',
                                  'corrupt': seccomp_chain_loops, 'expect': 'form a loop'},
    'membarrier_registered': {},
    'mem_map_flags': {},
    'mem_guard_regions': {},
    'restore_fail_guard_region_outside': {'bin': 'mem_guard_regions', 'mode': 'restore_fails',
                                          'corrupt': guard_region_outside,
                                          'expect': 'is not inside mapped VMAs'},
    'tree_stopped_stop_queued': {},
    'file_reg_flags_offset': {},
    # a device file whose path a mount covers with another node of the device: dumped by
    # that path with --evasive-devices, refused without
    'file_dev_evasive': {'dump_args': ['--evasive-devices'],
                         'test_env': {'ZDTM_EVASIVE_RESTORED': '1'},
                         'cleanup': lambda: umount_lazy(os.path.join(
                             OUT_DIR, 'file_dev_evasive', 'work', 'evasive'))},
    'dump_fail_file_dev_covered': {
        'bin': 'file_dev_evasive', 'mode': 'dump_fails',
        'expect': 'evasive/null no longer names the open file',
        'cleanup': lambda: umount_lazy(os.path.join(OUT_DIR, 'dump_fail_file_dev_covered',
                                                    'work', 'evasive'))},
    'file_deleted_open': {},
    'file_deleted_nodes': {},
    'file_deleted_nested': {},
    'cwd_dead_proc': {},
    'proc_dead_pid_file': {},
    'restore_fail_dead_pid_in_use': {'bin': 'cwd_dead_proc', 'mode': 'restore_fails',
                                     'corrupt': dead_pid_becomes_1, 'expect': 'pid 1 is in use now'},
    'file_dev_null_zero_urandom': {},
    'file_dup_shared_offset': {},
    # its file's mode is 0600 at dump: a file whose rwx bits changed is refused,
    # but with --skip-file-rwx-check; a set-id bit counts even then
    'file_rwx_changed_skip_check': {'bin': 'file_dup_shared_offset',
                                    'after_dump': chmod_shared_offset_file(0o400),
                                    'restore_args': ['--skip-file-rwx-check'],
                                    'after_restore': shared_offset_file_mode(0o400)},
    'restore_fail_file_rwx_changed': {
        'bin': 'file_dup_shared_offset', 'mode': 'restore_fails',
        'corrupt': chmod_shared_offset_file(0o400),
        'expect': 'shared-offset.data: its mode is 0400 now, 0600 at dump (--skip-file-rwx-check '
                  'lets the rwx bits differ)'},
    'restore_fail_file_setgid_skip_check': {
        'bin': 'file_dup_shared_offset', 'mode': 'restore_fails',
        'corrupt': chmod_shared_offset_file(0o2600), 'restore_args': ['--skip-file-rwx-check'],
        'expect': 'shared-offset.data: its mode is 02600 now, 0600 at dump'},
    'file_unlinked_other_link': {'dump_args': ['--link-remap']},
    # its directory removed too: the link is made in the one above, restore makes it again
    'file_unlinked_other_link_dir': {'bin': 'file_unlinked_other_link',
                                     'dump_args': ['--link-remap'],
                                     'test_env': {'ZDTM_REMOVED_DIR': '1'}},
    'file_unlinked_other_link_no_remap': {'bin': 'file_unlinked_other_link',
                                          'mode': 'dump_fails', 'expect': '--link-remap'},
    'pipe_queued_bytes': {},
    'fifo_queued_bytes': {},
    'file_fown_async': {'devpts': True},
    'file_fown_outside': {'mode': 'dump_fails', 'expect': 'which is outside the dumped tree'},
    'file_fown_outside_group': {'bin': 'file_fown_outside', 'mode': 'dump_fails',
                                'test_env': {'ZDTM_FOWN_OUTSIDE_GROUP': '1'},
                                'expect': 'go to process group'},
    'restore_fail_fown_no_such_task': {'bin': 'file_fown_async', 'mode': 'restore_fails',
                                       'devpts': True, 'corrupt': fown_names_no_task,
                                       'expect': 'go to process 999999 (type 1), which is not'},
    'epoll_targets': {},
    'epoll_in_flight': {},
    'dump_fail_epoll_in_flight_moved': {'bin': 'epoll_in_flight_moved', 'mode': 'dump_fails',
                                        'expect': 'which no task of the tree holds at that number'},
    'restore_fail_epoll_in_flight_target': {'bin': 'epoll_in_flight', 'mode': 'restore_fails',
                                            'corrupt': epoll_watches_fd_77,
                                            'expect': 'watches fd 77, which task'},
    # file locks (--file-locks): POSIX, flock(), OFD; waiters; refusals
    'file_locks_posix': {'dump_args': ['--file-locks']},
    'file_locks_posix_mapped': {'bin': 'file_locks_posix', 'dump_args': ['--file-locks'],
                                'test_env': {'ZDTM_LOCKS_MAPPED': '1'}},
    'file_locks_flock': {'dump_args': ['--file-locks']},
    'file_locks_ofd': {'dump_args': ['--file-locks']},
    'file_locks_waiter': {'dump_args': ['--file-locks']},
    'file_locks_leave_running': {'bin': 'file_locks_posix', 'mode': 'leave_running',
                                 'dump_args': ['--file-locks']},
    'file_locks_restore_twice': {'bin': 'file_locks_flock', 'mode': 'twice',
                                 'dump_args': ['--file-locks']},
    'file_locks_no_option': {'bin': 'file_locks_posix', 'mode': 'dump_fails',
                             'expect': 'dump it with --file-locks'},
    'file_leases': {'dump_args': ['--file-locks']},
    'file_leases_no_option': {'bin': 'file_leases', 'mode': 'dump_fails',
                              'expect': 'dump it with --file-locks'},
    'memfd_fd_contents_seals': {},
    'memfd_mapped_shared': {},
    # Unix sockets: socketpairs, names, listening and accepted sockets, datagrams
    'unix_socketpair_queues': {},
    'unix_socketpair_queues_leave_running': {'bin': 'unix_socketpair_queues',
                                             'mode': 'leave_running'},
    'unix_socketpair_tree': {},
    'unix_listen_accept': {},
    'unix_dgram_bound': {},
    'unix_external_peer': {'mode': 'dump_fails', 'expect': 'is outside the dumped tree'},
    'unix_bound_deleted': {},
    'unix_bound_moved': {'mode': 'dump_fails', 'expect': 'moved.sock (moved'},
    'unix_scm_rights': {},
    'unix_ext_dgram': {'dump_args': ['--ext-unix-sk'], 'restore_args': ['--ext-unix-sk']},
    'unix_ext_plugin': {'dump_args': ['-L', PLUGIN_LIB_UNIXSK],
                        'restore_args': ['-L', PLUGIN_LIB_UNIXSK]},
    'unix_scm_epoll': {},
    # INET sockets: TCP listening, bound, established (repair mode); UDP, UDP-Lite, ICMP
    'sk_inet_listen': {},
    'sk_inet_dgram': {},
    'sk_inet_tcp_established': {'dump_args': ['--tcp-established']},
    'sk_inet_tcp_established_leave_running': {'bin': 'sk_inet_tcp_established',
                                              'mode': 'leave_running',
                                              'dump_args': ['--tcp-established']},
    'sk_inet_raw': {},
    # An IPv6 raw socket with an IPV6_CHECKSUM offset, which the image has no field for.
    'sk_inet_raw_checksum_dump_fails': {'bin': 'sk_inet_raw', 'mode': 'dump_fails',
                                        'test_env': {'ZDTM_RAW_CHECKSUM': '1'},
                                        'expect': 'IPV6_CHECKSUM at offset 2'},
    'sk_inet_raw_connected': {},
    'sk_inet_raw_connected_userns': {'bin': 'sk_inet_raw_connected', 'launcher': True,
                                     'pidns': True, 'test_env': {'ZDTM_RAW_USERNS': '1'}},
    # its IPv6 peer made one its net namespace (loopback only) has no route to
    'restore_fail_raw_peer_unreachable': {'bin': 'sk_inet_raw_connected', 'launcher': True,
                                          'pidns': True, 'mode': 'restore_fails',
                                          'test_env': {'ZDTM_RAW_USERNS': '1'},
                                          'corrupt': raw_peer_unreachable,
                                          'expect': 'cannot connect it'},
    'sk_inet_pktinfo': {},
    # IP_RECVTTL, IP_RECVERR, IPV6_RECVHOPLIMIT, ...: ancillary data, in inetsk-ext.img
    'sk_inet_recv_opts': {},
    'restore_fail_inetsk_ext_opt': {'bin': 'sk_inet_recv_opts', 'mode': 'restore_fails',
                                    'corrupt': inetsk_ext_ttl_opt,
                                    'expect': 'not one this criu sets'},
    # the kernel refuses the value when the task sets it, after the tree was forked
    'restore_fail_inetsk_ext_value': {'bin': 'sk_inet_recv_opts', 'mode': 'restore_fails',
                                      'corrupt': inetsk_ext_rfc4884_2,
                                      'expect': 'cannot set IP_RECVERR_RFC4884 to 2'},
    'sk_inet_tcp_no_option': {'bin': 'sk_inet_tcp_established', 'mode': 'dump_fails',
                              'expect': 'dump with --tcp-established'},
    'sk_inet_tcp_in_flight': {'bin': 'sk_inet_tcp_established', 'mode': 'dump_fails',
                              'dump_args': ['--tcp-established'],
                              'test_env': {'ZDTM_TCP_PENDING': '1'},
                              'expect': 'dump with --skip-in-flight'},
    # the pending connection is dropped; its client (not checked) sees a reset
    'sk_inet_tcp_skip_in_flight': {'bin': 'sk_inet_tcp_established',
                                   'dump_args': ['--tcp-established', '--skip-in-flight'],
                                   'test_env': {'ZDTM_TCP_PENDING': '1'}},
    # in pid and net namespaces of its own: the sockets are made again in the restored one
    'sk_inet_tcp_netns': {'bin': 'sk_inet_tcp_established', 'launcher': True, 'pidns': True,
                          'dump_args': ['--tcp-established'],
                          'test_env': {'ZDTM_INET_NETNS': '1'}},
    # ... and in a user namespace of its own, which owns the net one
    'sk_inet_tcp_userns': {'bin': 'sk_inet_tcp_established', 'launcher': True, 'pidns': True,
                           'dump_args': ['--tcp-established'],
                           'test_env': {'ZDTM_INET_NETNS': '1', 'ZDTM_INET_USERNS': '1'}},
    'sk_inet_dgram_userns': {'bin': 'sk_inet_dgram', 'launcher': True, 'pidns': True,
                             'test_env': {'ZDTM_INET_USERNS': '1'}},
    # restored with --tcp-close: the connections come back closed, the listener listens
    'sk_inet_tcp_close': {'bin': 'sk_inet_tcp_established', 'dump_args': ['--tcp-established'],
                          'restore_args': ['--tcp-close'],
                          'test_env': {'ZDTM_TCP_CLOSED': '1'}},
    # dumped with --tcp-close: no streams, and the images say to restore them closed
    'sk_inet_tcp_dump_close': {'bin': 'sk_inet_tcp_established', 'dump_args': ['--tcp-close'],
                               'test_env': {'ZDTM_TCP_CLOSED': '1'}},
    # dumped unlocked (TCP_UNLOCKED)
    'restore_fail_tcp_stream_missing': {'bin': 'sk_inet_tcp_established',
                                        'mode': 'restore_fails',
                                        'dump_args': TCP_UNLOCKED,
                                        'corrupt': tcp_stream_goes_missing,
                                        'expect': 'restore with --tcp-close'},
    'restore_fail_tcp_stream_short': {'bin': 'sk_inet_tcp_established',
                                      'mode': 'restore_fails',
                                      'dump_args': TCP_UNLOCKED,
                                      'corrupt': tcp_stream_short_queue,
                                      'expect': 'bytes after the entry, its queues have'},
    # its peer outside the tree: the network lock (iptables) holds it from dump to restore
    'sk_inet_tcp_locked': {'dump_args': ['--tcp-established']},
    'sk_inet_tcp_locked_leave_running': {'bin': 'sk_inet_tcp_locked', 'mode': 'leave_running',
                                         'dump_args': ['--tcp-established']},
    # the same under --network-lock nftables (netlock-nft.c); restore reads the method from
    # inventory.img
    'sk_inet_tcp_locked_nft': {'bin': 'sk_inet_tcp_locked',
                               'dump_args': ['--tcp-established', '--network-lock', 'nftables']},
    'dump_fail_tcp_locked_nft': {'bin': 'sk_inet_tcp_locked', 'mode': 'dump_fails',
                                 'dump_args': ['--tcp-established', '--network-lock',
                                               'nftables'],
                                 'setup': nft_lock_table_taken, 'cleanup': nft_lock_table_remove,
                                 'expect': 'nftables cannot lock the connection'},
    'sk_inet_tcp_locked_nft_leave_running': {'bin': 'sk_inet_tcp_locked',
                                             'mode': 'leave_running',
                                             'dump_args': ['--tcp-established', '--network-lock',
                                                           'nftables']},
    # in a net namespace of its own (restore joins it), its peer outside the tree writing
    # through the dump: the whole namespace locked (CRIU's chain), then unlocked
    'ns_net_lock': {'dump_args': ['--tcp-established'],
                    'restore_args': ['--join-ns', 'net:/run/netns/' + NETLOCK_NETNS],
                    'cleanup': remove_netns_nlock},
    'ns_net_lock_leave_running': {'bin': 'ns_net_lock', 'mode': 'leave_running',
                                  'dump_args': ['--tcp-established'],
                                  'cleanup': remove_netns_nlock},
    # the same under --network-lock nftables (netlock-nft.c: CRIU's table inet CRIU-PID)
    'ns_net_lock_nft': {'bin': 'ns_net_lock',
                        'dump_args': ['--tcp-established', '--network-lock', 'nftables'],
                        'restore_args': ['--join-ns', 'net:/run/netns/' + NETLOCK_NETNS],
                        'cleanup': remove_netns_nlock},
    'ns_net_lock_nft_leave_running': {'bin': 'ns_net_lock', 'mode': 'leave_running',
                                      'dump_args': ['--tcp-established', '--network-lock',
                                                    'nftables'],
                                      'cleanup': remove_netns_nlock},
    'restore_fail_ns_net_lock_nft': {'bin': 'ns_net_lock', 'mode': 'restore_fails',
                                     'dump_args': ['--tcp-established', '--network-lock',
                                                   'nftables'],
                                     'restore_args': ['--join-ns',
                                                      'net:/run/netns/' + NETLOCK_NETNS],
                                     'corrupt': tcp_stream_short_queue,
                                     'expect': 'bytes after the entry, its queues have',
                                     'verify': netns_nlock_unlocked,
                                     'cleanup': remove_netns_nlock},
    'ns_net_lock_dump_fails': {'bin': 'ns_net_lock', 'mode': 'dump_fails',
                               'dump_args': ['--tcp-established'],
                               'test_env': {'ZDTM_NETLOCK_DUMP_FAILS': '1'},
                               'cleanup': remove_netns_nlock},
    'restore_fail_ns_net_lock': {'bin': 'ns_net_lock', 'mode': 'restore_fails',
                                 'dump_args': ['--tcp-established'],
                                 'restore_args': ['--join-ns', 'net:/run/netns/' + NETLOCK_NETNS],
                                 'corrupt': tcp_stream_short_queue,
                                 'expect': 'bytes after the entry, its queues have',
                                 'verify': netns_nlock_unlocked, 'cleanup': remove_netns_nlock},
    # connecting (SYN_SENT) sockets of both families, their SYNs dropped by a rule
    'tcp_syn_sent': {'launcher': True, 'pidns': True, 'dump_args': ['--tcp-established']},
    'tcp_syn_sent_userns': {'bin': 'tcp_syn_sent', 'launcher': True, 'pidns': True,
                            'dump_args': ['--tcp-established'],
                            'test_env': {'ZDTM_NET_USERNS': '1'}},
    # ... in criu's own net namespace: each connection locked by its own rules
    'tcp_syn_sent_hostns': {'bin': 'tcp_syn_sent', 'dump_args': ['--tcp-established'],
                            'test_env': {'ZDTM_SYN_SENT_HOSTNS': '1'},
                            'cleanup': remove_syn_sent_rules},
    # a dump that fails once they are locked (post-dump): the lock goes, in either namespace
    'tcp_syn_sent_dump_fails': {
        'bin': 'tcp_syn_sent', 'mode': 'dump_fails', 'launcher': True, 'pidns': True,
        'script': '[ "$CRTOOLS_SCRIPT_ACTION" != post-dump ]',
        'dump_args': ['--tcp-established', '--action-script', '{out}/script.sh'],
        'expect': 'action script {out}/script.sh failed at post-dump'},
    'tcp_syn_sent_hostns_dump_fails': {
        'bin': 'tcp_syn_sent', 'mode': 'dump_fails',
        'script': '[ "$CRTOOLS_SCRIPT_ACTION" != post-dump ]',
        'dump_args': ['--tcp-established', '--action-script', '{out}/script.sh'],
        'test_env': {'ZDTM_SYN_SENT_HOSTNS': '1'}, 'cleanup': remove_syn_sent_rules,
        'expect': 'action script {out}/script.sh failed at post-dump'},
    'tcp_syn_sent_no_option': {'bin': 'tcp_syn_sent', 'mode': 'dump_fails', 'launcher': True,
                               'pidns': True, 'expect': 'dump with --tcp-established'},
    # iptables of both backends (legacy, nft) and families in the tree's namespace
    'ns_net_lock_iptables': {'launcher': True, 'pidns': True},
    'ns_net_lock_iptables_userns': {'bin': 'ns_net_lock_iptables', 'launcher': True,
                                    'pidns': True, 'test_env': {'ZDTM_NET_USERNS': '1'}},
    'restore_fail_ns_net_lock_iptables': {'bin': 'ns_net_lock_iptables', 'mode': 'restore_fails',
                                          'launcher': True, 'pidns': True,
                                          'corrupt': iptables_rule_unknown_chain,
                                          'expect': 'iptables-nft-restore -w'},
    # both ends of each connection in the tree, in criu's own net namespace, bytes in
    # flight between them: each end locked by its own rules from its dump to its restore
    # (the streams read once), or until a dump with -R or a failed one lets the tree run on
    'tcp_in_tree_locked': {'dump_args': ['--tcp-established'],
                           'image_check': in_tree_lock_check('iptables'),
                           'cleanup': remove_in_tree_rule},
    'tcp_in_tree_locked_nft': {'bin': 'tcp_in_tree_locked',
                               'dump_args': ['--tcp-established'] + NFT_LOCK_ARGS,
                               'image_check': in_tree_lock_check('nftables'),
                               'cleanup': remove_in_tree_rule},
    # restored closed (--tcp-close): the dump's locks go all the same
    'tcp_in_tree_locked_restore_closed': {'bin': 'tcp_in_tree_locked',
                                          'dump_args': ['--tcp-established'],
                                          'restore_args': ['--tcp-close'],
                                          'test_env': {'ZDTM_TCP_CLOSED': '1'},
                                          'image_check': in_tree_lock_check('iptables'),
                                          'cleanup': remove_in_tree_rule},
    # released by a dump with -R
    'tcp_in_tree_locked_leave_running': {'bin': 'tcp_in_tree_locked', 'mode': 'leave_running',
                                         'dump_args': ['--tcp-established'],
                                         'image_check': in_tree_lock_check(None),
                                         'cleanup': remove_in_tree_rule},
    # ... or -s (the tree killed after it; the parent's IPv6 bytes acknowledged, so that no
    # end it leaves behind waits for an acknowledgement with the restored one's addresses)
    'tcp_in_tree_locked_leave_stopped': {'bin': 'tcp_in_tree_locked', 'mode': 'leave_stopped',
                                         'dump_args': ['--tcp-established'],
                                         'restore_args': ['--tcp-established'],
                                         'test_env': {'ZDTM_TCP_ACKED': '1'},
                                         'image_check': in_tree_lock_check(None)},
    # unlocked: the dump waits for the connections to stand still, reads, checks again
    'tcp_in_tree_skip_lock': {'bin': 'tcp_in_tree_locked',
                              'dump_args': ['--tcp-established', '--network-lock', 'skip'],
                              'image_check': in_tree_lock_check(None),
                              'cleanup': remove_in_tree_rule},
    # a dump that fails once they are locked (post-dump, which checks that each end's lock
    # is in): the locks go, the tree runs on with its connections
    'tcp_in_tree_locked_dump_fails': {
        'bin': 'tcp_in_tree_locked', 'mode': 'dump_fails', 'script': IN_TREE_LOCKED_SCRIPT,
        'dump_args': ['--tcp-established', '--action-script', '{out}/script.sh'],
        'cleanup': remove_in_tree_rule,
        'expect': 'action script {out}/script.sh failed at post-dump'},
    'tcp_in_tree_locked_nft_dump_fails': {
        'bin': 'tcp_in_tree_locked', 'mode': 'dump_fails', 'script': IN_TREE_LOCKED_SCRIPT,
        'dump_args': ['--tcp-established', '--action-script', '{out}/script.sh'] +
        NFT_LOCK_ARGS,
        'cleanup': remove_in_tree_rule,
        'expect': 'action script {out}/script.sh failed at post-dump'},
    # the nftables lock's table name taken by a table that is not the lock: the dump fails
    # at the first connection, the tree runs on with them
    'tcp_in_tree_lock_refused_nft': {
        'bin': 'tcp_in_tree_locked', 'mode': 'dump_fails',
        'dump_args': ['--tcp-established'] + NFT_LOCK_ARGS, 'setup': nft_lock_table_taken,
        'cleanup': lambda: (nft_lock_table_remove(), remove_in_tree_rule()),
        'expect': 'nftables cannot lock the connection'},
    # each closing state: FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, closed with a peer
    'sk_inet_tcp_closing': {'dump_args': ['--tcp-established']},
    'sk_inet_tcp_closing_no_option': {'bin': 'sk_inet_tcp_closing', 'mode': 'dump_fails',
                                      'expect': 'dump with --tcp-established'},
    'restore_fail_tcp_closing_state': {'bin': 'sk_inet_tcp_closing', 'mode': 'restore_fails',
                                       'dump_args': TCP_UNLOCKED,
                                       'corrupt': tcp_state_half_open,
                                       'expect': 'state 3 is not one this criu restores'},
    'restore_fail_inet_family': {'bin': 'sk_inet_listen', 'mode': 'restore_fails',
                                 'corrupt': inet_family_unknown,
                                 'expect': 'is not a kind this criu restores'},
    'pipe_queued_bytes_leave_running': {'bin': 'pipe_queued_bytes', 'mode': 'leave_running'},
    'fifo_queued_bytes_leave_running': {'bin': 'fifo_queued_bytes', 'mode': 'leave_running'},
    'eventfd_counter_flags': {},
    'signalfd_mask_flags': {},
    # BPF maps: attributes, elements, frozen, shared by fds, a child, a read-only opening
    'bpf_map_hash': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'hash'}},
    'bpf_map_array': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'array'}},
    'bpf_map_percpu_hash': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'percpu_hash'}},
    'bpf_map_percpu_array': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'percpu_array'}},
    'bpf_map_lru_hash': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'lru_hash'}},
    'bpf_map_lru_percpu_hash': {'bin': 'bpf_maps',
                                'test_env': {'ZDTM_BPF_MAP': 'lru_percpu_hash'}},
    'bpf_map_lpm_trie': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'lpm_trie'}},
    'bpf_map_lru_hash_in_flight': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'lru_hash',
                                                                 'ZDTM_BPF_MAP_IN_FLIGHT': '1'}},
    'bpf_map_hash_leave_running': {'bin': 'bpf_maps', 'mode': 'leave_running',
                                   'test_env': {'ZDTM_BPF_MAP': 'hash'}},
    'bpf_map_records_twice': {'bin': 'bpf_maps', 'test_env': {'ZDTM_BPF_MAP': 'hash'},
                              'after_dump': bpf_map_records_twice},
    'dump_fail_bpf_map_queue': {'bin': 'bpf_maps', 'mode': 'dump_fails',
                                'test_env': {'ZDTM_BPF_MAP': 'queue'},
                                'expect': '(QUEUE, "zdtm_queue") cannot be dumped'},
    'dump_fail_bpf_map_btf': {'bin': 'bpf_maps', 'mode': 'dump_fails',
                              'test_env': {'ZDTM_BPF_MAP': 'btf'},
                              'expect': '(HASH, "zdtm_btf") cannot be dumped: it has BTF'},
    'restore_fail_bpf_map_elements': {'bin': 'bpf_maps', 'mode': 'restore_fails',
                                      'test_env': {'ZDTM_BPF_MAP': 'hash'},
                                      'corrupt': bpf_map_one_element_more,
                                      'expect': 'elements in 444 + 1332 bytes do not fit'},
    'restore_fail_bpf_map_lru_evicts': {'bin': 'bpf_maps', 'mode': 'restore_fails',
                                        'test_env': {'ZDTM_BPF_MAP': 'lru_hash'},
                                        'corrupt': bpf_map_lru_too_small,
                                        'expect': '20000 elements restored, the LRU map holds'},
    'restore_fail_bpf_map_create': {'bin': 'bpf_maps', 'mode': 'restore_fails',
                                    'test_env': {'ZDTM_BPF_MAP': 'array'},
                                    'corrupt': bpf_map_flags_refused,
                                    'expect': 'cannot create map "zdtm_frozen"'},
    'timerfd_interval_ticks': {},
    'timerfd_leave_running': {'bin': 'timerfd_interval_ticks', 'mode': 'leave_running'},
    'pidfd_child_self_dead': {},
    'nsfs_self_files': {},
    'netlink_sk_bound_groups': {},
    'packet_sk_options_rings': {},
    'packet_sk_ring_mapped': {},
    'packet_sk_ring_unheld': {'mode': 'dump_fails', 'expect': 'which none of its fds holds'},
    'posix_mq_refused': {'mode': 'dump_fails', 'expect': 'POSIX message queues (mq_open) are not supported'},
    'netlink_sk_option_refused': {'mode': 'dump_fails', 'expect': 'NETLINK_PKTINFO is set'},
    'nsfs_outside_tree': {'mode': 'dump_fails', 'expect': 'no task of the tree lives in'},
    'pidfd_leave_running': {'bin': 'pidfd_child_self_dead', 'mode': 'leave_running'},
    'pidfd_outside_tree': {'mode': 'dump_fails', 'expect': 'which is outside the dumped tree'},
    'restore_fail_nsfs_other_ns': {'bin': 'nsfs_self_files', 'mode': 'restore_fails',
                                   'corrupt': nsfs_names_other_ns,
                                   'expect': 'not the one the tree lives in'},
    'restore_fail_netlink_state': {'bin': 'netlink_sk_bound_groups', 'mode': 'restore_fails',
                                   'corrupt': netlink_bad_state, 'expect': 'has an unknown state'},
    'restore_fail_packet_type': {'bin': 'packet_sk_options_rings', 'mode': 'restore_fails',
                                 'corrupt': packet_bad_type, 'expect': 'an unknown socket type'},
    'restore_fail_pidfd_unknown_pid': {'bin': 'pidfd_child_self_dead', 'mode': 'restore_fails',
                                       'corrupt': pidfd_names_unknown_pid,
                                       'expect': 'which is no task of the tree'},
    'tty_shell_job': {'mode': 'tty'},
    'tty_console_vt': {},
    'inotify_watches': {},
    'inotify_watches_leave_running': {'bin': 'inotify_watches', 'mode': 'leave_running'},
    'inotify_watched_deleted': {},
    'inotify_watches_force_irmap': {'bin': 'inotify_watches',
                                    'dump_args': ['--force-irmap', '--irmap-scan-path', '/nonexistent'],
                                    'image_check': every_watch_has_a_path},
    'fanotify_marks': {},
    'fanotify_filesystem_mark': {'mode': 'dump_fails', 'expect': 'a whole filesystem'},
    'restore_fail_inotify_watch_lost': {'bin': 'inotify_watches', 'mode': 'restore_fails',
                                        'corrupt': inotify_watch_lost,
                                        'expect': 'cannot be found'},
    'restore_fail_inotify_wd_far_away': {'bin': 'inotify_watches', 'mode': 'restore_fails',
                                         'corrupt': inotify_wd_far_away,
                                         'expect': 'restore would add and remove'},
    'pty_pair_termios': {'devpts': True},
    'pty_canonical_queue': {'devpts': True},
    'pty_session_ctty': {'devpts': True},
    'pty_pair_termios_leave_running': {'bin': 'pty_pair_termios', 'mode': 'leave_running',
                                       'devpts': True},
    'pty_canonical_queue_leave_running': {'bin': 'pty_canonical_queue',
                                          'mode': 'leave_running', 'devpts': True},
    'pty_packet_status_refused': {'bin': 'pty_packet_status', 'mode': 'dump_fails',
                                  'devpts': True, 'expect': 'packet mode status (TIOCPKT)'},
    'leave_running': {'bin': 'mem_anon_private', 'mode': 'leave_running'},
    'restore_twice': {'bin': 'mem_anon_private', 'mode': 'twice'},
    'restore_no_detach': {'bin': 'mem_anon_private', 'mode': 'no_detach'},
    'restore_sibling': {'bin': 'mem_anon_private', 'mode': 'sibling'},
    'restore_stopped_task': {'bin': 'mem_anon_private', 'mode': 'stopped'},
    'dump_fail_unsupported_fd': {'mode': 'dump_fails'},
    'dump_fail_sysv_shm_removed': {'bin': 'sysv_shm_removed', 'mode': 'dump_fails',
                                   'expect': 'already removed (IPC_RMID)'},
    'restore_fail_sysv_shm_gone': {'bin': 'sysv_shm_attached', 'mode': 'restore_fails',
                                   'corrupt': sysv_segment_removed,
                                   'expect': 'is gone from this IPC namespace'},
    # an fd table shared by a parent and its child (CLONE_FILES) comes back shared
    'tree_shared_fdtable': {},
    'tree_shared_fdtable_siblings': {'bin': 'tree_shared_fdtable', 'mode': 'dump_fails',
                                     'test_env': {'ZDTM_FDTABLE_SIBLINGS': '1'},
                                     'expect': 'share one fd table (CLONE_FILES) but are not '
                                               'parent and child'},
    'restore_fail_corrupt_magic': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                   'corrupt': corrupt_core_magic},
    'restore_fail_truncated_mm': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                  'corrupt': truncate_mm_image},
    # images a restore must refuse with one line that names what is wrong ('expect')
    'restore_fail_unsupported_kind': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                      'corrupt': file_becomes_autofs_pipe,
                                      'expect': 'is AUTOFS_PIPE, not supported'},
    'restore_fail_unix_peer_missing': {'bin': 'unix_socketpair_queues',
                                       'mode': 'restore_fails',
                                       'corrupt': unix_peer_goes_missing,
                                       'expect': 'is not in the images'},
    'restore_fail_epoll_missing_fd': {'bin': 'epoll_targets', 'mode': 'restore_fails',
                                      'corrupt': epoll_watches_missing_fd,
                                      'expect': 'watches fd 999, which task'},
    'restore_fail_pty_session_leader': {'bin': 'pty_session_ctty', 'mode': 'restore_fails',
                                        'devpts': True, 'corrupt': pty_session_leader_gone,
                                        'expect': 'whose leader is not a live task'},
    'restore_fail_tty_data_unknown_pty': {'bin': 'pty_pair_termios', 'mode': 'restore_fails',
                                          'devpts': True, 'corrupt': tty_data_for_unknown_pty,
                                          'expect': 'which is no pty of tty-info.img'},
    'restore_fail_fd_missing_file': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                     'corrupt': fd_names_missing_file,
                                     'expect': 'file id 999999, which is not in files.img'},
    'restore_fail_image_version': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                   'corrupt': inventory_version_1, 'expect': 'inventory.img'},
    'restore_fail_aio_ring_moved': {'bin': 'aio_rings', 'mode': 'restore_fails',
                                    'corrupt': aio_ring_moved,
                                    'expect': 'is an AIO ring no aios entry describes'},
    'restore_fail_ipc_mq_bad_name': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                                     'corrupt': posix_mq_bad_name,
                                     'expect': '"a/b" is no queue name'},
    # a dumped label this kernel cannot set fails the restore (this VM runs no LSM that
    # labels tasks); --lsm-profile none: restores the task unlabelled
    'restore_fail_lsm_label': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                               'corrupt': lsm_label_recorded,
                               'expect': 'the task ran with LSM label "zdtm_confined"'},
    'lsm_profile_none': {'bin': 'mem_anon_private', 'after_dump': lsm_label_recorded,
                         'restore_args': ['--lsm-profile', 'none:'],
                         'after_restore': restored_lsm_label(None)},
    'restore_fail_lsm_profile_no_apparmor': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'kernel': ['NO_LSM_APPARMOR'],
        'corrupt': lambda img_dir, pid: None,
        'restore_args': ['--lsm-profile', 'apparmor:zdtm_profile'],
        'expect': '--lsm-profile apparmor:zdtm_profile: this kernel does not run AppArmor'},
    'restore_fail_lsm_profile_no_selinux': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'kernel': ['NO_LSM_SELINUX'],
        'corrupt': lambda img_dir, pid: None,
        'restore_args': ['--lsm-profile', 'selinux:system_u:system_r:zdtm_t:s0'],
        'expect': '--lsm-profile selinux:system_u:system_r:zdtm_t:s0: this kernel does not run '
                  'SELinux'},
    # where the kernel runs AppArmor (SELinux): the restored task has the profile asked for
    'lsm_profile_apparmor': {'bin': 'mem_anon_private', 'kernel': ['LSM_APPARMOR'],
                             'restore_args': ['--lsm-profile', 'apparmor:unconfined'],
                             'after_restore': restored_lsm_label('unconfined')},
    'lsm_profile_selinux': {'bin': 'mem_anon_private', 'kernel': ['LSM_SELINUX'],
                            'restore_args': ['--lsm-profile', 'selinux:' + own_lsm_label()],
                            'after_restore': restored_lsm_label(own_lsm_label())},
    # --cpu-cap: dump writes cpuinfo.img (CRIU's bytes), restore checks this CPU against it
    # for fpu (xsave features and size), ins (instruction bits) and cpu (the same CPU)
    'cpu_cap_all': {'bin': 'mem_anon_private', 'dump_args': ['--cpu-cap'],
                    'restore_args': ['--cpu-cap=all'], 'image_check': cpuinfo_as_criu_writes},
    'cpu_cap_none': {'bin': 'mem_anon_private', 'dump_args': ['--cpu-cap=none'],
                     'image_check': no_cpuinfo_image},
    'cpu_cap_fpu_only': {'bin': 'mem_anon_private', 'dump_args': ['--cpu-cap=fpu'],
                         'after_dump': cpuinfo_edit(missing_instruction_bit),
                         'restore_args': ['--cpu-cap=fpu,^ins']},
    'restore_fail_cpu_cap_ins': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                 'dump_args': ['--cpu-cap'],
                                 'corrupt': cpuinfo_edit(missing_instruction_bit),
                                 'restore_args': ['--cpu-cap=ins'],
                                 'expect': 'this one does not (--cpu-cap ins)'},
    'restore_fail_cpu_cap_fpu': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'dump_args': ['--cpu-cap'],
        'corrupt': cpuinfo_edit(lambda e: e.update(xfeatures_mask=e['xfeatures_mask'] | 1 << 62)),
        'restore_args': ['--cpu-cap=fpu'], 'expect': 'xsave features 0x4000000000000000'},
    'restore_fail_cpu_cap_cpu': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'dump_args': ['--cpu-cap'],
        'corrupt': cpuinfo_edit(lambda e: e.update(model=e['model'] + 1)),
        'restore_args': ['--cpu-cap=cpu'], 'expect': '(--cpu-cap cpu)'},
    'restore_fail_pages_in_parent': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                     'corrupt': pages_in_parent, 'expect': 'parent image'},
    'restore_fail_parent_pages_missing': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'corrupt': parent_without_pages,
        'expect': 'pages-'},
    'restore_fail_parent_pagemap_missing': {
        'bin': 'mem_anon_private', 'mode': 'restore_fails', 'corrupt': parent_link_to_empty_dir,
        'expect': 'parent images (level 1): no pagemap-'},
    # a pre-dump that fails after arming the tracker closes it again
    'pre_dump_fail_bad_parent': {
        'bin': 'mem_anon_private', 'mode': 'dump_fails', 'action': 'pre-dump',
        'setup': bad_parent_pagemap, 'dump_args': ['--prev-images-dir', '../bad-parent'],
        'expect': 'pagemap-'},
    'restore_fail_sysv_shm_vma': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                  'corrupt': vma_becomes_sysv_shm,
                                  'expect': 'SysV shared memory that is not shared anonymous'},
    'restore_fail_timerfd_clock': {'bin': 'timerfd_interval_ticks', 'mode': 'restore_fails',
                                   'corrupt': timerfd_bad_clock,
                                   'expect': 'clock 99 is not one a timerfd can use'},
    'restore_fail_eventfd_counter': {'bin': 'eventfd_counter_flags', 'mode': 'restore_fails',
                                     'corrupt': eventfd_counter_max,
                                     'expect': 'cannot be set from user space'},
    'restore_fail_truncated_ghost': {'bin': 'file_deleted_open', 'mode': 'restore_fails',
                                     'corrupt': truncate_ghost_file, 'expect': 'ghost-file-'},
    'restore_fail_memfd_unknown_seal': {'bin': 'memfd_fd_contents_seals',
                                        'mode': 'restore_fails', 'corrupt': memfd_unknown_seal,
                                        'expect': 'has seals this criu does not know'},
    'restore_fail_memfd_pages_past_size': {'bin': 'memfd_fd_contents_seals',
                                           'mode': 'restore_fails',
                                           'corrupt': memfd_size_under_its_pages,
                                           'expect': 'past the 4096 bytes of memfd "mfd-alpha"'},
    'restore_fail_memfd_missing_inode': {'bin': 'memfd_mapped_shared', 'mode': 'restore_fails',
                                         'corrupt': memfd_file_names_missing_inode,
                                         'expect': 'names inode 999, which is not in memfd.img'},
    'restore_fail_missing_dir': {'mode': 'cli',
                                 'args': ['restore', '-D', '{out}/no-such-dir', '-d']},
    'restore_fail_pid_in_use': {'bin': 'mem_anon_private', 'mode': 'pid_in_use'},
    'restore_fail_lock_fd_missing': {'bin': 'file_locks_posix', 'mode': 'restore_fails',
                                     'dump_args': ['--file-locks'],
                                     'corrupt': lock_names_missing_fd,
                                     'expect': 'lock on fd 77, which it does not have'},
    'restore_fail_lock_access': {'bin': 'file_locks_posix', 'mode': 'restore_fails',
                                 'dump_args': ['--file-locks'],
                                 'corrupt': read_lock_becomes_write,
                                 'expect': 'which is not open for writing'},
    'restore_fail_lock_lease': {'bin': 'file_locks_posix', 'mode': 'restore_fails',
                                'dump_args': ['--file-locks'], 'corrupt': lock_becomes_read_lease,
                                'expect': 'a read lease on an fd open for writing'},
    'restore_fail_lease_file_open': {'bin': 'file_leases', 'mode': 'restore_fails',
                                     'dump_args': ['--file-locks'], 'corrupt': open_leased_file,
                                     'expect': 'the file is open elsewhere'},
    'restore_fail_lock_taken': {'bin': 'file_locks_posix', 'mode': 'restore_fails',
                                'dump_args': ['--file-locks'], 'corrupt': take_conflicting_lock,
                                'expect': 'write lock on fd 40 at 100+100 is taken: process'},
    # process trees: the test forks its own tree, criu dumps and restores it from the root
    'tree_sessions': {},
    'tree_zombie': {},
    'tree_shared_anon': {},
    'tree_pipe_queued_bytes': {},
    'tree_file_shared_offset': {},
    'tree_pipe_siblings': {},
    'tree_inotify_shared': {},
    'tree_tty_shell_job': {'mode': 'tty'},
    'tree_leave_running': {'bin': 'tree_sessions', 'mode': 'leave_running'},
    'tree_restore_twice': {'bin': 'tree_zombie', 'mode': 'twice'},
    'tree_restore_no_detach': {'bin': 'tree_shared_anon', 'mode': 'no_detach'},
    'tree_dump_fail': {'mode': 'dump_fails'},
    'tree_dead_leaders': {},
    # the same tree as the init of its own pid namespace: the helpers get the pids inside
    'ns_pid_dead_leaders': {'bin': 'tree_dead_leaders', 'launcher': True, 'pidns': True,
                            'test_env': {'ZDTM_TREE_PIDNS': '1'}},
    # orphans of the init in other tasks' sessions, a child left in its parent's old session
    'ns_pid_sessions': {'launcher': True, 'pidns': True},
    'tree_subreaper_sessions': {'bin': 'ns_pid_sessions',
                                'test_env': {'ZDTM_SESSIONS_SUBREAPER': '1'}},
    'tree_fork_churn': {},
    'tree_outside_leader': {'mode': 'dump_fails'},
    'tree_restore_fail_grandchild_core': {'bin': 'tree_sessions', 'mode': 'restore_fails',
                                          'corrupt': corrupt_grandchild_core,
                                          'corrupt_depth': 2},
    # namespaces: trees whose root has namespaces of its own, as a container runtime makes them
    'ns_pid_init': {'launcher': True, 'pidns': True},
    # pid namespaces nested below the root's (two levels, a zombie, a thread, a task born
    # into a namespace its parent is not in): pids at every level, inits that reap
    'ns_pid_nested': {'launcher': True, 'pidns': True},
    'ns_pid_nested_twice': {'bin': 'ns_pid_nested', 'mode': 'twice', 'launcher': True,
                            'pidns': True},
    'ns_pid_nested_leave_running': {'bin': 'ns_pid_nested', 'mode': 'leave_running',
                                    'launcher': True, 'pidns': True},
    # and an orphan in N1 whose session (and group) leader exited there
    'ns_pid_nested_dead_leader': {'bin': 'ns_pid_nested', 'launcher': True, 'pidns': True,
                                  'test_env': {'ZDTM_NESTED_DEAD_LEADER': '1'}},
    'ns_pid_nested_dead_outer_leader': {'bin': 'ns_pid_nested', 'mode': 'dump_fails',
                                        'launcher': True, 'pidns': True,
                                        'test_env': {'ZDTM_NESTED_DEAD_LEADER': 'outer'},
                                        'expect': 'exited in another one above it'},
    # two tasks of a nested namespace given one pid there: the second clone3() fails
    'restore_fail_pidns_nested_taken': {'bin': 'ns_pid_nested', 'mode': 'restore_fails',
                                        'launcher': True, 'pidns': True,
                                        'corrupt': pidns_nested_pid_taken,
                                        'expect': 'cannot create child'},
    # an init that is not pid 1 in its namespace
    'restore_fail_pidns_nested_init': {'bin': 'ns_pid_nested', 'mode': 'restore_fails',
                                       'launcher': True, 'pidns': True,
                                       'corrupt': pidns_nested_bad_init,
                                       'expect': "its pid namespace's init"},
    # threads of a pid namespace's init, dumped and killed: its last thread to exit
    # waits for the traced zombies of the others, which criu must reap in any order
    'ns_pid_init_threads': {'bin': 'threads_exit_order', 'launcher': True, 'pidns': True,
                            'test_env': {'ZDTM_PIDNS_ROOT': '1'}},
    'ns_uts_ipc': {},
    'ns_time': {'launcher': True},
    'ns_container': {'launcher': True, 'pidns': True},
    'ns_user': {'launcher': True, 'pidns': True},
    # the audit loginuid of a tree's tasks; in a user namespace of its own (ids its own)
    'loginuid_tree': {},
    'loginuid_tree_userns': {'bin': 'loginuid_tree', 'launcher': True, 'pidns': True,
                             'test_env': {'ZDTM_LOGINUID_USERNS': '1'}},
    'ns_user_files': {'launcher': True, 'pidns': True, 'devpts': True,
                      'dump_args': ['--file-locks']},
    'restore_fail_userns_unmapped_owner': {'bin': 'ns_user_files', 'mode': 'restore_fails',
                                           'launcher': True, 'pidns': True, 'devpts': True,
                                           'dump_args': ['--file-locks'],
                                           'corrupt': unix_file_owner_unmapped,
                                           'expect': 'uid 70000 is not mapped by the tree'},
    'dump_fail_userns_unmapped_owner': {'bin': 'ns_user', 'mode': 'dump_fails',
                                        'launcher': True, 'pidns': True,
                                        'test_env': {'ZDTM_USERNS_UNMAPPED': '1'},
                                        'expect': 'uid 1234 has no mapping in the tree\'s '
                                                  'user namespace'},
    'cgroup_ns_root': {'launcher': True, 'pidns': True, 'cleanup': remove_cgns_cgroups},
    'ns_net': {'launcher': True, 'pidns': True},
    'ns_net_veth': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                    'test_env': {'ZDTM_NET_VETH': '1'},
                    'restore_args': ['--external', 'veth[zdtm_nin]:zdtm_nout']},
    'ns_net_veth_bridge': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                           'test_env': {'ZDTM_NET_VETH': '1', 'ZDTM_NET_BRIDGE': '1'},
                           'restore_args': ['--external', 'veth[zdtm_nin]:zdtm_nout@zdtm_nbr']},
    # sysctls the kernel lacks: a link's IPv6 settings where it has none
    'ns_net_weak_sysctls': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                            'test_env': {'ZDTM_NET_VETH': '1', 'ZDTM_NET_SMALL_MTU': '1'},
                            'after_dump': small_mtu_gets_ipv6_conf,
                            'restore_args': ['--weak-sysctls', '--external',
                                             'veth[zdtm_nin]:zdtm_nout']},
    'restore_fail_netns_sysctl_missing': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_VETH': '1', 'ZDTM_NET_SMALL_MTU': '1'},
        'corrupt': small_mtu_gets_ipv6_conf,
        'restore_args': ['--external', 'veth[zdtm_nin]:zdtm_nout'],
        'expect': 'cannot set /proc/sys/net/ipv6/conf/zdtm_nin/'},
    'ns_net_macvlan': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                       'test_env': {'ZDTM_NET_MACVLAN': '1'},
                       'restore_args': ['--external', 'macvlan[zdtm_nmv]:zdtm_mvbr']},
    'ns_user_net_macvlan': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                            'test_env': {'ZDTM_NET_USERNS': '1', 'ZDTM_NET_MACVLAN': '1'},
                            'restore_args': ['--external', 'macvlan[zdtm_nmv]:zdtm_mvbr'],
                            'cleanup': remove_macvlan_lower},
    'restore_fail_netns_macvlan_unnamed': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_MACVLAN': '1'}, 'corrupt': lambda img_dir, pid: None,
        'cleanup': remove_macvlan_lower,
        'expect': 'macvlan link zdtm_nmv: its lower link must be named with --external'},
    'restore_fail_netns_macvlan_no_lower': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_MACVLAN': '1'}, 'corrupt': lambda img_dir, pid: None,
        'restore_args': ['--external', 'macvlan[zdtm_nmv]:zdtm_nolink'],
        'cleanup': remove_macvlan_lower,
        'expect': 'macvlan zdtm_nmv: no link zdtm_nolink in criu\'s net namespace'},
    'ns_net_netdev': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                      'test_env': {'ZDTM_NET_VETH': '1'},
                      'restore_args': ['--external', 'netdev[zdtm_nin]:zdtm_npre',
                                       '--action-script', NETDEV_PRE_SCRIPT]},
    'ns_user_net_netdev': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                           'test_env': {'ZDTM_NET_USERNS': '1', 'ZDTM_NET_VETH': '1'},
                           'restore_args': ['--external', 'netdev[zdtm_nin]:zdtm_npre',
                                            '--action-script', NETDEV_PRE_SCRIPT]},
    'restore_fail_netns_netdev_missing': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_VETH': '1'}, 'corrupt': lambda img_dir, pid: None,
        'restore_args': ['--external', 'netdev[zdtm_nin]:zdtm_npre'],
        'expect': 'link zdtm_nin: no link zdtm_npre in criu\'s net namespace'},
    'restore_fail_netns_macvlan_index_taken': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_MACVLAN': '1'}, 'corrupt': macvlan_index_taken,
        'restore_args': ['--external', 'macvlan[zdtm_nmv]:zdtm_mvbr'],
        'cleanup': remove_macvlan_lower,
        'expect': "criu's net namespace has a link of that index"},
    'ns_net_nested': {'launcher': True, 'pidns': True},
    # tun/tap devices and their files (attached, a detached queue, never attached), a
    # persistent device without one; in the root's net namespace, then a nested one
    'ns_net_tun': {'launcher': True, 'pidns': True},
    'ns_net_tun_nested': {'bin': 'ns_net_tun', 'launcher': True, 'pidns': True,
                          'test_env': {'ZDTM_TUN_NESTED': '1'}},
    # in a user namespace of the tree's own, which owns the net namespace (the devices'
    # owner and group as the tree sees them)
    'ns_user_net_tun': {'bin': 'ns_net_tun', 'launcher': True, 'pidns': True,
                        'test_env': {'ZDTM_TUN_USERNS': '1'}},
    'dump_fail_ns_net_tun_no_netns': {'bin': 'ns_net_tun', 'mode': 'dump_fails',
                                      'launcher': True, 'pidns': True,
                                      'test_env': {'ZDTM_TUN_NO_NETNS': '1'},
                                      'expect': 'a tun file is dumped only where the tree has '
                                                'a net namespace of its own'},
    'dump_fail_ns_net_tun_outside': {'bin': 'ns_net_tun', 'mode': 'dump_fails',
                                     'launcher': True, 'pidns': True,
                                     'test_env': {'ZDTM_TUN_OUTSIDE': '1'},
                                     'expect': 'tun link zdtm_tunx has queues held by '
                                               'processes outside the dumped tree'},
    'dump_fail_ns_net_tun_moved': {'bin': 'ns_net_tun', 'mode': 'dump_fails',
                                   'launcher': True, 'pidns': True,
                                   'test_env': {'ZDTM_TUN_MOVED': '1'},
                                   'expect': 'tun device zdtm_tunm was moved out of the net '
                                             'namespace its file was opened in'},
    'restore_fail_ns_net_tun_missing': {'bin': 'ns_net_tun', 'mode': 'restore_fails',
                                        'launcher': True, 'pidns': True,
                                        'corrupt': tun_link_removed,
                                        'expect': 'its device zdtm_tun0 is no tun link of the '
                                                  'restored net namespace'},
    'ns_user_net_nested': {'bin': 'ns_net_nested', 'launcher': True, 'pidns': True,
                           'test_env': {'ZDTM_NET_USERNS': '1'}},
    'dump_fail_netns_nested_veth': {'bin': 'ns_net_nested', 'mode': 'dump_fails',
                                    'launcher': True, 'pidns': True,
                                    'test_env': {'ZDTM_NET_NESTED_VETH': '1'},
                                    'expect': 'link zdtm_nso is a veth: only the loopback, '
                                              'bridges, tun/tap and veth links whose peer is '
                                              'in the root\'s net namespace are supported'},
    'dump_fail_netns_nested_nsfd': {'bin': 'ns_net_nested', 'mode': 'dump_fails',
                                    'launcher': True, 'pidns': True,
                                    'test_env': {'ZDTM_NET_NESTED_NSFD': '1'},
                                    'expect': ', a nested one, is not supported'},
    'restore_fail_netns_nested_fill': {'bin': 'ns_net_nested', 'mode': 'restore_fails',
                                       'launcher': True, 'pidns': True,
                                       'corrupt': nested_netns_ping_range,
                                       'expect': 'net.ipv4.ping_group_range "100" is not two '
                                                 'gids'},
    'restore_fail_netns_nested_join': {'bin': 'ns_net_nested', 'mode': 'restore_fails',
                                       'launcher': True, 'pidns': True,
                                       'corrupt': lambda img_dir, pid: None,
                                       'restore_args': ['--join-ns', 'net:/proc/self/ns/net'],
                                       'expect': 'nested net namespaces are not restored with '
                                                 '--join-ns net'},
    'ns_user_net': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                    'test_env': {'ZDTM_NET_USERNS': '1'}},
    'ns_user_net_veth': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                         'test_env': {'ZDTM_NET_USERNS': '1', 'ZDTM_NET_VETH': '1'},
                         'restore_args': ['--external', 'veth[zdtm_nin]:zdtm_nout']},
    'ns_user_net_empty': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                          'test_env': {'ZDTM_NET_USERNS': '1', 'ZDTM_NET_EMPTY': '1'},
                          'dump_args': ['--empty-ns', 'net'],
                          'restore_args': ['--empty-ns', 'net', '--action-script',
                                           LO_UP_SCRIPT]},
    'ns_user_net_join': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                         'test_env': {'ZDTM_NET_USERNS': '1', 'ZDTM_NET_JOINED': '1'},
                         'dump_args': ['--empty-ns', 'net'],
                         'restore_args': ['--join-ns', 'net:/proc/self/ns/net']},
    'restore_fail_userns_netns_ping_unmapped': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_USERNS': '1'}, 'corrupt': netns_ping_range('70000\t70001'),
        'expect': 'net.ipv4.ping_group_range: gid 70000 is not mapped by the tree\'s user '
                  'namespace'},
    'restore_fail_netns_ping_range': {'bin': 'ns_net', 'mode': 'restore_fails',
                                      'launcher': True, 'pidns': True,
                                      'corrupt': netns_ping_range('100'),
                                      'expect': 'net.ipv4.ping_group_range "100" is not two '
                                                'gids'},
    'ns_net_empty': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                     'test_env': {'ZDTM_NET_EMPTY': '1'}, 'dump_args': ['--empty-ns', 'net'],
                     'restore_args': ['--empty-ns', 'net', '--action-script', LO_UP_SCRIPT]},
    'ns_net_join': {'bin': 'ns_net', 'launcher': True, 'pidns': True,
                    'test_env': {'ZDTM_NET_JOINED': '1'}, 'dump_args': ['--empty-ns', 'net'],
                    'restore_args': ['--join-ns', 'net:/proc/self/ns/net']},
    'restore_fail_netns_join': {'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True,
                                'pidns': True, 'corrupt': lambda img_dir, pid: None,
                                'restore_args': ['--join-ns', 'net:/proc/self/ns/uts'],
                                'expect': '--join-ns net:/proc/self/ns/uts: cannot join it'},
    # --join-ns uts, ipc, time: restored into a helper's namespace, whose state stays
    'ns_join_uts': {'bin': 'ns_join', 'join_helper': True, 'test_env': {'ZDTM_JOIN_KIND': 'uts'},
                    'restore_args': ['--join-ns', 'uts:{helper}']},
    'ns_join_ipc': {'bin': 'ns_join', 'join_helper': True, 'test_env': {'ZDTM_JOIN_KIND': 'ipc'},
                    'restore_args': ['--join-ns', 'ipc:/proc/{helper}/ns/ipc']},
    'ns_join_time': {'bin': 'ns_join', 'join_helper': True, 'launcher': True,
                     'test_env': {'ZDTM_JOIN_KIND': 'time'},
                     'restore_args': ['--join-ns', 'time:{helper}']},
    'restore_fail_join_pid': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                              'corrupt': lambda img_dir, pid: None,
                              'restore_args': ['--join-ns', 'pid:/proc/self/ns/pid'],
                              'expect': 'a pid namespace cannot be joined'},
    'restore_fail_join_mnt': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                              'corrupt': lambda img_dir, pid: None,
                              'restore_args': ['--join-ns', 'mnt:1'],
                              'expect': 'a mnt namespace cannot be joined'},
    'restore_fail_join_user': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                               'corrupt': lambda img_dir, pid: None,
                               'restore_args': ['--join-ns', 'user:1,0,0'],
                               'expect': 'joining a user namespace'},
    'restore_fail_join_uts_kind': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                                   'corrupt': lambda img_dir, pid: None,
                                   'restore_args': ['--join-ns', 'uts:/proc/self/ns/ipc'],
                                   'expect': 'uts:/proc/self/ns/ipc: cannot join it: not a uts '
                                             'namespace'},
    'restore_fail_join_ipc_file': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                                   'corrupt': lambda img_dir, pid: None,
                                   'restore_args': ['--join-ns', 'ipc:/etc/hostname'],
                                   'expect': 'ipc:/etc/hostname: cannot join it: not a ipc '
                                             'namespace'},
    'restore_fail_join_uts_none': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                   'corrupt': lambda img_dir, pid: None,
                                   'restore_args': ['--join-ns', 'uts:/proc/self/ns/uts'],
                                   'expect': 'has no uts namespace of its own'},
    'restore_fail_join_time_none': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                                    'corrupt': lambda img_dir, pid: None,
                                    'restore_args': ['--join-ns', 'time:/proc/self/ns/time'],
                                    'expect': 'has no time namespace of its own'},
    'restore_fail_netns_join_none': {'bin': 'mem_anon_private', 'mode': 'restore_fails',
                                     'corrupt': lambda img_dir, pid: None,
                                     'restore_args': ['--join-ns', 'net:/proc/self/ns/net'],
                                     'expect': 'has no net namespace of its own'},
    # nftables tables of several families in the tree's namespace (net-nft.c), locked with
    # nftables (the iptables lock, made with iptables-nft, leaves empty ip and ip6 filter
    # tables behind in the restored namespace, which the byte-for-byte ruleset would show)
    'ns_net_nft': {'launcher': True, 'pidns': True, 'dump_args': NFT_LOCK_ARGS},
    # the default lock (iptables): the filter tables it makes are gone again after restore
    'ns_net_nft_ipt_lock': {'bin': 'ns_net_nft', 'launcher': True, 'pidns': True},
    'ns_net_nft_criu_images': {'bin': 'ns_net_nft', 'launcher': True, 'pidns': True,
                               'test_env': {'ZDTM_NET_NFT_IPT': '1'},
                               'dump_args': NFT_LOCK_ARGS,
                               'image_check': nft_images_as_criu_writes},
    'ns_user_net_nft': {'bin': 'ns_net_nft', 'launcher': True, 'pidns': True,
                        'test_env': {'ZDTM_NET_USERNS': '1'}, 'dump_args': NFT_LOCK_ARGS},
    'restore_fail_ns_net_nft': {'bin': 'ns_net_nft', 'mode': 'restore_fails',
                                'launcher': True, 'pidns': True, 'dump_args': NFT_LOCK_ARGS,
                                'corrupt': netns_nftables_unloadable,
                                'expect': '`nft -f - ` failed (exit status 1)'},
    'restore_fail_netns_veth_unnamed': {
        'bin': 'ns_net', 'mode': 'restore_fails', 'launcher': True, 'pidns': True,
        'test_env': {'ZDTM_NET_VETH': '1'}, 'corrupt': lambda img_dir, pid: None,
        'expect': 'veth link zdtm_nin: its outer end must be named with --external'},
    'ns_restore_twice': {'bin': 'ns_container', 'mode': 'twice', 'launcher': True, 'pidns': True},
    'ns_leave_running': {'bin': 'ns_container', 'mode': 'leave_running', 'launcher': True,
                         'pidns': True},
    'restore_fail_pidns_external': {'bin': 'ns_pid_init', 'mode': 'restore_fails',
                                    'launcher': True, 'pidns': True, 'corrupt': pidns_external,
                                    'expect': 'is an external one (pid[4026531836]:host)'},
    'restore_fail_ipc_restore': {'bin': 'ns_uts_ipc', 'mode': 'restore_fails',
                                 'corrupt': ipc_msgmax_tiny,
                                 'expect': 'cannot queue message 2 (100 bytes) again'},
    'restore_fail_ns_container_ipc': {'bin': 'ns_container', 'mode': 'restore_fails',
                                      'launcher': True, 'pidns': True,
                                      'corrupt': lambda img_dir, pid: ipc_msgmax_tiny(img_dir, 1),
                                      'expect': 'cannot queue message 0 (8 bytes) again'},
    # a mount namespace: the root pivot_root()s into a tree of bind mounts, tmpfs, proc...;
    # the runner's /usr and the test's directory are external mounts
    'mnt_ns_tree': dict(MNT_NS_TREE, test_env={'ZDTM_MNT_HIDDEN_SOCK': '1'}),
    # a pre-dump given none of the external mounts the dump names (as runc pre-dumps): it
    # writes pages only, the mounts are the dump's business (CRIU's pre-dump does the same)
    'mnt_ns_pre_dump_no_externals': dict(MNT_NS_TREE, bin='mnt_ns_tree', mode='pre_dump',
                                         steps=False),
    # restored lazily: its tasks, in their pivoted root, reach the daemon's socket through
    # the images directory they hold (its path is not theirs to see), as a container's do
    'lazy_mnt_ns_tree': dict(MNT_NS_TREE, bin='mnt_ns_tree', lazy=True),
    # the same with a work directory of its own (-W, the socket's, as runc --work-path):
    # the tasks hold that directory open too
    'lazy_mnt_ns_tree_work_dir': dict(MNT_NS_TREE, bin='mnt_ns_tree', lazy=True,
                                      restore_args=MNT_NS_TREE['restore_args'] + ['-W', '{work}'],
                                      lazy_daemon_args=['-W', '{work}']),
    'mnt_ns_shared_root': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                               test_env={'ZDTM_MNT_SHARED_ROOT': '1'}),
    # the root an overlay, mounted again by the runner for the restore (overlay_root)
    'mnt_ns_overlay_root': dict(MNT_NS_TREE, bin='mnt_ns_tree', overlay_root=True,
                                test_env={'ZDTM_MNT_OVERLAY_ROOT': '1'}),
    # an external mount that is a slave of a shared tmpfs of the runner's
    'mnt_ns_ext_master': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                              test_env={'ZDTM_MNT_EXT_MASTER': '1'},
                              dump_args=MNT_NS_TREE['dump_args'] + ['--external', 'mnt[/ext]:ext'],
                              restore_args=MNT_NS_TREE['restore_args'] + [
                                  '--external', 'mnt[ext]:{out}/extsrc'],
                              cleanup=lambda: umount_lazy(os.path.join(OUT_DIR,
                                                                       'mnt_ns_ext_master',
                                                                       'extsrc'))),
    # an external mount in the peer group of a shared tmpfs of the runner's, found at dump
    # (--external mnt[]:s): after restore in that group again, and a mount the runner makes
    # there then shows in the tree's
    'mnt_ext_auto_shared': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                                test_env={'ZDTM_MNT_EXT_MASTER': '1', 'ZDTM_MNT_EXT_PEER': '1'},
                                dump_args=MNT_NS_TREE['dump_args'] + ['--external', 'mnt[]:s'],
                                after_restore=lambda out: mount_ext_late(
                                    os.path.join(out, 'extsrc')),
                                cleanup=lambda: umount_lazy(os.path.join(
                                    OUT_DIR, 'mnt_ext_auto_shared', 'extsrc'))),
    # the same in CRIU's older spelling, as LXC passes it (--ext-mount-map auto
    # --enable-external-sharing --enable-external-masters)
    'mnt_ext_auto_sharing': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                                 test_env={'ZDTM_MNT_EXT_MASTER': '1', 'ZDTM_MNT_EXT_PEER': '1'},
                                 dump_args=MNT_NS_TREE['dump_args'] + [
                                     '--ext-mount-map', 'auto', '--enable-external-sharing',
                                     '--enable-external-masters'],
                                 after_restore=lambda out: mount_ext_late(
                                     os.path.join(out, 'extsrc')),
                                 cleanup=lambda: umount_lazy(os.path.join(
                                     OUT_DIR, 'mnt_ext_auto_sharing', 'extsrc'))),
    # the same, found at dump (--external mnt[]): restore binds what criu's mounts show of it
    'mnt_ns_ext_auto': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                            test_env={'ZDTM_MNT_EXT_MASTER': '1'},
                            dump_args=MNT_NS_TREE['dump_args'] + ['--external', 'mnt[]'],
                            cleanup=lambda: umount_lazy(os.path.join(OUT_DIR, 'mnt_ns_ext_auto',
                                                                     'extsrc'))),
    # the root in user and IPC namespaces of its own too: its tmpfs refuse criu's ids
    'mnt_ns_userns': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                          test_env={'ZDTM_MNT_USERNS': '1', 'ZDTM_MNT_HIDDEN_SOCK': '1'}),
    # binfmt_misc without a user namespace of the tree's: the host's instance, mounted again
    # with its handlers where they are (not saved, as CRIU does)
    'mnt_ns_binfmt': dict(MNT_NS_TREE, bin='mnt_ns_tree', test_env={'ZDTM_MNT_BINFMT': '1'},
                          image_check=no_binfmt_image,
                          cleanup=lambda: remove_host_binfmt('mnt_ns_binfmt')),
    # and binfmt_misc there: the namespace's own instance, its handlers saved and registered
    'mnt_ns_userns_binfmt': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                                 test_env={'ZDTM_MNT_USERNS': '1', 'ZDTM_MNT_BINFMT': '1'}),
    # and one of its handlers refused by the kernel: restore fails, the tree is killed
    'restore_fail_mnt_userns_binfmt': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                                           test_env={'ZDTM_MNT_USERNS': '1',
                                                     'ZDTM_MNT_BINFMT': '1'},
                                           mode='restore_fails', corrupt=binfmt_offset_refused,
                                           expect='cannot register handler zdtm_magic'),
    # and a deleted file there owned by an id the namespace does not map: none can make it
    'restore_fail_mnt_userns_ghost_owner': dict(MNT_NS_TREE, bin='mnt_ns_tree',
                                                test_env={'ZDTM_MNT_USERNS': '1'},
                                                mode='restore_fails',
                                                corrupt=ghost_owner_unmapped,
                                                expect="uid 70000 is not mapped by the tree's"),
    # a child in a mount namespace of its own below the root's, a peer group across both
    'mnt_ns_nested': dict(MNT_NS_TREE),
    # a child pivot_root()ed into a tmpfs of a namespace of its own: no /proc there; its
    # root read-only; the root task without /proc too; its root's files image gone
    'mnt_ns_pivot': dict(MNT_NS_TREE),
    'mnt_ns_pivot_ro': dict(MNT_NS_TREE, bin='mnt_ns_pivot', test_env={'ZDTM_MNT_PIVOT_RO': '1'}),
    'mnt_ns_pivot_root_no_proc': dict(MNT_NS_TREE, bin='mnt_ns_pivot',
                                      test_env={'ZDTM_MNT_PIVOT_ROOT_NO_PROC': '1'}),
    # and a removed file on a read-only mount (a ghost, re-created with no /proc anywhere)
    'mnt_ns_pivot_ghost_ro': dict(MNT_NS_TREE, bin='mnt_ns_pivot',
                                  test_env={'ZDTM_MNT_PIVOT_ROOT_NO_PROC': '1',
                                            'ZDTM_MNT_PIVOT_GHOST': '1'}),
    'restore_fail_mnt_ns_pivot_no_tmpfs': dict(MNT_NS_TREE, bin='mnt_ns_pivot',
                                               mode='restore_fails', corrupt=remove_tmpfs_images,
                                               expect='.tar.gz.img is missing'),
    # a pty's slave node bound at /dev/console; refused under a shared /dev
    'mnt_ns_pty_console': dict(MNT_NS_TREE),
    'restore_fail_mnt_pty_console_shared': dict(MNT_NS_TREE, bin='mnt_ns_pty_console',
                                                mode='restore_fails',
                                                corrupt=lambda img_dir, pid: None,
                                                test_env={'ZDTM_PTY_CONSOLE_SHARED': '1'},
                                                expect='it is shared, a slave or unbindable'),
    # inotify watches on tmpfs inodes of the root's and of a child's mount namespace
    'inotify_mntns_tmpfs': dict(MNT_NS_TREE),
    # and a grandchild in one below the child's, which shares the child's tmpfs
    'dump_fail_mnt_nested_shared_fs': dict(MNT_NS_TREE, bin='mnt_ns_nested', mode='dump_fails',
                                           test_env={'ZDTM_MNT_GRANDCHILD': '1'},
                                           expect="is in mount namespaces 11 and 12 but not "
                                                  "in the root's"),
    # --enable-fs: a filesystem criu does not know is mounted anew at restore, empty
    'mnt_ns_enable_fs': dict(MNT_NS_TREE, bin='mnt_ns_tree', test_env={'ZDTM_MNT_RAMFS': '1',
                                                                   'ZDTM_MNT_RAMFS_NEW': '1'},
                             dump_args=MNT_NS_TREE['dump_args'] + ['--enable-fs', 'tmpfs,ramfs'],
                             image_check=ramfs_dumped_auto),
    # --skip-mnt: a mount and the one below it are not dumped, restore goes on without them
    'mnt_ns_skip_mnt': dict(MNT_NS_TREE, bin='mnt_ns_tree', test_env={'ZDTM_MNT_SKIP': '1'},
                            dump_args=MNT_NS_TREE['dump_args'] + ['--skip-mnt', '/skipped/'],
                            image_check=skipped_mounts_absent),
    # --lsm-mount-context replaces a mount's context= (this VM has no SELinux, which takes
    # it: the mount made with the new one fails, and says so)
    'restore_fail_mnt_lsm_context': dict(
        mnt_restore_fails(MNT_NS_TREE['restore_args'] + ['--lsm-mount-context', 'zdtm_b_t'],
                          'size=64k,mode=700,context="zdtm_b_t"'),
        corrupt=private_tmpfs_gets_context),
    'dump_fail_mnt_ramfs': dict(MNT_NS_TREE, bin='mnt_ns_tree', mode='dump_fails',
                                test_env={'ZDTM_MNT_RAMFS': '1'},
                                expect='at /ramfs: ramfs (source ramfs, root /) is neither '
                                       'external'),
    # an fd on a file of a mount that a bind of itself covers: restore would reopen it on
    # the bind (CRIU refuses it too: zdtm/static/overmounted_file)
    'dump_fail_mnt_overmounted_fd': dict(MNT_NS_TREE, bin='mnt_ns_tree', mode='dump_fails',
                                         test_env={'ZDTM_MNT_OVERMOUNTED_FD': '1'},
                                         expect='/tmp/self/file is on mount '),
    'restore_fail_mnt_no_external': mnt_restore_fails(
        ['--root', '{work}/root', '--external', 'mnt[out]:{out}'],
        'is external (key usr): restore needs --external mnt[usr]:PATH'),
    # the root task fails while it builds the tree: nothing is left of it
    'restore_fail_mnt_bad_external': mnt_restore_fails(
        ['--root', '{work}/root', '--external', 'mnt[usr]:/nonexistent', '--external',
         'mnt[out]:{out}'],
        'at /usr: cannot bind /nonexistent'),
    'restore_fail_mnt_no_root': mnt_restore_fails(
        ['--external', 'mnt[usr]:/usr', '--external', 'mnt[out]:{out}'],
        'its root mount needs --root DIR'),
    'restore_fail_root_without_mntns': {'bin': 'tree_sessions', 'mode': 'restore_fails',
                                        'corrupt': lambda img_dir, pid: None,
                                        'restore_args': ['--root', '{work}'],
                                        'expect': 'has no mount namespace of its own'},
    'restore_fail_ns_nested': {'bin': 'tree_sessions', 'mode': 'restore_fails',
                               'corrupt': child_gets_own_uts_ns, 'corrupt_depth': 1,
                               'expect': 'nested uts namespaces are not supported'},
    # a child in a mount namespace of its own, the root in criu's: none to make it below
    'restore_fail_ns_nested_mnt': {'bin': 'tree_sessions', 'mode': 'restore_fails',
                                   'corrupt': child_gets_own_mnt_ns, 'corrupt_depth': 1,
                                   'expect': 'nested mnt namespaces need the root in one of '
                                             'its own'},
    'cli_unknown_option': {'mode': 'cli', 'args': ['dump', '--no-such-option']},
    # --external: veth[A]:B, macvlan[A]:B, netdev[A]:B and mnt[A]:B only, neither empty
    'cli_external_other_kind': {'mode': 'cli', 'args': ['dump', '-t', '{free_pid}', '-D',
                                                        '{out}/img', '--external', 'tty[a]:b']},
    'cli_external_macvlan_empty': {
        'mode': 'cli', 'rc': 1, 'args': ['restore', '-D', '{out}/img', '--external', 'macvlan[]:b'],
        'stderr': "Error: bad value 'macvlan[]:b' for --external (macvlan[IN]:OUT)\n"},
    'cli_external_netdev_no_outer': {
        'mode': 'cli', 'rc': 1, 'args': ['restore', '-D', '{out}/img', '--external', 'netdev[a]:'],
        'stderr': "Error: bad value 'netdev[a]:' for --external (netdev[IN]:OUT)\n"},
    'cli_external_mnt_empty': {'mode': 'cli', 'args': ['restore', '-D', '{out}/img',
                                                       '--external', 'mnt[]:/x']},
    'cli_missing_argument': {'mode': 'cli', 'args': ['dump', '-D', '{out}/img', '-t']},
    'cli_dump_no_such_pid': {'mode': 'cli',
                             'args': ['dump', '-t', '{free_pid}', '-D', '{out}/img']},
    # options parsed as upstream CRIU parses them (criu/command/config.c)
    # cgroups: each --manage-cgroups mode where it differs. The runner removes the test's
    # cgroups after the dump (restore makes them), or changes cpu.shares in them.
    'cgroup_limits': {'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_soft'},
                      'image_check': cgroup_img_check('zdtm_cg_soft')},
    'cgroup_thread_apart': {'bin': 'cgroup_limits',
                            'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_thread', 'ZDTM_CG_THREAD_APART': '1'},
                            'image_check': cgroup_img_check('zdtm_cg_thread')},
    'cgroup_soft_existing': {'bin': 'cgroup_limits',
                             'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_soft2', 'ZDTM_CG_SHARES': '1024'},
                             'image_check': cgroup_img_check('zdtm_cg_soft2', False, '1024')},
    'cgroup_full_existing': {'bin': 'cgroup_limits', 'restore_args': ['--manage-cgroups=full'],
                             'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_full'},
                             'image_check': cgroup_img_check('zdtm_cg_full', False, '1024')},
    'cgroup_props_existing': {'bin': 'cgroup_limits', 'restore_args': ['--manage-cgroups=props'],
                              'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_props'},
                              'image_check': cgroup_img_check('zdtm_cg_props', False, '1024')},
    'cgroup_none_existing': {'bin': 'cgroup_limits', 'restore_args': ['--manage-cgroups=none'],
                             'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_none', 'ZDTM_CG_SHARES': '1024'},
                             'image_check': cgroup_img_check('zdtm_cg_none', False, '1024')},
    'cgroup_strict': {'bin': 'cgroup_limits', 'dump_args': ['--manage-cgroups=strict'],
                      'restore_args': ['--manage-cgroups=strict'],
                      'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_strict'},
                      'image_check': cgroup_img_check('zdtm_cg_strict')},
    # --freeze-cgroup: the tree frozen through its freezer cgroup, seized while frozen,
    # thawed: after the dump, a failed one or -R, the cgroup is THAWED and the tree runs.
    'cgroup_freeze_churn': {'dump_args': ['--freeze-cgroup', '/sys/fs/cgroup/freezer/zdtm_freeze']},
    'cgroup_freeze_leave_running': {
        'bin': 'cgroup_freeze_churn', 'mode': 'leave_running',
        'dump_args': ['--freeze-cgroup', '/sys/fs/cgroup/freezer/zdtm_freeze_lr'],
        'test_env': {'ZDTM_CG_NAME': 'zdtm_freeze_lr', 'ZDTM_FREEZE_QUIET': '1'}},
    # a paused container (runc pause, containerd's checkpoint of a running task): the cgroup
    # frozen before the dump -R stays frozen after it, as CRIU leaves it (runc resumes it)
    'cgroup_freeze_paused_leave_running': {
        'bin': 'cgroup_freeze_churn', 'mode': 'leave_running',
        'frozen_cgroup': '/sys/fs/cgroup/freezer/zdtm_freeze_paused',
        'dump_args': ['--freeze-cgroup', '/sys/fs/cgroup/freezer/zdtm_freeze_paused'],
        'test_env': {'ZDTM_CG_NAME': 'zdtm_freeze_paused', 'ZDTM_FREEZE_QUIET': '1'}},
    'cgroup_freeze_dump_fails': {
        'bin': 'cgroup_freeze_churn', 'mode': 'dump_fails',
        'dump_args': ['--freeze-cgroup', '/sys/fs/cgroup/freezer/zdtm_freeze_fail'],
        'test_env': {'ZDTM_CG_NAME': 'zdtm_freeze_fail', 'ZDTM_FREEZE_QUIET': '1',
                     'ZDTM_FREEZE_FAIL': '1'}},
    'restore_fail_cgroup_none_missing': {
        'bin': 'cgroup_limits', 'mode': 'restore_fails', 'restore_args': ['--manage-cgroups=none'],
        'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_none_missing'},
        'corrupt': cgroup_corrupt('zdtm_cg_none_missing', True), 'expect': 'does not exist'},
    'restore_fail_cgroup_strict_existing': {
        'bin': 'cgroup_limits', 'mode': 'restore_fails', 'restore_args': ['--manage-cgroups=strict'],
        'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_strict_existing'},
        'corrupt': cgroup_corrupt('zdtm_cg_strict_existing', False), 'expect': 'exists already'},
    'restore_fail_cgroup_bad_property': {
        'bin': 'cgroup_limits', 'mode': 'restore_fails',
        'test_env': {'ZDTM_CG_NAME': 'zdtm_cg_bad_prop'},
        'corrupt': cgroup_corrupt('zdtm_cg_bad_prop', True, pids_max_bogus),
        'expect': 'pids.max: cannot write "bogus"'},
    'cli_verbosity_attached_is_level_0': {
        # -v takes an optional attached value read like atoi(): "-verbosity=2" is -v with
        # "erbosity=2", level 0, so not even the warning of an unsupported feature shows
        'mode': 'cli', 'rc': 1, 'args': ['check', '-verbosity=2', '--feature', 'compat_cr']},
    'cli_verbosity_long_form': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--verbosity=2', '--feature=compat_cr'],
        'stderr': 'Warn: compat_cr is not supported by this criu: 32-bit tasks are not dumped\n'},
    'cli_option_equals_value': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--feature=clone3_set_tid', '--log-file=c.log',
                                         '--images-dir={out}', '-v4'],
        'stdout': 'clone3_set_tid is supported\n', 'created': ['c.log']},
    'cli_option_abbreviated': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--feat', 'clone3_set_tid', '--no-display'],
        'stdout': 'clone3_set_tid is supported\n'},
    'cli_refused_option': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--tls'],
        'stderr': 'option --tls is not supported\n'},
    'cli_refused_option_value': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--empty-ns', 'uts'],
        'stderr': 'option --empty-ns uts is not supported\n'},
    'cli_lsm_profile_bad': {
        'mode': 'cli', 'rc': 1, 'args': ['restore', '-D', '{out}', '--lsm-profile', 'smack:x'],
        'stderr': "Error: bad value 'smack:x' for --lsm-profile (apparmor:PROFILE, "
                  "selinux:CONTEXT or none:)\n"},
    'cli_cpu_cap_bad': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--cpu-cap=fpu,xyz'],
        'stderr': "Error: bad value 'fpu,xyz' for --cpu-cap (fpu, cpu, ins, all or none, with , "
                  "and ^)\n"},
    'cli_skip_mnt_relative': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-D', '{out}', '--skip-mnt', 'proc'],
        'stderr': "Error: bad value 'proc' for --skip-mnt (an absolute mount point)\n"},
    'cli_enable_fs_empty': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-D', '{out}', '--enable-fs', ','],
        'stderr': "Error: bad value ',' for --enable-fs (FS[,FS])\n"},
    # what LXC passes at restore: a --external key of no kind and a mount key without a
    # path, both kept by CRIU for lookups nothing makes
    'cli_external_no_kind_taken': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--external', 'console:', '--ext-mount-map',
                                         'console:', '--feature', 'clone3_set_tid'],
        'stdout': 'clone3_set_tid is supported\n'},
    'cli_refused_option_negated_is_default': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--no-tls', '--feature',
                                         'clone3_set_tid'],
        'stdout': 'clone3_set_tid is supported\n'},
    'cli_refused_option_logged': {
        # the reason also lands in the log named by -o, which test drivers read
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-o', 'd.log', '-D', '{out}', '-t', '1',
                                         '--allow-uprobes'],
        'stderr': 'option --allow-uprobes is not supported\n', 'created': ['d.log']},
    'cli_dedup_without_parent': {'mode': 'cli', 'args': ['dedup', '-D', '{out}']},
    # CRIU's format, the interface version first: LXC parses it (and wants 2.0 or later)
    'cli_version': {'mode': 'cli', 'rc': 0, 'args': ['--version'],
                    'stdout': 'Version: 4.2\nGitID: %s\n' % CRIU_OWN_VERSION},
    # criu swrk FD: FD must be a SOCK_SEQPACKET socket (its stdin here is /dev/null)
    'cli_swrk_not_a_socket': {'mode': 'cli', 'rc': 1, 'args': ['swrk', '0'],
                              'stderr': "Error: swrk 0: not a SOCK_SEQPACKET socket's "
                                        "descriptor\n"},
    'cli_swrk_without_fd': {'mode': 'cli', 'rc': 1, 'args': ['swrk'],
                            'stderr': 'Error: swrk needs FD: criu swrk FD\n'},
    'cli_cpuinfo_bad_action': {
        'mode': 'cli', 'rc': 1, 'args': ['cpuinfo', 'show', '-D', '{out}'],
        'stderr': "Error: cpuinfo needs dump or check, not 'show'\n"},
    'cli_cpuinfo_check_no_image': {'mode': 'cli', 'args': ['cpuinfo', 'check', '-D', '{out}']},
    'cli_refused_command': {
        'mode': 'cli', 'rc': 1, 'args': ['exec'],
        'stderr': 'command exec is not supported\n'},
    'cli_pre_dump_no_such_pid': {'mode': 'cli',
                                 'args': ['pre-dump', '-t', '{free_pid}', '-D', '{out}/img']},
    'cli_pre_dump_without_pid': {
        'mode': 'cli', 'rc': 1, 'args': ['pre-dump', '--track-mem'],
        'stderr': 'Error: pre-dump needs a process: -t PID\n'},
    'cli_dump_lazy_pages_no_port': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-t', '1', '--lazy-pages'],
        'stderr': 'Error: dump --lazy-pages: it needs --port to serve the pages on\n'},
    'cli_pre_dump_lazy_pages_refused': {
        'mode': 'cli', 'rc': 1, 'args': ['pre-dump', '-t', '1', '--lazy-pages', '--port', '1'],
        'stderr': 'Error: pre-dump --lazy-pages: a pre-dump stores pages; only dump leaves '
                  'them in the tree\n'},
    'cli_dump_lazy_pages_page_server_refused': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-t', '1', '--lazy-pages', '--page-server',
                                         '--address', '127.0.0.1', '--port', '1'],
        'stderr': 'Error: dump --lazy-pages: the pages stay in the tree, they are sent to no '
                  'page server\n'},
    'cli_dump_lazy_pages_parent_refused': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-t', '1', '--lazy-pages', '--port', '1',
                                         '--prev-images-dir', '../pre'],
        'stderr': 'Error: dump --lazy-pages: the pages stay in the tree, none are taken from '
                  'parent images\n'},
    'cli_lazy_pages_page_server_no_port': {
        'mode': 'cli', 'rc': 1, 'args': ['lazy-pages', '--page-server'],
        'stderr': "Error: lazy-pages --page-server needs the dump's --port (and --address)\n"},
    # the page server: what it cannot do is refused with one line
    'cli_pre_dump_page_server_no_port': {
        'mode': 'cli', 'rc': 1, 'args': ['pre-dump', '-t', '1', '--page-server', '--address',
                                         '127.0.0.1'],
        'stderr': "Error: pre-dump --page-server needs the server's --address and --port\n"},
    'cli_dump_page_server_no_port': {
        'mode': 'cli', 'rc': 1, 'args': ['dump', '-t', '1', '--page-server', '--address',
                                         '127.0.0.1'],
        'stderr': "Error: dump --page-server needs the server's --address and --port\n"},
    'cli_dump_page_server_auto_dedup_refused': {
        'mode': 'cli', 'args': ['dump', '-t', '1', '--page-server', '--address', '127.0.0.1',
                                '--port', '1', '--prev-images-dir', '../pre', '--auto-dedup']},
    'cli_page_server_no_port': {'mode': 'cli', 'rc': 1, 'args': ['page-server', '-D', 'ps'],
                                'stderr': 'Error: page-server needs --port\n'},
    'cli_page_server_lazy_parent_refused': {'mode': 'cli', 'args': [
        'page-server', '--port', '1', '--lazy-pages', '--prev-images-dir', '../pre']},
    'cli_port_zero': {'mode': 'cli', 'rc': 1, 'args': ['page-server', '--port', '0'],
                      'stderr': "Error: bad value '0' for --port\n"},
    'cli_unknown_feature': {'mode': 'cli', 'args': ['check', '--feature', 'no_such_feature']},
    # configuration files as CRIU reads them
    'cli_config_file': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--config', '{out}/c.conf'],
        'files': {'c.conf': '# one option a line, no dashes\n\n'
                            '  verbosity=4   # comments may follow\n'
                            'log-file "check log.txt"\n'
                            'images-dir {out}\n'
                            'feature clone3_set_tid\n'},
        'stdout': 'clone3_set_tid is supported\n', 'created': ['check log.txt']},
    'cli_config_file_command_line_wins': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--config={out}/c.conf', '-v0'],
        'files': {'c.conf': 'verbosity=4\nfeature compat_cr\n'}},
    'cli_config_file_bad_line': {
        'mode': 'cli', 'rc': 1, 'args': ['check', '--config', '{out}/c.conf'],
        'files': {'c.conf': 'verbosity=4\ntree\n'},
        'stderr': "Error: {out}/c.conf:2: option '--tree' requires an argument\n"},
    'cli_config_env_file': {
        # $CRIU_CONFIG_FILE is read even with --no-default-config
        'mode': 'cli', 'rc': 0, 'args': ['check', '--no-default-config'],
        'files': {'env.conf': 'feature get_rseq_conf\n'},
        'env': {'CRIU_CONFIG_FILE': '{out}/env.conf'}, 'stdout': 'get_rseq_conf is supported\n'},
    'cli_config_default_file': {
        'mode': 'cli', 'rc': 1, 'args': ['check'],
        'files': {'.criu/default.conf': 'tls\n'},
        'stderr': '{out}/.criu/default.conf:1: option --tls is not supported\n'},
    'cli_no_default_config': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--no-default-config', '--feature',
                                         'clone3_set_tid'],
        'files': {'.criu/default.conf': 'tls\n'},
        'stdout': 'clone3_set_tid is supported\n'},
    'cli_config_option_skips_default_files': {
        'mode': 'cli', 'rc': 0, 'args': ['check', '--config', '{out}/c.conf'],
        'files': {'.criu/default.conf': 'tls\n', 'c.conf': 'feature vdso\n'},
        'stdout': 'vdso is supported\n'},
    'check_features': {'mode': 'check_features'},
    # --action-script, --status-fd, --leave-stopped, as CRIU's test driver uses them
    'action_scripts': {'bin': 'mem_anon_private', 'mode': 'action_scripts'},
    'action_script_fails_post_dump': {
        'bin': 'threads_regs_tls', 'mode': 'dump_fails',
        'script': '[ "$CRTOOLS_SCRIPT_ACTION" != post-dump ]',
        'dump_args': ['--action-script', '{out}/script.sh'],
        'expect': 'action script {out}/script.sh failed at post-dump: exit status 1'},
    'action_script_fails_pre_dump': {
        'bin': 'tree_sessions', 'mode': 'dump_fails', 'script': 'exit 7',
        'dump_args': ['--action-script', '{out}/script.sh'],
        'expect': 'failed at pre-dump: exit status 7'},
    'status_fd': {'bin': 'mem_anon_private', 'mode': 'status_fd'},
    'leave_stopped': {'bin': 'threads_regs_tls', 'mode': 'leave_stopped'},
    'log_pid': {'bin': 'tree_sessions', 'mode': 'log_pid'},
    'inherit_fd_pipe': {'bin': 'mem_anon_private', 'mode': 'inherit_fd'},
    'dump_timeout_vfork': {'mode': 'dump_fails', 'dump_args': ['--timeout', '1'],
                           'expect': 'did not stop in time (--timeout)'},
    'ghost_limit_exceeded': {'bin': 'file_deleted_open', 'mode': 'dump_fails',
                             'dump_args': ['--ghost-limit', '64K'],
                             'expect': 'bytes of data, more than --ghost-limit 65536'},
    'plugin_hook_order_and_pids': {'mode': 'plugin_round_trip', 'check': 'hook_order'},
    'plugin_enotsup_chaining': {'mode': 'plugin_round_trip', 'check': 'enotsup_chain'},
    'plugin_fdstore_worker_exchange': {'mode': 'plugin_round_trip',
                                       'check': 'fdstore_exchange'},
    'plugin_resume_devices_late_before_run': {'mode': 'plugin_round_trip'},
    'plugin_missing_at_restore': {'mode': 'plugin_restore_fails',
                                  'libdir': PLUGIN_LIB_NO_TESTDEV, 'names': 'testdev'},
    'plugin_device_vma_memfd': {'mode': 'plugin_round_trip', 'check': 'device_vma'},
    'plugin_device_vma_declined_at_restore': {
        'mode': 'plugin_restore_fails', 'env': {'CRIU_TESTDEV_DECLINE_VMA': '1'},
        'names': 'no loaded plugin restores it'},
}
for _hook in ('INIT', 'PAUSE_DEVICES', 'CHECKPOINT_DEVICES', 'HANDLE_DEVICE_VMA',
              'DUMP_EXT_FILE', 'DUMP_DEVICES_LATE'):
    TESTS['plugin_dump_fails_at_' + _hook] = {'mode': 'plugin_dump_fails', 'fail': _hook}
for _hook in ('INIT', 'RESTORE_INIT', 'POST_FORKING', 'RESTORE_EXT_FILE', 'UPDATE_VMA_MAP',
              'RESUME_DEVICES_LATE'):
    TESTS['plugin_restore_fails_at_' + _hook] = {'mode': 'plugin_restore_fails',
                                                 'fail': _hook, 'names': 'test_fail'}

# Cross tests against the reference (UPSTREAM_CRIU): cross_up2us_NAME is dumped by upstream
# criu and restored by ours (mode cross_dump_upstream), cross_us2up_NAME the other way round
# (cross_restore_upstream); then NAME checks itself. 'tty': stdio on a pty, --shell-job, and
# the test leads a session of its own: upstream restores a shell job's terminal by making
# the root's group its foreground group (TIOCSPGRP), which needs the terminal to be criu's
# controlling one (here it is no one's); it skips that for a root that leads its session.
CROSS_TESTS = {
    'mem_anon_private': {},  # one process: anonymous memory
    'regs_fpu_avx': {},  # registers, x87/SSE/AVX state
    'aio_rings': {},  # AIO contexts: ring, head, tail, events
    'rseq_critical_section': {},  # threads stopped inside rseq critical sections
    'sig_pending_std': {},  # signals: pending, blocked
    'sig_queued_rt': {},
    'sigaction_all': {},
    'threads_regs_tls': {},  # threads
    'tree_sessions': {},  # process trees: sessions, groups
    'tree_zombie': {},
    'tree_shared_anon': {},  # shared anonymous memory across the tree
    'tree_shared_fdtable': {},  # an fd table shared by parent and child (CLONE_FILES)
    'mem_shared_anon': {},
    'pipe_queued_bytes': {},  # pipes, FIFOs
    'tree_pipe_queued_bytes': {},
    'fifo_queued_bytes': {},
    'file_fown_async': {'devpts': True},  # owners of I/O signals: process, thread, group
    'file_reg_flags_offset': {},  # regular files: flags, offsets, shared descriptions
    'file_dup_shared_offset': {},
    'file_deleted_open': {},  # deleted but open
    'file_deleted_nodes': {},  # deleted FIFO, directories (one the cwd), device node
    'file_deleted_nested': {},  # in deleted directories, O_TMPFILE
    'cwd_dead_proc': {},  # cwd and fd in /proc of reaped children
    'proc_dead_pid_file': {},  # an fd on a file in /proc of a reaped child
    # file locks: upstream restores them only when asked to (--file-locks)
    'file_locks_posix': {'dump_args': ['--file-locks'], 'restore_args': ['--file-locks']},
    'file_locks_flock': {'dump_args': ['--file-locks'], 'restore_args': ['--file-locks']},
    'file_locks_ofd': {'dump_args': ['--file-locks'], 'restore_args': ['--file-locks']},
    'file_locks_waiter': {'dump_args': ['--file-locks'], 'restore_args': ['--file-locks']},
    'file_leases': {'dump_args': ['--file-locks'], 'restore_args': ['--file-locks']},
    'tty_shell_job': {'tty': True, 'setsid': True},  # a terminal, --shell-job
    'tty_console_vt': {},  # /dev/console and a virtual console, by path
    'epoll_targets': {},  # epoll: watched files, nested, one-shot, moved fds
    'epoll_in_flight': {},  # an epoll only in a socket's queue
    'sched_policy_nice_oom': {},  # per-thread scheduling, oom_score_adj
    'seccomp_filters_threads': {},  # seccomp: shared and own filters, strict mode
    'membarrier_registered': {},
    'loginuid_tree': {},  # the audit loginuid
    'mem_map_flags': {},  # MAP_NORESERVE, MAP_DROPPABLE
    'mem_guard_regions': {},  # MADV_GUARD_INSTALL
    'inotify_watches': {},  # inotify watches: wd numbers, masks, flags
    'fanotify_marks': {},  # fanotify groups: flags, inode and mount marks
    'eventfd_counter_flags': {},  # anonymous-inode files
    'signalfd_mask_flags': {},
    'timerfd_interval_ticks': {},
    'pidfd_child_self_dead': {},  # pidfds: self, a child, a reaped child
    'nsfs_self_files': {},  # fds on /proc/self/ns/*: the restored task's own
    'netlink_sk_bound_groups': {},  # netlink sockets: port ids, groups, peers
    'packet_sk_options_rings': {},  # packet sockets: binding, options, rings
    'packet_sk_ring_mapped': {},
    'mem_hugetlb_anon': {},  # anonymous hugetlb memory, private and shared
    'memfd_fd_contents_seals': {},  # memfds: fds, contents, seals
    'memfd_mapped_shared': {},  # memfds mapped shared and private
    'pty_pair_termios': {'devpts': True},  # ptys: termios, modes, queued bytes
    'pty_session_ctty': {'devpts': True},  # a pty as a session's controlling terminal
    'unix_socketpair_queues': {},  # unix sockets: queues, boundaries, shutdown, options
    'unix_socketpair_tree': {},
    'unix_listen_accept': {},
    'unix_dgram_bound': {},
    'unix_bound_deleted': {},
    'unix_scm_rights': {},
    'unix_ext_dgram': {'dump_args': ['--ext-unix-sk'], 'restore_args': ['--ext-unix-sk']},
    # INET sockets: listening with options, datagrams, established TCP in repair mode
    'sk_inet_listen': {},
    'sk_inet_dgram': {},
    'sk_inet_raw': {},  # raw sockets: IPv4 and IPv6, filters, IP_HDRINCL
    'sk_inet_pktinfo': {},  # IP_PKTINFO, IPV6_RECVPKTINFO: recvmsg()'s packet info
    'sk_inet_recv_opts': {},  # IP_RECVERR, IP_RECVTTL, ...: lost by upstream criu
    'sk_inet_tcp_established': {'dump_args': ['--tcp-established'],
                                'restore_args': ['--tcp-established']},
    'sk_inet_tcp_closing': {'dump_args': ['--tcp-established'],
                            'restore_args': ['--tcp-established']},
    # a container: pid, UTS, IPC and time namespaces of its own (upstream criu dumps a pid
    # namespace whose init leads its session, as this one's does)
    'ns_container': {'launcher': True, 'pidns': True},
    # the init's orphans in other tasks' sessions, a child left in its parent's old session
    'ns_pid_sessions': {'launcher': True, 'pidns': True},
    'ns_pid_dead_leaders': {'bin': 'tree_dead_leaders', 'launcher': True, 'pidns': True,
                            'test_env': {'ZDTM_TREE_PIDNS': '1'}},
    'ns_uts_ipc': {},  # UTS and IPC namespaces: names, SysV objects, sysctls
    'cgroup_limits': {},  # cgroups v1 and v2: membership, threads, limits (name set below)
    'ns_net': {'launcher': True, 'pidns': True},  # links, addresses, routes, rules, sysctls
    'mnt_ns_tree': dict(MNT_NS_TREE),  # a mount namespace: --root, --external mnt[]
    'mnt_ns_shared_root': dict(MNT_NS_TREE, bin='mnt_ns_tree',  # and its mounts shared
                               test_env={'ZDTM_MNT_SHARED_ROOT': '1'}),
    'mnt_ns_overlay_root': dict(MNT_NS_TREE, bin='mnt_ns_tree',  # an overlay root
                                overlay_root=True, test_env={'ZDTM_MNT_OVERLAY_ROOT': '1'}),
    'mnt_ns_pivot': dict(MNT_NS_TREE),  # a child's namespace pivoted into a tmpfs, no /proc
    # binfmt_misc of the host's instance, its handlers left there
    'mnt_ns_binfmt': dict(MNT_NS_TREE, test_env={'ZDTM_MNT_BINFMT': '1'},
                          image_check=no_binfmt_image),
}
# Upstream criu refuses to dump a task whose session leader is outside its pid namespace
# (its sid reads 0 there), as it is when the suite itself runs in a container: the tests it
# dumps lead a session of their own.
for _bin, _desc in CROSS_TESTS.items():
    TESTS['cross_up2us_' + _bin] = dict(_desc, bin=_bin, mode='cross_dump_upstream', setsid=True)
    TESTS['cross_us2up_' + _bin] = dict(_desc, bin=_bin, mode='cross_restore_upstream')
# The shared-root and overlay-root variants of the mount test and the pid namespace one
# of the dead leaders' run their binaries.
for _way in ('up2us', 'us2up'):
    TESTS['cross_%s_mnt_ns_shared_root' % _way]['bin'] = 'mnt_ns_tree'
    TESTS['cross_%s_mnt_ns_overlay_root' % _way]['bin'] = 'mnt_ns_tree'
    TESTS['cross_%s_ns_pid_dead_leaders' % _way]['bin'] = 'tree_dead_leaders'
    TESTS['cross_%s_mnt_ns_binfmt' % _way]['bin'] = 'mnt_ns_tree'
    TESTS['cross_%s_mnt_ns_binfmt' % _way]['cleanup'] = lambda way=_way: remove_host_binfmt(
        'cross_%s_mnt_ns_binfmt' % way)
# Upstream's restore of an inotify watch by its path fails in a namespace without /proc
# ("Can't read link of fd"): the cross test restored by upstream has no watch.
TESTS['cross_us2up_mnt_ns_pivot']['test_env'] = {'ZDTM_MNT_PIVOT_BASIC': '1'}
# Upstream's dump restored lazily by ours: the images are the same as for a plain restore.
TESTS['cross_up2us_lazy_big_buffer'] = {'bin': 'lazy_big_buffer', 'mode': 'cross_dump_upstream',
                                        'setsid': True, 'lazy': True, 'lazy_faults': True}
# Shared anonymous memory held as a file is a "/dev/zero" memfd for both criu; upstream's
# restore of ours re-creates it apart from the VMAs we dump as shared anonymous memory.
TESTS['cross_up2us_mem_shared_anon_fd'] = {'bin': 'mem_shared_anon_fd',
                                           'mode': 'cross_dump_upstream', 'setsid': True}
# Upstream criu restores shared anonymous memory as a memfd: the tests accept that name
# after its restore (the contents, sharing, protection and range are still checked).
for _bin in ('mem_shared_anon', 'tree_shared_anon', 'mem_hugetlb_anon'):
    TESTS['cross_us2up_' + _bin]['test_env'] = {'ZDTM_SHMEM_NAME': '/memfd: (deleted)'}
# Each cross run of cgroup_limits in cgroups of its own, removed after the dump (restore
# makes them again).
for _way in ('up2us', 'us2up'):
    _name = 'zdtm_cg_' + _way
    TESTS['cross_%s_cgroup_limits' % _way].update(test_env={'ZDTM_CG_NAME': _name},
                                                  image_check=cgroup_img_check(_name))
# Upstream criu's restore gives each thread seccomp filters of its own: TSYNC fails after.
TESTS['cross_us2up_seccomp_filters_threads']['test_env'] = {'ZDTM_SECCOMP_UNSHARED': '1'}
# Upstream criu's restore leaves the deleted directories it re-created for a ghost.
TESTS['cross_us2up_file_deleted_nested']['test_env'] = {'ZDTM_GHOST_DIRS_LEFT': '1'}
# Upstream criu's restore of a lease being broken lets the break's signal reach the program.
TESTS['cross_us2up_file_leases']['test_env'] = {'ZDTM_LEASE_BREAK_SIGNAL': '1'}
# Upstream criu's restore drops IN_ONESHOT and IN_EXCL_UNLINK from inotify watch masks.
TESTS['cross_us2up_inotify_watches']['test_env'] = {'ZDTM_INOTIFY_FLAGS_LOST': '1'}
# ... and fails on a fanotify mark whose ignored mask was set with FAN_MARK_IGNORE.
TESTS['cross_us2up_fanotify_marks']['test_env'] = {'ZDTM_FANOTIFY_OLD_IGNORE': '1'}
# Upstream criu keeps no EFD_SEMAPHORE (dump or restore) and restores an eventfd counter
# through eventfd()'s unsigned int: the test keeps to that there.
for _dir in ('cross_up2us_', 'cross_us2up_'):
    TESTS[_dir + 'eventfd_counter_flags']['test_env'] = {'ZDTM_EVENTFD_UPSTREAM': '1'}
# Upstream criu refuses netlink groups past 32, at dump and at restore.
for _dir in ('cross_up2us_', 'cross_us2up_'):
    TESTS[_dir + 'netlink_sk_bound_groups']['test_env'] = {'ZDTM_NETLINK_UPSTREAM': '1'}
# Upstream criu refuses to dump a PIDFD_THREAD pidfd: the test makes none there.
TESTS['cross_up2us_pidfd_child_self_dead']['test_env'] = {'ZDTM_PIDFD_UPSTREAM': '1'}
# Upstream criu sets a file's owner when it opens the file, before the threads exist (one
# that a thread owns fails its restore), and O_ASYNC before the file has its fd number (the
# signal's si_fd is that of the opening).
TESTS['cross_us2up_file_fown_async']['test_env'] = {'ZDTM_FOWN_UPSTREAM': '1'}
# Upstream criu keeps a packet mode master's status byte with its queued bytes (at dump)
# and sets a pty's locked termios before its termios (at restore): the pty crossing it has
# neither. Its restore gives the controlling terminal back to a session's leader after the
# leader forked the others, which then have none (their tty_nr is 0).
for _way in ('up2us', 'us2up'):
    TESTS['cross_%s_pty_pair_termios' % _way]['test_env'] = {'ZDTM_PTY_PLAIN': '1'}
TESTS['cross_us2up_pty_session_ctty']['test_env'] = {'ZDTM_PTY_LEADER_CTTY_ONLY': '1'}
# Upstream criu refuses to dump /dev/tty held by another task than the pty's master
# ("ctty inheritance"), as a terminal multiplexer's children hold it.
TESTS['cross_up2us_pty_session_ctty']['test_env'] = {'ZDTM_PTY_NO_DEV_TTY': '1'}

# Upstream criu refuses to dump a queue that comes with ancillary data, as the credentials
# of a socket with SO_PASSCRED do, and its dump of a datagram queue ends at an empty
# datagram: the test leaves both out for its dump.
TESTS['cross_up2us_unix_socketpair_queues']['test_env'] = {'ZDTM_UNIX_UPSTREAM_DUMP': '1'}
# Upstream criu dumps and connects again only the sockets with a peer port: not a ping
# socket.
for _way in ('up2us', 'us2up'):
    TESTS['cross_%s_sk_inet_dgram' % _way]['test_env'] = {'ZDTM_INET_UPSTREAM': '1'}
# Upstream criu keeps neither IP_NODEFRAG nor IPV6_HDRINCL: the test sets none. Its
# restore binds no raw socket to its address again.
TESTS['cross_up2us_sk_inet_raw']['test_env'] = {'ZDTM_RAW_UPSTREAM': '1'}
TESTS['cross_us2up_sk_inet_raw']['test_env'] = {'ZDTM_RAW_UPSTREAM': '1',
                                                'ZDTM_RAW_UPSTREAM_RESTORE': '1'}
# Upstream criu neither dumps nor reads inetsk-ext.img: the options are lost, the sockets
# restored.
for _way in ('up2us', 'us2up'):
    TESTS['cross_%s_sk_inet_recv_opts' % _way]['test_env'] = {'ZDTM_RECV_OPTS_LOST': '1'}
# Upstream criu's restore fails on a FIN_WAIT1 connection whose queue was never sent.
TESTS['cross_us2up_sk_inet_tcp_closing']['test_env'] = {'ZDTM_TCP_UPSTREAM_RESTORE': '1'}
# Upstream criu restores both ends of an accepted connection as a socketpair: the server
# end comes back without the listening socket's name, which the test then accepts.
TESTS['cross_us2up_unix_listen_accept']['test_env'] = {'ZDTM_UNIX_UPSTREAM_RESTORE': '1'}
# Upstream criu leaves behind the directory it makes to bind a removed socket in again.
TESTS['cross_us2up_unix_bound_deleted']['test_env'] = {'ZDTM_UNIX_UPSTREAM_RESTORE': '1'}
# Upstream criu's restore fails on a socket whose only reference is in flight in its pair.
TESTS['cross_us2up_unix_scm_rights']['test_env'] = {'ZDTM_UNIX_UPSTREAM_RESTORE': '1'}
# Upstream criu restores no SysV message longer than 8192 bytes, no queue's qbytes, no
# segment's SHM_LOCK, and sets a pending kernel/shm_next_id before the segments (which take it).
TESTS['cross_us2up_ns_uts_ipc']['test_env'] = {'ZDTM_IPC_UPSTREAM': '1'}
TESTS['cross_up2us_ns_uts_ipc']['test_env'] = {'ZDTM_IPC_UPSTREAM_DUMP': '1'}
# ... and a segment removed while attached comes back not removed.
TESTS['cross_us2up_ns_container']['test_env'] = {'ZDTM_SHM_REMOVED_KEPT': '1'}
# Upstream criu's `ip route save` and `ip rule save` keep the main table's routes and the
# IPv4 rules only.
TESTS['cross_up2us_ns_net']['test_env'] = {'ZDTM_NET_UPSTREAM_DUMP': '1'}
# A veth link whose peer criu makes in its own namespace (--external veth[]), both ways.
# Upstream's restore brings a bridge up before its ports join it: the bridge gets an IPv6
# link-local address it did not have, so the test makes none (ZDTM_NET_UPSTREAM_RESTORE).
TESTS['cross_us2up_ns_net_veth'] = dict(TESTS['ns_net_veth'], mode='cross_restore_upstream',
                                        test_env={'ZDTM_NET_VETH': '1',
                                                  'ZDTM_NET_UPSTREAM_RESTORE': '1'})
TESTS['cross_up2us_ns_net_veth'] = dict(TESTS['ns_net_veth'], mode='cross_dump_upstream',
                                        setsid=True,
                                        test_env={'ZDTM_NET_VETH': '1',
                                                  'ZDTM_NET_UPSTREAM_DUMP': '1'})
# Nested net namespaces, their sockets in each (unix_sk_entry.ns_id), both ways.
# iptables of a tree's namespace, both ways: upstream criu saves and restores them with
# iptables-save/-restore (iptables-nft here), so the legacy ones are left out; its command
# is not replaced by `true` (UPSTREAM_ENV) for these, and it locks the namespace (its dump
# saves the lock's chain, which our restore leaves out; its restore removes ours).
TESTS['cross_us2up_ns_net_lock_iptables'] = dict(
    TESTS['ns_net_lock_iptables'], bin='ns_net_lock_iptables', mode='cross_restore_upstream',
    test_env={'ZDTM_IPT_NFT_ONLY': '1'}, upstream_env={'CR_IPTABLES': None},
    upstream_opts=['--shell-job'])
TESTS['cross_up2us_ns_net_lock_iptables'] = dict(
    TESTS['ns_net_lock_iptables'], bin='ns_net_lock_iptables', mode='cross_dump_upstream',
    setsid=True, test_env={'ZDTM_IPT_NFT_ONLY': '1'}, upstream_env={'CR_IPTABLES': None},
    upstream_opts=['--shell-job'], image_check=upstream_saved_lock)
# Connecting TCP sockets, both ways: the rule that drops their SYNs is in the tree
# namespace's iptables, which upstream criu must save and restore.
TESTS['cross_us2up_tcp_syn_sent'] = dict(TESTS['tcp_syn_sent'], bin='tcp_syn_sent',
                                         mode='cross_restore_upstream',
                                         restore_args=['--tcp-established'],
                                         upstream_env={'CR_IPTABLES': None})
TESTS['cross_up2us_tcp_syn_sent'] = dict(TESTS['tcp_syn_sent'], bin='tcp_syn_sent',
                                         mode='cross_dump_upstream', setsid=True,
                                         upstream_env={'CR_IPTABLES': None})
# Connections with both ends in the tree, in criu's own net namespace, both ways, upstream
# criu with its iptables lock (not skipped): it locks both ends of each as ours does, and
# each criu's restore removes the other's rules (the image_check after the dump, the test
# after the restore).
TESTS['cross_us2up_tcp_in_tree_locked'] = dict(TESTS['tcp_in_tree_locked'],
                                               bin='tcp_in_tree_locked',
                                               mode='cross_restore_upstream',
                                               restore_args=['--tcp-established'],
                                               upstream_opts=['--shell-job'])
TESTS['cross_up2us_tcp_in_tree_locked'] = dict(TESTS['tcp_in_tree_locked'],
                                               bin='tcp_in_tree_locked',
                                               mode='cross_dump_upstream', setsid=True,
                                               upstream_opts=['--shell-job'])
TESTS['cross_us2up_ns_net_nested'] = dict(TESTS['ns_net_nested'], bin='ns_net_nested',
                                          mode='cross_restore_upstream')
TESTS['cross_up2us_ns_net_nested'] = dict(TESTS['ns_net_nested'], bin='ns_net_nested',
                                          mode='cross_dump_upstream',
                                          setsid=True)
# tun/tap devices and their files, both ways (in the root's net namespace and a nested one;
# not in a user namespace of the tree's, which upstream criu does not dump or restore here).
for _name in ('ns_net_tun', 'ns_net_tun_nested'):
    TESTS['cross_us2up_' + _name] = dict(TESTS[_name], bin='ns_net_tun',
                                         mode='cross_restore_upstream',
                                         test_env=dict(TESTS[_name].get('test_env', {}),
                                                       ZDTM_TUN_UPSTREAM_RESTORE='1'))
    TESTS['cross_up2us_' + _name] = dict(TESTS[_name], bin='ns_net_tun',
                                         mode='cross_dump_upstream', setsid=True)
# A macvlan link on the runner's bridge (--external macvlan[]), both ways.
TESTS['cross_us2up_ns_net_macvlan'] = dict(TESTS['ns_net_macvlan'], mode='cross_restore_upstream',
                                           test_env={'ZDTM_NET_MACVLAN': '1',
                                                     'ZDTM_NET_UPSTREAM_RESTORE': '1'})
TESTS['cross_up2us_ns_net_macvlan'] = dict(TESTS['ns_net_macvlan'], mode='cross_dump_upstream',
                                           setsid=True,
                                           test_env={'ZDTM_NET_MACVLAN': '1',
                                                     'ZDTM_NET_UPSTREAM_DUMP': '1'})
# Upstream criu leaves a tree with an external unix socket running after its dump: there is
# no pid to restore into.
del TESTS['cross_up2us_unix_ext_dgram']

# Namespaces restore could not give back (ns_refused.c): the dump refuses them with one line.
for _case, _expect in (
        # a nested pid namespace below a root in criu's: restore makes nested ones below a
        # namespace of the root's own only (ns_pid_nested)
        ('nested_pid', 'nested pid namespaces need the root in one of its own'),
                       ('nested_uts', 'nested uts namespaces are not supported'),
                       ('nested_mnt', 'nested mnt namespaces need the root in one of its own'),
                       ('pid_for_children', 'has unshared a pid namespace that its children'),
                       ('time_for_children', 'has unshared a time namespace that its children'),
                       ('net_veth_in', 'is a veth: only the loopback, bridges, tun/tap links, and veth and '
                        'macvlan links whose'),
                       ('net_macvlan_in', 'is a macvlan: only the loopback, bridges, tun/tap links, and '
                        'veth and macvlan links'),
                       # a mount namespace: its first mount of a kind not restored
                       ('mnt', 'is neither external (--external mnt[])'),
                       # a user namespace is dumped, but not one without maps
                       ('user', "has no mapping in the tree's user namespace")):
    TESTS['ns_refused_' + _case] = {'bin': 'ns_refused', 'mode': 'dump_fails',
                                    'test_env': {'ZDTM_NS_CASE': _case}, 'expect': _expect}
# A cgroup namespace's root is written in cgroup.img only: not without it.
TESTS['ns_refused_cgroup'] = {'bin': 'ns_refused', 'mode': 'dump_fails',
                              'dump_args': ['--manage-cgroups=ignore'],
                              'test_env': {'ZDTM_NS_CASE': 'cgroup'},
                              'expect': '--manage-cgroups=ignore does not write'}
# A root with a namespace of its own whose image is missing (the corrupted ids name one the
# dump never wrote).
for _kind in ('mnt', 'user'):
    TESTS['restore_fail_ns_' + _kind] = {
        'bin': 'mem_anon_private', 'mode': 'restore_fails',
        'corrupt': lambda img_dir, pid, field=_kind + '_ns_id': root_gets_own_ns(img_dir, pid,
                                                                                 field),
        'expect': {'mnt': 'mountpoints-999.img is missing',
                   'user': 'cannot open image userns-999.img'}[_kind]}
# ... or of a cgroup namespace whose root cgroup.img does not name.
TESTS['restore_fail_ns_cgroup'] = {
    'bin': 'mem_anon_private', 'mode': 'restore_fails',
    'corrupt': lambda img_dir, pid: root_gets_own_ns(img_dir, pid, 'cgroup_ns_id'),
    'expect': 'cgroup.img names no root for it'}

# GPU (modes gpu, gpu_restore_fails, gpu_production_plugin): test/zdtm/gpu/gpu_bos (or
# 'bin') on its own KFD EMULATOR daemon, dumped and restored with the plugin's test build.
# 'path': how the BO contents must have been restored (parallel: criu's worker; serial: the
# tasks); 'layout': gpu_bos's; 'child': gpu_bos forks a child without GPU state; 'procs': a
# tree of that many GPU processes; 'parallel_env': AMDGPU_PARALLEL_RESTORE for criu (None:
# unset; default: '1' for the parallel path, '0' for serial); 'restore_gpus': restore on a
# second emulator with these GPUs (gpu ids remapped, or another model).
TESTS.update({
    'amdgpu_two_gpus_mapped_parallel': {'mode': 'gpu', 'path': 'parallel',
                                        'layout': 'two_gpus'},
    'amdgpu_two_gpus_mapped_serial': {'mode': 'gpu', 'path': 'serial', 'layout': 'two_gpus'},
    'amdgpu_300_bos_parallel': {'mode': 'gpu', 'path': 'parallel', 'layout': 'many'},
    'amdgpu_300_bos_serial': {'mode': 'gpu', 'path': 'serial', 'layout': 'many'},
    # the mapped 1 GiB BO's pages are the plugin's: none may land in the page images
    'amdgpu_6gib_sparse_parallel': {'mode': 'gpu', 'path': 'parallel', 'layout': 'big',
                                    'max_pages_bytes': 16 << 20},
    # restore must fail naming the cause, leave no process, nothing in the emulator, and
    # the images unchanged
    'amdgpu_fail_truncated_pages_parallel': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                             'corrupt': truncate_amdgpu_pages,
                                             'names': 'the image is truncated'},
    'amdgpu_fail_truncated_pages_serial': {'mode': 'gpu_restore_fails', 'path': 'serial',
                                           'corrupt': truncate_amdgpu_pages,
                                           'names': 'the image is truncated'},
    'amdgpu_fail_worker_error': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                 'fault': 'worker-error',
                                 'names': 'RESUME_DEVICES_LATE failed: -5'},
    'amdgpu_fail_task_dies_mid_command': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                          'fault': 'task-dies-mid-command',
                                          'names': 'closed the connection mid-command'},
    # KFD refuses private data of another version: RESTORE fails, the task says so
    'amdgpu_fail_priv_data_version': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                      'corrupt': amdgpu_priv_data_version,
                                      'names': 'KFD CRIU op RESTORE failed: Invalid argument'},
    # no GPU of the dumped model on the restore machine: refused before anything is forked
    'amdgpu_fail_other_gpu_model': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                    'restore_gpus': ['0x3c1d:0x7410', '0x4d2e:0x7410'],
                                    'names': 'no unused GPU of the same model here'},
    # a root with BOs and a child without: criu's worker serves the tree (upstream would
    # fall back to serial); the child too is restored and passes its own memory check
    'amdgpu_tree_child_parallel': {'mode': 'gpu', 'path': 'parallel', 'layout': 'two_gpus',
                                   'child': True, 'parallel_env': None},
    'amdgpu_tree_child_serial': {'mode': 'gpu', 'path': 'serial', 'layout': 'two_gpus',
                                 'child': True},
    # a launcher and three workers, each with its own BOs on both GPUs
    'amdgpu_tree4_parallel': {'mode': 'gpu', 'path': 'parallel', 'layout': 'two_gpus',
                              'procs': 4},
    'amdgpu_tree4_serial': {'mode': 'gpu', 'path': 'serial', 'layout': 'two_gpus', 'procs': 4},
    # one of the four dies mid-restore: the whole restore fails, nothing is left behind,
    # and a clean restore of the same images then works
    'amdgpu_tree4_one_dies_parallel': {'mode': 'gpu_restore_fails', 'path': 'parallel',
                                       'layout': 'two_gpus', 'procs': 4,
                                       'fault': 'task-dies-mid-command:CHILD',
                                       'names': 'closed the connection mid-command'},
    # restored on GPUs with other ids: handles, doorbell offsets, queues, events and SVM
    # ranges keep the process's ids, the device buckets and mappings use the new ones
    'amdgpu_gpu_id_remap': {'mode': 'gpu', 'path': 'parallel', 'layout': 'two_gpus',
                            'restore_gpus': ['0x3c1d', '0x4d2e']},
    # a process computing on its queues while dumped; results checked after restore
    'amdgpu_queues_running_parallel': {'mode': 'gpu', 'path': 'parallel', 'bin': 'gpu_queues'},
    'amdgpu_queues_running_serial': {'mode': 'gpu', 'path': 'serial', 'bin': 'gpu_queues'},
    'amdgpu_queues_gpu_id_remap': {'mode': 'gpu', 'path': 'parallel', 'bin': 'gpu_queues',
                                   'restore_gpus': ['0x3c1d', '0x4d2e']},
    # what make install ships: no emulator, no test hooks; emulator images are refused
    'amdgpu_production_plugin': {'mode': 'gpu_production_plugin', 'path': 'parallel',
                                 'names': 'this build of the plugin has no emulator backend'},
})


class TestFailure(Exception):
    """A test failed; log names the criu log whose tail explains it."""

    def __init__(self, reason, log=None):
        super().__init__(reason)
        self.log = log


def wait_criu(proc, what, log):
    """The exit code of a criu started with Popen; killed, and the test failed, when it
    does not finish in CRIU_TIMEOUT."""
    try:
        return proc.wait(timeout=CRIU_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise TestFailure('%s did not finish in %d s' % (what, CRIU_TIMEOUT), log)


def free_tcp_port():
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as sk:
        sk.bind(('127.0.0.1', 0))
        return sk.getsockname()[1]


def reap_orphans():
    """Reap children reparented to us (we are a subreaper); no Popen is alive here."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def cpu_flags():
    with open('/proc/cpuinfo') as cpuinfo:
        for line in cpuinfo:
            if line.startswith('flags'):
                return set(line.split(':', 1)[1].split())
    return set()


def kernel_names_anon_vmas():
    """Whether prctl(PR_SET_VMA_ANON_NAME) names an anonymous page (-EINVAL without)."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.mmap(-1, mmap.PAGESIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
    named = libc.prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, ctypes.c_void_p(addr),
                       ctypes.c_size_t(mmap.PAGESIZE), b'zdtm-probe') == 0
    page.close()
    return named


def lsm_apparmor():
    try:
        with open('/sys/module/apparmor/parameters/enabled') as enabled:
            return enabled.read().startswith('Y') and own_lsm_label() != ''
    except OSError:
        return False


def lsm_selinux():
    return os.path.exists('/sys/fs/selinux/enforce') and own_lsm_label() != ''


KERNEL_PROBES = {'CONFIG_ANON_VMA_NAME': kernel_names_anon_vmas,
                 'LSM_APPARMOR': lsm_apparmor, 'NO_LSM_APPARMOR': lambda: not lsm_apparmor(),
                 'LSM_SELINUX': lsm_selinux, 'NO_LSM_SELINUX': lambda: not lsm_selinux()}


def exe_of(pid):
    """The program /proc/PID/exe names, or None (gone, or not ours to read)."""
    try:
        return os.readlink('/proc/%s/exe' % pid)
    except OSError:
        return None


def pid_alive(pid):
    try:
        with open('/proc/%d/status' % pid) as status:
            state = [l for l in status if l.startswith('State:')][0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return 'Z' not in state.split()[1]


def task_fds(pid):
    """{fd: what it links to} of a process."""
    path = '/proc/%d/fd' % pid
    return {fd: os.readlink(os.path.join(path, fd)) for fd in os.listdir(path)}


def task_maps(pid):
    """The lines of /proc/PID/maps."""
    with open('/proc/%d/maps' % pid) as maps:
        return maps.read().splitlines()


def proc_status(pid, field):
    with open('/proc/%d/status' % pid) as status:
        for line in status:
            if line.startswith(field + ':'):
                return line.split(':', 1)[1].strip()
    return ''


def free_pid():
    """A PID no process has (high, so nothing is likely to take it meanwhile)."""
    with open('/proc/sys/kernel/pid_max') as pid_max_file:
        pid = int(pid_max_file.read()) - 7
    while os.path.exists('/proc/%d' % pid):
        pid -= 1
    return pid


def tree_pids(root):
    """{pid: depth} of root and its descendants (through every thread's children)."""
    tree, todo = {}, [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        tree[pid] = depth
        try:
            tids = os.listdir('/proc/%d/task' % pid)
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open('/proc/%d/task/%s/children' % (pid, tid)) as children:
                    todo += [(int(c), depth + 1) for c in children.read().split()]
            except FileNotFoundError:
                pass
    return tree


def ns_pid(pid):
    """pid's pid in its own pid namespace (the last of "NSpid:")."""
    return int(proc_status(pid, 'NSpid').split()[-1])


def ns_tree(tree):
    """{pid in the tree's pid namespace: depth} of a tree_pids() tree."""
    return {ns_pid(pid): depth for pid, depth in tree.items()}


def tree_tids(tree):
    """{pid: [tid]} of every process in tree, taken now; zombies (already so) left out."""
    def zombie(pid):
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().rsplit(')', 1)[1].split()[0] == 'Z'
    return {pid: sorted(int(t) for t in os.listdir('/proc/%d/task' % pid)) for pid in tree
            if not zombie(pid)}


def images_checksum(img_dir):
    digest = hashlib.sha256()
    for name in sorted(os.listdir(img_dir)):
        path = os.path.join(img_dir, name)
        if not name.endswith('.img') or not os.path.isfile(path):
            continue
        digest.update(name.encode() + b'\0')
        with open(path, 'rb') as img:
            digest.update(img.read())
    return digest.hexdigest()


# --- the crit check -----------------------------------------------------------------------
# After every successful dump each image is decoded the way `crit decode -i IMG -o OUT.json`
# does, and OUT.json encoded back the way `crit encode -i OUT.json` does; the bytes must be
# the image's. Debian's crit is Python: rather than one crit process per image (~100 ms of
# start-up each), one helper process of crit's own interpreter imports the same library
# (pycriu, /usr/lib/python3/dist-packages) once per run and makes the same calls crit makes.
# Fields that Debian's crit (CRIU 3.17) does not know are left out of its JSON, so they
# cannot come back: they are cut out of the image's bytes before the comparison (every
# other byte must match) and listed in out/NAME/crit/unknown-fields.txt. An entry with a
# value crit does not know in a required enum field (fd_types PIDFD, newer than 3.17) is
# one its encode refuses: that entry is left out whole, on both sides, and listed there too.
# Not images: raw page contents, logs, and what plugins write in formats of their own
# (plugins/amdgpu: amdgpu-kfd-*, amdgpu-pages-*; test/plugins' testdev: testdev-*, and
# test_unixsk: unixsk-*), and
# this criu's own images for state CRIU's format has no field for (mm-ext-*, ...): CRIU's crit
# does not know them, ours must decode them and encode them back (own_image_errors()).
OWN_IMAGES = ('mm-ext-', 'ipcns-mq-', 'pidns-nested', 'inetsk-ext')
CRIT_ENTRY_LEFT_OUT = ' (required: the entry is left out)'
# A network namespace's addresses, routes, rules (`ip ... save`), iptables (iptables-save)
# and nftables (nft list ruleset) are raw images too, as CRIU keeps them.
NET_RAW_IMAGES = ('ifaddr-', 'route-', 'route6-', 'rule-', 'iptables-', 'ip6tables-',
                  'nftables-')
# Debian's crit knows binfmt-misc.img's magic but has no handler for it (CRIU's own images
# alike): ours decodes it (own_crit_entries()).
CRIT_NO_HANDLER = ('binfmt-misc',)
CRIT_NOT_IMAGES = ('pages-', 'amdgpu-', 'testdev-', 'unixsk-', 'tmpfs-dev-') + NET_RAW_IMAGES + \
    OWN_IMAGES + CRIT_NO_HANDLER


def own_crit(*args):
    """Run our crit; its stdout, or TestFailure with its error line."""
    proc = subprocess.run([OWN_CRIT] + list(args), capture_output=True)
    if proc.returncode != 0:
        raise TestFailure('crit %s: %s' % (' '.join(args), proc.stderr.decode(
            errors='replace').strip()))
    return proc.stdout


def own_crit_entries(path):
    return json.loads(own_crit('decode', '-i', path))['entries']


def own_image_errors(img_dir):
    """This criu's own images: our crit decodes each and encodes it back to its bytes."""
    errors = []
    for name in sorted(os.listdir(img_dir)):
        if not name.startswith(OWN_IMAGES):
            continue
        path = os.path.join(img_dir, name)
        try:
            decoded = own_crit('decode', '-i', path)
            proc = subprocess.run([OWN_CRIT, 'encode'], input=decoded, capture_output=True)
            with open(path, 'rb') as img:
                if proc.returncode != 0 or proc.stdout != img.read():
                    errors.append('%s: crit encode does not give back its bytes' % name)
        except TestFailure as err:
            errors.append('%s: %s' % (name, err.reason))
    return errors


def crit_checks(name):
    return not name.startswith(CRIT_NOT_IMAGES) and not name.endswith('.log')


class SetupError(Exception):
    """The machine lacks what the suite needs (scripts/install-deps.sh installs it)."""


class CritHelper:
    """The runner's side of the helper: one process for the whole run."""

    def __init__(self):
        self.proc = None
        self.err = None

    def start(self):
        if self.proc is not None:
            return
        if not os.path.isfile(DEBIAN_CRIT):
            raise SetupError('%s is missing (Debian package criu; scripts/install-deps.sh '
                             'installs it)' % DEBIAN_CRIT)
        with open(DEBIAN_CRIT, 'rb') as crit:
            first = crit.readline().decode(errors='replace')
        interpreter = first[2:].split() if first.startswith('#!') else ['/usr/bin/python3']
        os.makedirs(OUT_DIR, exist_ok=True)
        self.err = open(os.path.join(OUT_DIR, 'crit-helper.err'), 'w+b')
        self.proc = subprocess.Popen(interpreter + [os.path.abspath(__file__), '--crit-helper'],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, close_fds=True)
        reply = self.reply()
        if reply is None or 'setup' in reply:
            why = reply['setup'] if reply else 'the helper died: ' + self.err_tail()
            self.close()
            raise SetupError('%s (%s) cannot decode images: %s; scripts/install-deps.sh '
                             'installs Debian\'s criu package' % (DEBIAN_CRIT,
                                                                ' '.join(interpreter), why))

    def reply(self):
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def err_tail(self):
        self.err.seek(0)
        lines = self.err.read().decode(errors='replace').strip().splitlines()
        return lines[-1] if lines else 'no error output'

    def check(self, img_dir, json_dir):
        """(errors, unknown fields) of img_dir's images; their JSON goes to json_dir."""
        self.start()
        try:
            self.proc.stdin.write((json.dumps({'img': img_dir, 'out': json_dir}) +
                                   '\n').encode())
            self.proc.stdin.flush()
            reply = self.reply()
        except BrokenPipeError:
            reply = None
        if reply is None:
            why = self.err_tail()
            self.close()
            raise TestFailure('the crit helper died: ' + why)
        return reply['errors'], reply['unknown']

    def close(self):
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None
        self.err.close()
        self.err = None


CRIT = CritHelper()


def _varint(buf, pos):
    value = shift = 0
    while True:
        byte = buf[pos]  # IndexError: cut short
        pos += 1
        value |= (byte & 0x7f) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError('varint too long')


def _encode_varint(value):
    out = bytearray()
    while value > 0x7f:
        out.append(0x80 | (value & 0x7f))
        value >>= 7
    out.append(value)
    return bytes(out)


def _strip_unknown(buf, desc, path, dropped):
    """buf (a message of type desc) without the fields desc does not know, every other
    byte as it was; what went is added to dropped."""
    from google.protobuf.descriptor import FieldDescriptor
    out, pos = bytearray(), 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        key_end = pos
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(buf, pos)
            body, pos = pos, pos + length
        else:
            raise ValueError('wire type %d' % wire)
        if pos > len(buf):
            raise ValueError('cut short')
        field = desc.fields_by_number.get(number)
        if field is None:
            dropped.append('%s: field %d' % (path, number))
            continue
        # proto2 keeps an enum value it does not know among the unknown fields
        if (wire == 0 and field.type == FieldDescriptor.TYPE_ENUM and
                value not in field.enum_type.values_by_number):
            required = field.label == FieldDescriptor.LABEL_REQUIRED
            dropped.append('%s.%s: enum value %d%s' % (path, field.name, value,
                                                       CRIT_ENTRY_LEFT_OUT if required else ''))
            continue
        if wire == 2 and field.type == FieldDescriptor.TYPE_MESSAGE:
            inner = _strip_unknown(buf[body:pos], field.message_type,
                                   path + '.' + field.name, dropped)
            if inner != buf[body:pos]:
                out += buf[start:key_end] + _encode_varint(len(inner)) + inner
                continue
        out += buf[start:pos]
    return bytes(out)


class _ImageReader:
    """The image as crit reads it, remembering each read: [start, end, message type]
    (the type: set when the read was an entry's payload)."""

    def __init__(self, data):
        self.data, self.pos, self.reads = data, 0, []

    def read(self, size=-1):
        end = len(self.data) if size is None or size < 0 else min(len(self.data),
                                                                   self.pos + size)
        self.reads.append([self.pos, end, None])
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def seek(self, offset, whence=os.SEEK_SET):
        """crit skips padding (after SysV IPC objects' data) with seek(): the bytes it
        skips forward count as read."""
        start = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: len(self.data)}[whence]
        target = min(max(start + offset, 0), len(self.data))
        if target >= self.pos:
            self.read(target - self.pos)
        else:
            self.pos = target
        return self.pos

    def known_bytes(self, dropped, left_out):
        """The image without the fields crit does not know (with their sizes fixed), and
        without the entries it cannot encode (their indexes go to left_out)."""
        out = bytearray()
        entry = -1
        for i, (start, end, desc) in enumerate(self.reads):
            chunk = self.data[start:end]
            before = self.reads[i - 1] if i else None
            entry += desc is not None
            if (desc is not None and before and before[1] == start and
                    before[1] - before[0] == 4 and
                    int.from_bytes(self.data[before[0]:start], 'little') == end - start):
                lost = []
                try:
                    known = _strip_unknown(chunk, desc, desc.name, lost)
                except (ValueError, IndexError):
                    known = chunk  # not protobuf: crit's own error says more
                else:
                    dropped += lost
                if any(d.endswith(CRIT_ENTRY_LEFT_OUT) for d in lost):
                    del out[-4:]
                    left_out.append(entry)
                    continue
                if known != chunk:
                    out[-4:] = len(known).to_bytes(4, 'little')
                    chunk = known
            out += chunk
        return bytes(out) + self.data[self.pos:]


def crit_helper():
    """The helper (run by crit's interpreter): checks the image directories the runner
    names, one JSON line in, one JSON line out."""
    import io
    dist = '/usr/lib/python3/dist-packages'
    if dist not in sys.path:
        sys.path.append(dist)
    try:
        import pycriu
        from pycriu.images import pb2dict
    except Exception as exc:  # e.g. no pycriu, no protobuf
        print(json.dumps({'setup': traceback.format_exception_only(type(exc), exc)[-1]
                          .strip()}), flush=True)
        return 1
    # crit calls pb2dict on each entry's payload right after reading it: mark that read
    reading = {'reader': None, 'depth': 0}
    plain_pb2dict = pb2dict.pb2dict

    def marking_pb2dict(msg, *args, **kwargs):
        if reading['depth'] == 0 and reading['reader'] and reading['reader'].reads:
            reading['reader'].reads[-1][2] = msg.DESCRIPTOR
        reading['depth'] += 1
        try:
            return plain_pb2dict(msg, *args, **kwargs)
        finally:
            reading['depth'] -= 1

    pb2dict.pb2dict = marking_pb2dict

    def error_line(exc):
        if isinstance(exc, pycriu.images.MagicException):
            return 'Unknown magic %#x.' % exc.magic  # crit decode's own message
        return traceback.format_exception_only(type(exc), exc)[-1].strip()

    def check(img_dir, json_dir):
        errors, unknown = [], []
        os.makedirs(json_dir, exist_ok=True)
        for name in sorted(os.listdir(img_dir)):
            path = os.path.join(img_dir, name)
            if not crit_checks(name) or not os.path.isfile(path):
                continue
            with open(path, 'rb') as img:
                reader = _ImageReader(img.read())
            json_path = os.path.join(json_dir, name + '.json')
            reading['reader'] = reader
            try:
                image = pycriu.images.load(reader)  # crit decode -i IMG
            except Exception as exc:
                errors.append('%s: crit decode: %s' % (name, error_line(exc)))
                continue
            finally:
                reading['reader'] = None
            text = json.dumps(image)  # -o OUT.json
            with open(json_path, 'w') as out:
                out.write(text)
            dropped, left_out = [], []
            expected = reader.known_bytes(dropped, left_out)
            encodable = json.loads(text)
            for entry in reversed(left_out):
                del encodable['entries'][entry]
            # CRIU 3.17's crit gives a SysV segment's contents and a BPF map's elements to
            # base64.decodebytes() as the JSON's text, which Python 3 refuses: its encode of
            # any ipcns-shm or bpfmap-data JSON fails. The contents are handed to it as
            # bytes, as its decode wrote them.
            if encodable.get('magic') in ('IPCNS_SHM', 'BPFMAP_DATA'):
                for entry in encodable['entries']:
                    entry['extra'] = entry['extra'].encode()
            encoded = io.BytesIO()
            try:
                pycriu.images.dump(encodable, encoded)  # crit encode -i OUT.json
            except Exception as exc:
                errors.append('%s: crit encode of %s: %s' % (name, json_path,
                                                             error_line(exc)))
                continue
            got = encoded.getvalue()
            if got != expected:
                at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),
                          min(len(expected), len(got)))
                errors.append('%s: crit encode of crit decode\'s JSON gives other bytes '
                              '(%d, the image %d%s; first difference at byte %d)'
                              % (name, len(got), len(expected),
                                 ' without fields crit does not know' if dropped else '',
                                 at))
            unknown += ['%s: %s' % (name, d) for d in sorted(set(dropped))]
        for what, lines in (('errors.txt', errors), ('unknown-fields.txt', unknown)):
            path = os.path.join(json_dir, what)
            if lines:
                with open(path, 'w') as out:
                    out.write('\n'.join(lines) + '\n')
            elif os.path.exists(path):
                os.unlink(path)
        return errors, unknown

    print(json.dumps({'ready': True}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        errors, unknown = check(ask['img'], ask['out'])
        print(json.dumps({'errors': errors, 'unknown': unknown}), flush=True)
    return 0


class TestRun:
    """One test: its directories, its process, and the criu commands run on it."""

    def __init__(self, name, desc, use_criu):
        self.name = name
        self.desc = desc
        self.use_criu = use_criu
        self.out = os.path.join(OUT_DIR, name)
        self.img = os.path.join(self.out, 'img')
        self.work = os.path.join(self.out, 'work')
        self.pidfile = os.path.join(self.out, 'test.pid')
        self.output = os.path.join(self.out, 'output')
        self.pid = None  # the test process, while it may exist
        self.is_child = False  # whether self.pid is ours to waitpid()
        self.pty_master = None
        self.pty_slave_path = None
        self.tty_output = b''
        self.criu_env = {}  # extra environment of the criu commands
        self.criu_pass_fds = ()  # descriptors the criu commands inherit
        self.stdin_pipe = None  # mode inherit_fd: (read, write) ends, the test's stdin
        self.trace = os.path.join(self.out, 'trace')  # written by the test_trace plugin
        self.tree = {}  # {pid: depth} of the test's process tree at dump time
        self.ns_tree = {}  # the same by pids in the tree's own pid namespace ('pidns')
        self.test_env = dict(desc.get('test_env', {}))  # extra environment of the test program
        if desc.get('mode') in ('pre_dump', 'page_server_chain'):
            self.test_env['ZDTM_STEP_FILE'] = os.path.join(self.out, 'step')
        # 'join_helper': the test starts a helper outside its tree, whose pid it writes
        # here; {helper} in criu's arguments is that pid; the helper is killed at the end
        self.helper_file = os.path.join(self.out, 'helper.pid')
        if desc.get('join_helper'):
            self.test_env['ZDTM_JOIN_HELPER_FILE'] = self.helper_file
        self.emu = None  # the KFD emulator daemon of a GPU test (Popen)
        self.emu_sock = None  # its socket
        self.crit_failure = None  # why a dump's images failed the crit check
        self.lazy_daemon = None  # criu lazy-pages of a lazy restore (Popen)
        self.lazy_daemon_args = []  # remote_lazy: where the daemon takes the pages from
        self.lazy_source = None  # remote_lazy: criu dump --lazy-pages serving them (Popen)
        self.page_server = None  # criu page-server of a page_server test (Popen)
        self.overlay_root = None  # the overlay an overlay_root test mounted for its restore

    # --- the test process -------------------------------------------------
    def start(self):
        self.umount_devpts()
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.work)
        os.makedirs(self.img)
        if self.desc.get('devpts'):
            self.mount_devpts()
        if self.desc.get('mode', '').startswith('plugin_'):
            prog = os.path.join(PLUGINS_DIR, 'plugin_dev')
        elif self.desc.get('mode', '').startswith('gpu'):
            self.start_emulator()
            prog = os.path.join(BIN_DIR, self.desc.get('bin', 'gpu_bos'))
        else:
            prog = os.path.join(BIN_DIR, self.desc.get('bin', self.name))
        if self.desc.get('mode') == 'tty' or self.desc.get('tty'):
            self.pty_master, slave_fd = pty.openpty()
            self.pty_slave_path = os.ttyname(slave_fd)
            os.close(slave_fd)
        if self.desc.get('mode') == 'inherit_fd':
            self.stdin_pipe = os.pipe()
        pid = os.fork()
        if pid == 0:
            self.exec_test(prog)
        self.pid, self.is_child = pid, True

    def devpts_path(self):
        return os.path.join(self.out, 'devpts')

    def mount_devpts(self):
        path = self.devpts_path()
        os.makedirs(path)
        proc = subprocess.run(['mount', '-t', 'devpts', '-o', 'newinstance,ptmxmode=0666',
                               'devpts', path], capture_output=True)
        if proc.returncode != 0:
            raise TestFailure('cannot mount a devpts instance: %s' % proc.stderr.decode().strip())
        self.test_env['ZDTM_DEVPTS'] = path

    def umount_devpts(self):
        """Detached: the test's ptys may outlive it for a moment."""
        if os.path.ismount(self.devpts_path()):
            subprocess.run(['umount', '-l', self.devpts_path()], capture_output=True)

    def exec_test(self, prog):
        """In the forked child: stdio, cwd, then exec; never returns."""
        try:
            os.chdir(self.work)
            if self.pty_slave_path:
                stdin = stdout = os.open(self.pty_slave_path, os.O_RDWR | os.O_NOCTTY)
            else:
                stdin = (self.stdin_pipe[0] if self.stdin_pipe else
                         os.open('/dev/null', os.O_RDONLY))
                stdout = os.open(self.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(stdin, 0)
            os.dup2(stdout, 1)
            os.dup2(stdout, 2)
            os.closerange(3, 65536)
            if self.desc.get('setsid'):
                os.setsid()
            # plugin_dev: a failed dump never restores it, so no flag is to come
            env = dict(os.environ)
            if self.desc.get('mode') == 'plugin_dump_fails':
                env['TESTDEV_EXPECT_FLAG'] = '0'
            env.update(self.test_env)
            os.execve(prog, [prog, self.pidfile], env)
        except OSError as err:
            os.write(2, ('exec %s: %s\n' % (prog, err)).encode())
        os._exit(127)

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(self.pidfile):
            if self.is_child and os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                self.pid = None
                # a launcher exits once it published its root's pid
                if self.desc.get('launcher') and os.path.exists(self.pidfile):
                    break
                raise TestFailure('exited before it was ready: ' + self.verdict_text())
            if time.monotonic() > deadline:
                raise TestFailure('not ready after %d s' % READY_TIMEOUT)
            time.sleep(0.01)
        if self.desc.get('launcher'):
            self.adopt_launched_root()

    def adopt_launched_root(self):
        """The launcher published its root's pid and exits: the root is ours (the subreaper)."""
        with open(self.pidfile) as pidfile:
            root = int(pidfile.read().split()[0])
        if self.pid is not None:
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
            if status:
                raise TestFailure('the launcher exited with wait status %#x: %s'
                                  % (status, self.verdict_text()))
        self.pid, self.is_child = root, True

    def wait_exit(self, timeout=EXIT_TIMEOUT):
        """Wait for our child self.pid to exit; returns its wait status."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.pid = None
                return status
            if time.monotonic() > deadline:
                raise TestFailure('still running %d s after SIGTERM' % timeout)
            self.drain_pty()
            time.sleep(0.01)

    def drain_pty(self):
        """Keep the pty from filling up (the test blocks on a full terminal)."""
        if self.pty_master is None:
            return
        os.set_blocking(self.pty_master, False)
        try:
            while True:
                chunk = os.read(self.pty_master, 4096)
                if not chunk:
                    break
                self.tty_output += chunk
        except (BlockingIOError, OSError):
            pass

    def verdict_text(self):
        self.drain_pty()
        text = self.tty_output.decode(errors='replace').replace('\r', '')
        if os.path.exists(self.output):
            with open(self.output, errors='replace') as output:
                text += output.read()
        return text.strip()

    def finish_and_judge(self):
        """SIGTERM the (restored) test, wait for it, and require its PASS."""
        os.kill(self.pid, signal.SIGTERM)
        status = self.wait_exit()
        text = self.verdict_text()
        last = text.splitlines()[-1] if text else ''
        if last != 'PASS' or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            how = ('exit %d' % os.WEXITSTATUS(status) if os.WIFEXITED(status)
                   else 'killed by signal %d' % os.WTERMSIG(status))
            raise TestFailure('%s (%s)' % (last or 'no verdict', how), 'restore.log')

    def truncate_output(self):
        """A second run of the same images expects the output file as it was dumped."""
        with open(self.output, 'r+b') as output:
            output.truncate(0)

    def kill_leftovers(self):
        if self.overlay_root:
            subprocess.run(['umount', '-l', self.overlay_root])
            self.overlay_root = None
        if self.lazy_source:
            self.lazy_source.kill()
            self.lazy_source.wait()
            self.lazy_source = None
        if self.lazy_daemon:
            self.lazy_daemon.kill()
            self.lazy_daemon.wait()
            self.lazy_daemon = None
        if self.page_server:
            self.page_server.kill()
            self.page_server.wait()
            self.page_server = None
        killed = []
        if self.desc.get('join_helper') and os.path.exists(self.helper_file):
            with open(self.helper_file) as f:
                helper = int(f.read().strip() or 0)
            os.unlink(self.helper_file)
            if helper > 0 and pid_alive(helper):
                os.kill(helper, signal.SIGKILL)
                killed.append(helper)
        for pid in self.tree:
            if pid != self.pid and pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.is_child:
                try:
                    os.waitpid(self.pid, 0)
                except ChildProcessError:
                    pass
            self.pid = None
        # the killed ones come to us (the subreaper) once their parents are gone: reap them
        deadline = time.monotonic() + EXIT_TIMEOUT
        while (any(os.path.exists('/proc/%d' % pid) for pid in killed) and
               time.monotonic() < deadline):
            reap_orphans()
            time.sleep(0.01)
        if self.pty_master is not None:
            os.close(self.pty_master)
            self.pty_master = None
        self.stop_emulator()
        for fd in self.stdin_pipe or ():
            os.close(fd)
        self.stdin_pipe = None
        self.umount_devpts()

    # --- the KFD emulator (GPU tests) ---------------------------------------
    def start_emulator(self, gpus=()):
        """A daemon of our own: its socket and a fresh topology in the test's directory."""
        emu_dir = os.path.join(self.out, 'emu')
        os.makedirs(emu_dir, exist_ok=True)
        sock, pidfile = os.path.join(emu_dir, 'sock'), os.path.join(emu_dir, 'pid')
        topo = os.path.join(emu_dir, 'topology-%d' % len(os.listdir(emu_dir)))
        if os.path.exists(pidfile):
            os.unlink(pidfile)
        gpu_args = [a for g in gpus for a in ('-g', g)]
        self.emu = subprocess.Popen([KFD_EMU, '-s', sock, '-t', topo, '-p', pidfile, '-v', '3',
                                     '-l', os.path.join(emu_dir, 'log')] + gpu_args,
                                    stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(pidfile):
            if self.emu.poll() is not None or time.monotonic() > deadline:
                raise TestFailure('the KFD emulator did not start (see %s/log)' % emu_dir)
            time.sleep(0.01)
        self.emu_sock = sock
        self.test_env = {'KFDEMU_SOCKET': sock,
                         'GPU_TEST_LAYOUT': self.desc.get('layout', 'two_gpus'),
                         'GPU_TEST_CHILD': '1' if self.desc.get('child') else '0',
                         'GPU_TEST_PROCS': str(self.desc.get('procs', 1))}
        self.criu_env = {'KFDEMU_SOCKET': sock, 'AMDGPU_TOPOLOGY_DIR': topo,
                         'AMDGPU_PARALLEL_RESTORE': self.desc.get(
                             'parallel_env', '1' if self.desc['path'] == 'parallel' else '0')}

    def stop_emulator(self):
        if self.emu is None:
            return
        self.emu.terminate()
        try:
            self.emu.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.emu.kill()
            self.emu.wait()
        self.emu = None

    def emulator_stats(self):
        """What the emulator holds, asked on a render node connection (which makes no
        process of its own): the wire protocol of test/gpu/kfdemu_proto.h."""
        frame = struct.Struct('<IHHIiQII')

        def call(sk, msg_type, payload):
            sk.sendall(frame.pack(0x4544464b, 2, msg_type, 1, 0, len(payload), 0, 0) + payload)
            head = b''
            while len(head) < frame.size:
                head += sk.recv(frame.size - len(head))
            fields = frame.unpack(head)
            body = b''
            while len(body) < fields[5]:
                body += sk.recv(fields[5] - len(body))
            if fields[4]:
                raise TestFailure('the KFD emulator refused request %d: %d' % (msg_type, fields[4]))
            return body

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sk:
            sk.connect(self.emu_sock)
            call(sk, 1, struct.pack('<IIQII', 2, 1, os.fstat(sk.fileno()).st_ino, 128, 0))
            names = ('processes', 'bos', 'queues', 'events', 'svm_ranges', 'connections',
                     'vram_used')
            return dict(zip(names, struct.unpack('<IIIIIIQ', call(sk, 22, b''))))

    def expect_emulator_empty(self, log):
        """Nothing of the tree is left in the emulator: no process, BO, queue or VRAM."""
        deadline = time.monotonic() + EXIT_TIMEOUT
        while True:
            stats = self.emulator_stats()
            if not stats['processes'] and not stats['bos'] and not stats['vram_used']:
                return
            if time.monotonic() > deadline:
                raise TestFailure('the KFD emulator still holds %r' % stats, log)
            time.sleep(0.02)

    # --- criu --------------------------------------------------------------
    def criu(self, action, args, log=None, stdin=None, expect_ok=True, binary=CRIU):
        """Run criu (ours, or binary); returns (returncode, stderr text). Fails the test
        on a timeout."""
        # {out} and {work}: the test's directories (--root, --external mnt[] of mount tests)
        cmd = [binary, action] + [a.replace('{out}', self.out).replace('{work}', self.work)
                                  for a in args]
        if any('{helper}' in a for a in cmd):
            with open(self.helper_file) as f:
                helper = f.read().strip()
            cmd = [a.replace('{helper}', helper) for a in cmd]
        if binary != CRIU:
            cmd += [o for o in self.desc.get('upstream_opts', UPSTREAM_OPTS) if o not in args]
        if log:
            cmd += ['-v4', '-o', log]
        base = os.path.join(self.out, 'criu-' + action)
        # a None in criu_env: the variable is unset for criu
        env = {k: v for k, v in dict(os.environ, **self.criu_env).items() if v is not None}
        if binary != CRIU:
            env.update(UPSTREAM_ENV)
            # a test's own for upstream criu; None: unset
            for name, value in self.desc.get('upstream_env', {}).items():
                if value is None:
                    env.pop(name, None)
                else:
                    env[name] = value
        with open(base + '.out', 'ab') as out, open(base + '.err', 'w+b') as err:
            try:
                proc = subprocess.run(cmd, stdin=stdin or subprocess.DEVNULL, stdout=out,
                                      stderr=err, timeout=CRIU_TIMEOUT, env=env,
                                      pass_fds=self.criu_pass_fds)
            except subprocess.TimeoutExpired:
                raise TestFailure('%s %s did not finish in %d s' % (self.criu_name(binary), action,
                                                                 CRIU_TIMEOUT), log)
            err.seek(0)
            stderr = err.read().decode(errors='replace')
        if expect_ok and proc.returncode != 0:
            raise TestFailure('%s %s exited %d: %s' % (self.criu_name(binary), action,
                                                     proc.returncode,
                                                     stderr.strip()[-300:] or
                                                     self.last_log_error(log)), log)
        return proc.returncode, stderr

    @staticmethod
    def criu_name(binary):
        return 'criu' if binary == CRIU else 'upstream criu'

    def dump(self, extra=(), binary=CRIU):
        extra = list(extra) + (['--shell-job'] if self.pty_slave_path else [])
        self.tree = tree_pids(self.pid)
        if self.desc.get('pidns'):
            self.ns_tree = ns_tree(self.tree)
        self.criu('dump', ['-t', str(self.pid), '-D', self.img] + extra, 'dump.log',
                  binary=binary)
        self.check_images()
        if 'image_check' in self.desc:
            self.desc['image_check'](self.img, self.pid)
        if '-R' in extra or '--leave-stopped' in extra:
            return
        # the default dump kills the task: reap it so its PID is free for restore
        status = self.wait_exit()
        if not os.WIFSIGNALED(status):
            raise TestFailure('after dump the test exited by itself: ' + self.verdict_text(),
                              'dump.log')
        self.wait_tree_gone('after dump')
        self.check_pages_size()

    def wait_tree_gone(self, why):
        """The rest of the tree dies with the root; its orphans come to us, the subreaper."""
        deadline = time.monotonic() + EXIT_TIMEOUT
        while any(os.path.exists('/proc/%d' % pid) for pid in self.tree):
            reap_orphans()
            if time.monotonic() > deadline:
                raise TestFailure('%s: processes of the tree are still there' % why, 'dump.log')
            time.sleep(0.01)

    def check_pages_size(self):
        limit = self.desc.get('max_pages_bytes')
        if limit is None:
            return
        total = sum(os.path.getsize(os.path.join(self.img, n))
                    for n in os.listdir(self.img) if n.startswith('pages-'))
        if total > limit:
            raise TestFailure('page images hold %d bytes, more than %d: untouched pages '
                              'were stored' % (total, limit), 'dump.log')

    def check_images(self):
        """Every image of the dump decodes with Debian's crit and encodes back to its own
        bytes. A failure is kept and reported when the test's run is over, so that the
        report says as well whether the images restored."""
        errors, _ = CRIT.check(self.img, os.path.join(self.out, 'crit'))
        errors += own_image_errors(self.img)
        if errors and self.crit_failure is None:
            more = (' (and %d more, see %s)' % (len(errors) - 1, os.path.relpath(
                os.path.join(self.out, 'crit', 'errors.txt'))) if len(errors) > 1 else '')
            self.crit_failure = 'crit check: ' + errors[0] + more

    def lazy(self, binary):
        """Whether this restore is lazy: the test asks for it ('lazy'), or the run does
        (--lazy-pages), with our criu restoring."""
        return binary == CRIU and (self.desc.get('lazy') or LAZY_ALL)

    def start_lazy_daemon(self, binary=CRIU):
        """criu lazy-pages for the images, as upstream's zdtm starts it: not waited for,
        restore connects once it listens. With a lazy source (remote_lazy), the daemon
        takes the pages the dump left in the tree from it (--page-server)."""
        err = open(os.path.join(self.out, 'criu-lazy-pages.err'), 'wb')
        env = dict(os.environ, **UPSTREAM_ENV) if binary != CRIU else None
        # upstream's restore does not wait for the socket: its daemon is waited for
        ready_r, ready_w = os.pipe() if binary != CRIU else (-1, -1)
        self.lazy_daemon = subprocess.Popen(
            [binary, 'lazy-pages', '-D', self.img, '-v4', '-o', 'lazy-pages.log'] +
            self.lazy_daemon_args +
            # 'lazy_daemon_args': the test's own ({work}: its work directory)
            [a.replace('{work}', self.work) for a in self.desc.get('lazy_daemon_args', [])] +
            (['--status-fd', str(ready_w)] if ready_w >= 0 else []),
            stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
            pass_fds=[ready_w] if ready_w >= 0 else [])
        err.close()
        if ready_w >= 0:
            os.close(ready_w)
            select.select([ready_r], [], [], CRIU_TIMEOUT)
            os.close(ready_r)

    def wait_lazy_daemon(self):
        """The daemon exits by itself, with 0, once every page is in."""
        daemon, self.lazy_daemon = self.lazy_daemon, None
        code = wait_criu(daemon, 'criu lazy-pages', 'lazy-pages.log')
        if code != 0:
            raise TestFailure('criu lazy-pages exited %d: %s' % (
                code, self.last_log_error('lazy-pages.log')), 'lazy-pages.log')
        faults = sum(int(l.split('(')[-1].split()[0]) for l in self.log_tail('lazy-pages.log', None)
                     if 'all pages in (' in l)
        if self.desc.get('lazy_faults') and not faults:
            raise TestFailure('criu lazy-pages served no fault: the task did not run before '
                              'its pages were in', 'lazy-pages.log')

    def run_lazy_daemon_killed(self):
        """The daemon killed while pages are still missing: the restored task must not go
        on with zeroes; the daemon's guardian kills it and says so in the daemon's log."""
        pid = self.pid
        self.dump()
        self.start_lazy_daemon()
        self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile, '--lazy-pages'],
                  'restore.log')
        daemon, self.lazy_daemon = self.lazy_daemon, None
        daemon.kill()
        daemon.wait()
        self.expect_restored_pid(pid)
        status = self.wait_exit()
        if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGKILL:
            raise TestFailure('the task was not killed with its daemon: wait status %#x, %s'
                              % (status, self.verdict_text()), 'lazy-pages.log')
        self.wait_tree_gone('after the daemon died')
        # children forked after the restore are in no tree of ours: by their program
        prog = os.path.join(BIN_DIR, self.desc.get('bin', self.name))
        deadline = time.monotonic() + EXIT_TIMEOUT
        while True:
            reap_orphans()
            left = [p for p in os.listdir('/proc') if p.isdigit() and exe_of(p) == prog]
            if not left:
                break
            if time.monotonic() > deadline:
                raise TestFailure('processes of %s still run after the daemon died: %s'
                                  % (os.path.basename(prog), ' '.join(left)), 'lazy-pages.log')
            time.sleep(0.01)
        if not any('lazy-pages daemon died' in l for l in self.log_tail('lazy-pages.log', None)):
            raise TestFailure('the daemon\'s log does not say why the task was killed',
                              'lazy-pages.log')

    def mount_overlay_root(self):
        """As a container runtime does before a restore: the test's overlay root, of the
        same lower, upper and work directories, mounted again at {work}/root."""
        opts = 'lowerdir={0}/lower,upperdir={0}/upper,workdir={0}/ovwork'.format(self.work)
        subprocess.run(['mount', '-t', 'overlay', 'overlay', '-o', opts,
                        os.path.join(self.work, 'root')], check=True)
        self.overlay_root = os.path.join(self.work, 'root')

    def start_lazy_source(self, binary=CRIU):
        """criu dump --lazy-pages serving on a free loopback port; returns once the images
        are written (--status-fd), the tree frozen and its private pages left in it."""
        port = free_tcp_port()
        self.tree = tree_pids(self.pid)
        if self.desc.get('pidns'):
            self.ns_tree = ns_tree(self.tree)
        ready_r, ready_w = os.pipe()
        env = dict(os.environ, **UPSTREAM_ENV) if binary != CRIU else None
        opts = [o for o in UPSTREAM_OPTS] if binary != CRIU else []
        with open(os.path.join(self.out, 'criu-dump.err'), 'wb') as err:
            self.lazy_source = subprocess.Popen(
                [binary, 'dump', '-t', str(self.pid), '-D', self.img, '--lazy-pages',
                 '--address', '127.0.0.1', '--port', str(port), '--status-fd', str(ready_w),
                 '-v4', '-o', 'dump.log'] + opts,
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=[ready_w], env=env)
        os.close(ready_w)
        ready = select.select([ready_r], [], [], CRIU_TIMEOUT)[0] and os.read(ready_r, 1)
        os.close(ready_r)
        if ready != b'\0':
            raise TestFailure('%s dump --lazy-pages did not get to serving its pages: %s'
                              % (self.criu_name(binary), self.last_log_error('dump.log')),
                              'dump.log')
        self.lazy_daemon_args = ['--page-server', '--address', '127.0.0.1', '--port', str(port)]
        self.check_images()
        return port

    def wait_lazy_source(self, expect_code=0):
        source, self.lazy_source = self.lazy_source, None
        code = wait_criu(source, 'dump --lazy-pages', 'dump.log')
        if code != expect_code:
            raise TestFailure('dump --lazy-pages exited %d: %s'
                              % (code, self.last_log_error('dump.log')), 'dump.log')

    def run_remote_lazy(self):
        """dump --lazy-pages keeps the tree frozen and serves its private pages on a
        loopback port; criu lazy-pages --page-server fetches them for restore
        --lazy-pages (faults first, the rest in the background). The dump then kills its
        tree and exits 0; the restored one, in a new pid namespace, checks every word.
        'lazy_source' / 'lazy_daemon': upstream criu dumps / runs the daemon and restores."""
        source = self.pid
        dumper = UPSTREAM_CRIU if self.desc.get('lazy_source') == 'upstream' else CRIU
        restorer = UPSTREAM_CRIU if self.desc.get('lazy_daemon') == 'upstream' else CRIU
        self.start_lazy_source(dumper)
        self.start_lazy_daemon(restorer)
        if os.path.exists(self.pidfile):
            os.unlink(self.pidfile)
        try:
            self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile,
                                  '--lazy-pages'], 'restore.log', binary=restorer)
        finally:
            if self.lazy_daemon:
                self.wait_lazy_daemon()
        try:
            self.wait_lazy_source()
        except TestFailure:
            self.adopt_restored()
            raise
        status = self.wait_exit()
        if not os.WIFSIGNALED(status):
            raise TestFailure('the dumped tree was not killed after the transfer: '
                              + self.verdict_text(), 'dump.log')
        if self.desc.get('tree_grows'):
            # it forks as soon as it runs: its tree is its own business from then on
            with open(self.pidfile) as pidfile:
                self.pid, self.is_child = int(pidfile.read().split()[0]), True
        else:
            self.expect_restored_pid(source)
        self.finish_and_judge()

    def run_remote_lazy_killed(self):
        """One end of the transfer dies while pages are still missing ('kill': 'source' or
        'daemon'): the restored tree is killed, the daemon's log saying why. The source
        killed: the daemon exits 1 naming it. The daemon killed: the dump, left without a
        word, fails (exit 1, no inventory.img). Either way the dumped tree, no longer
        traced, runs on and passes."""
        source = self.pid
        self.start_lazy_source()
        self.start_lazy_daemon()
        os.unlink(self.pidfile)
        self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile, '--lazy-pages'],
                  'restore.log')
        daemon, self.lazy_daemon = self.lazy_daemon, None
        if self.desc['kill'] == 'source':
            self.lazy_source.kill()
            self.lazy_source.wait()
            self.lazy_source = None
            code, said = daemon.wait(timeout=CRIU_TIMEOUT), self.last_log_error('lazy-pages.log')
            if code != 1 or 'dump\'s source' not in said:
                raise TestFailure('criu lazy-pages exited %d after its source died: %s'
                                  % (code, said), 'lazy-pages.log')
        else:
            daemon.kill()
            daemon.wait()
            self.wait_lazy_source(expect_code=1)
            if 'lazy-pages daemon' not in self.last_log_error('dump.log'):
                raise TestFailure('the dump does not say why it failed: '
                                  + self.last_log_error('dump.log'), 'dump.log')
            if os.path.exists(os.path.join(self.img, 'inventory.img')):
                raise TestFailure('the failed dump left inventory.img', 'dump.log')
        with open(self.pidfile) as pidfile:
            self.pid, self.is_child = int(pidfile.read().split()[0]), True
        status = self.wait_exit()
        if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGKILL:
            raise TestFailure('the restored tree was not killed: wait status %#x' % status,
                              'lazy-pages.log')
        # read only once the task is dead: the guardian writes its line before it kills,
        # but may notice the daemon's death after the dump (or the test) did
        if not any('lazy-pages daemon died' in l for l in self.log_tail('lazy-pages.log', None)):
            raise TestFailure('the daemon\'s log does not say why the task was killed',
                              'lazy-pages.log')
        self.pid = source
        self.finish_and_judge()

    def run_remote_lazy_restore_fails(self):
        """The restore --lazy-pages fails after its tasks exist (its post-restore action
        script fails): it kills them and tells the daemon, which exits 1 saying so rather
        than that every page is in; the dump, told nothing is done, fails (exit 1, no
        inventory.img) and its tree, the only copy left, runs on and passes."""
        source = self.pid
        self.start_lazy_source()
        self.start_lazy_daemon()
        os.unlink(self.pidfile)
        script = self.write_script('[ "$CRTOOLS_SCRIPT_ACTION" != post-restore ]')
        code, _ = self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile,
                                        '--lazy-pages', '--action-script', script],
                            'restore.log', expect_ok=False)
        if code == 0:
            raise TestFailure('the restore succeeded despite its failing script', 'restore.log')
        daemon, self.lazy_daemon = self.lazy_daemon, None
        code = wait_criu(daemon, 'criu lazy-pages', 'lazy-pages.log')
        said = self.last_log_error('lazy-pages.log')
        if code != 1 or 'restore failed' not in said:
            raise TestFailure('criu lazy-pages exited %d after the restore failed: %s'
                              % (code, said), 'lazy-pages.log')
        self.wait_lazy_source(expect_code=1)
        if os.path.exists(os.path.join(self.img, 'inventory.img')):
            raise TestFailure('the failed dump left inventory.img', 'dump.log')
        self.pid = source
        self.finish_and_judge()

    def run_remote_lazy_not_lazy(self):
        """A restore without --lazy-pages of a dump --lazy-pages's images fails with one line
        and leaves no process; the source, killed then, lets its tree run on: it passes."""
        source, prog = self.pid, os.path.join(BIN_DIR, self.desc.get('bin', self.name))
        self.start_lazy_source()
        dumped, self.tree = self.tree, {}
        self.expect_restore_fails(source)
        self.lazy_source.kill()
        self.lazy_source.wait()
        self.lazy_source = None
        left = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in dumped and
                exe_of(p) == prog]
        if left:
            raise TestFailure('the failed restore left %s' % ' '.join(left), 'restore.log')
        self.finish_and_judge()

    def run_remote_lazy_no_source(self):
        """criu lazy-pages --page-server with no dump listening exits 1, saying so; the
        restore --lazy-pages that counted on it fails cleanly."""
        pid = self.pid
        self.dump()
        self.lazy_daemon_args = ['--page-server', '--address', '127.0.0.1', '--port',
                                 str(free_tcp_port())]
        self.start_lazy_daemon()
        daemon, self.lazy_daemon = self.lazy_daemon, None
        code = daemon.wait(timeout=CRIU_TIMEOUT)
        if code != 1 or 'cannot connect to the page server' not in self.last_log_error(
                'lazy-pages.log'):
            raise TestFailure('criu lazy-pages exited %d without its source: %s'
                              % (code, self.last_log_error('lazy-pages.log')), 'lazy-pages.log')
        self.expect_restore_fails(pid)

    def restore(self, pid, detach=True, extra=(), binary=CRIU):
        if os.path.exists(self.pidfile):
            os.unlink(self.pidfile)
        if self.desc.get('overlay_root') and not self.overlay_root:
            self.mount_overlay_root()
        args = ['-D', self.img, '--pidfile', self.pidfile] + list(extra)
        lazy = self.lazy(binary)
        if lazy:
            self.start_lazy_daemon()
            args.append('--lazy-pages')
        stdin = None
        if detach:
            args.append('-d')
        if self.pty_slave_path:
            args.append('--shell-job')
            stdin = open(self.pty_slave_path, 'rb+', buffering=0)
        try:
            self.criu('restore', args, 'restore.log', stdin=stdin, binary=binary)
        finally:
            if stdin:
                stdin.close()
            if lazy and self.lazy_daemon:
                self.wait_lazy_daemon()
        self.expect_restored_pid(pid)

    def adopt_restored(self):
        """The restored root (the pidfile's) dies with the test's leftovers: a test that
        fails while both trees live must not leave the restored one running."""
        with open(self.pidfile) as pidfile:
            self.tree[int(pidfile.read().split()[0])] = 0

    def expect_restored_pid(self, pid):
        with open(self.pidfile) as pidfile:
            restored = int(pidfile.read().split()[0])
        if self.desc.get('pidns'):
            # criu -d exited: the init is ours (the subreaper), under a pid of its own here
            self.pid, self.is_child = restored, True
            return self.expect_ns_tree_restored()
        if restored != pid:
            self.pid, self.is_child = restored, False
            raise TestFailure('restored with pid %d, dumped as %d' % (restored, pid),
                              'restore.log')
        # criu exited (-d); the task was reparented to us, the subreaper
        self.pid, self.is_child = pid, True

    def expect_tasks_untouched(self, tids, why):
        """Every thread in {pid: [tid]} runs on: not a zombie, not stopped, not traced."""
        for pid in sorted(tids):
            for tid in tids[pid]:
                try:
                    with open('/proc/%d/task/%d/status' % (pid, tid)) as status:
                        fields = dict(l.split(':', 1) for l in status if ':' in l)
                except (FileNotFoundError, ProcessLookupError):
                    raise TestFailure('%s: thread %d of process %d is gone' % (why, tid, pid),
                                      'dump.log')
                state, tracer = fields['State'].split()[0], fields['TracerPid'].strip()
                if state in ('Z', 'X', 'T', 't') or tracer != '0':
                    raise TestFailure('%s: thread %d of process %d is left in state %s, '
                                      'TracerPid %s' % (why, tid, pid, state, tracer),
                                      'dump.log')

    def expect_alive_untouched(self, why):
        if not pid_alive(self.pid):
            raise TestFailure('%s: the process is gone' % why, 'dump.log')
        state = proc_status(self.pid, 'State')
        tracer = proc_status(self.pid, 'TracerPid')
        if state.startswith(('T', 't')) or tracer != '0':
            raise TestFailure('%s: the process is left %s, TracerPid %s' % (why, state, tracer),
                              'dump.log')

    def expect_one_error_line(self, stderr, what, log=None):
        lines = [l for l in stderr.splitlines() if l.strip()]
        if len(lines) != 1:
            raise TestFailure('%s: expected one error line on stderr, got %d: %r'
                              % (what, len(lines), lines[:5]), log)

    def expect_no_process(self, pid, log):
        reap_orphans()
        if pid_alive(pid) or os.path.exists('/proc/%d' % pid):
            self.pid, self.is_child = pid, False
            raise TestFailure('pid %d exists after the failed restore' % pid, log)

    def last_log_error(self, log):
        """The error lines of a criu log that say why it failed (upstream criu with -o says
        nothing on stderr): the first one is the cause, the last one the summary."""
        errors = [l.strip() for l in self.log_tail(log, None) if 'Error' in l] if log else []
        if not errors:
            return '(no error in %s)' % log
        causes = [l for l in errors if 'FAILED' not in l and "Can't setup RLIMIT_NOFILE" not in l]
        return ' ... '.join((causes[:1] or errors[:1]) + errors[-1:])

    def log_tail(self, log, lines=LOG_TAIL_LINES):
        path = os.path.join(self.img, log)
        if not os.path.exists(path):
            return []
        with open(path, errors='replace') as log_file:
            text = log_file.read().splitlines()
        return text[-lines:] if lines else text

    # --- modes ---------------------------------------------------------------
    def run(self):
        mode = self.desc.get('mode', 'default')
        if mode in NO_PROCESS_MODES:
            return getattr(self, 'run_' + mode)()
        self.start()
        self.wait_ready()
        if not self.use_criu:
            return self.finish_and_judge()
        try:
            getattr(self, 'run_' + mode)()
        except TestFailure as failure:
            if self.crit_failure:
                raise TestFailure('%s; and %s' % (failure, self.crit_failure), failure.log)
            raise
        if self.crit_failure:
            raise TestFailure(self.crit_failure)

    def run_default(self):
        pid = self.pid
        self.dump(self.desc.get('dump_args', []))
        if 'after_dump' in self.desc:
            self.desc['after_dump'](self.img, pid)
        self.restore(pid, extra=self.desc.get('restore_args', ()))
        if 'after_restore' in self.desc:
            self.desc['after_restore'](self.out)
        self.finish_and_judge()

    run_tty = run_default

    def pre_dump(self, nr, parent, extra=()):
        """criu pre-dump into {img}-preN (parent: the one before, relative to -D); the
        images decode with crit and the task runs on."""
        img = '%s-pre%d' % (self.img, nr)
        os.makedirs(img, exist_ok=True)
        extra = list(extra)
        extra += ['--prev-images-dir', '../' + os.path.basename(parent)] if parent else []
        extra += self.desc.get('pre_dump_args', [])
        self.criu('pre-dump', ['-t', str(self.pid), '-D', img] + extra, 'pre-dump-%d.log' % nr)
        errors, _ = CRIT.check(img, os.path.join(self.out, 'crit-pre%d' % nr))
        if errors and self.crit_failure is None:
            self.crit_failure = 'crit check of pre-dump %d: %s' % (nr, errors[0])
        if not pid_alive(self.pid):
            raise TestFailure('the task is gone after pre-dump %d' % nr, 'pre-dump-%d.log' % nr)
        return img

    def wait_step(self, step):
        """SIGUSR1: the test applies its next step of changes and reports its number."""
        os.kill(self.pid, signal.SIGUSR1)
        path, deadline = self.test_env['ZDTM_STEP_FILE'], time.monotonic() + EXIT_TIMEOUT
        while True:
            try:
                with open(path) as step_file:
                    if step_file.read() == str(step):
                        return
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise TestFailure('the test did not report step %d: %s'
                                  % (step, self.verdict_text()))
            time.sleep(0.01)

    def run_pre_dump(self):
        pid, parent = self.pid, None
        for nr in range(1, self.desc.get('pre_dumps', 1) + 1):
            parent = self.pre_dump(nr, parent)
            # 'steps': False for a test that makes no changes between pre-dumps
            if self.desc.get('steps', True):
                self.wait_step(nr)
        self.dump(['--prev-images-dir', '../' + os.path.basename(parent)] +
                  self.desc.get('dump_args', []))
        if self.desc.get('dedup'):
            self.criu('dedup', ['-D', self.img], 'dedup.log')
        if 'chain_check' in self.desc:
            self.desc['chain_check'](self.img)
        if self.desc.get('lazy_restore_fails'):
            return self.expect_lazy_restore_fails(pid)
        restorer = UPSTREAM_CRIU if self.desc.get('upstream_restore') else CRIU
        self.restore(pid, extra=self.desc.get('restore_args', ()), binary=restorer)
        self.finish_and_judge()

    def run_cross_dump_upstream(self):
        self.run_cross(UPSTREAM_CRIU, CRIU)

    def run_cross_restore_upstream(self):
        self.run_cross(CRIU, UPSTREAM_CRIU)

    def run_cross(self, dumper, restorer):
        """Dump with one criu, restore (-d) with the other; the tree must come back whole
        and pass its own checks."""
        pid = self.pid
        self.dump(self.desc.get('dump_args', []), binary=dumper)
        self.restore(pid, extra=self.desc.get('restore_args', []), binary=restorer)
        self.expect_tree_restored()
        self.finish_and_judge()

    def start_page_server(self, binary=CRIU, extra=(), ps_dir=None):
        """criu page-server into {img}-ps (or ps_dir) on a free loopback port, started once
        it listens (--status-fd); returns the port."""
        port, ps_dir = free_tcp_port(), ps_dir or self.img + '-ps'
        os.makedirs(ps_dir, exist_ok=True)
        ready_r, ready_w = os.pipe()
        env = dict(os.environ, **UPSTREAM_ENV) if binary != CRIU else None
        with open(os.path.join(self.out, 'criu-page-server.err'), 'wb') as err:
            self.page_server = subprocess.Popen(
                [binary, 'page-server', '-D', ps_dir, '--address', '127.0.0.1', '--port',
                 str(port), '--status-fd', str(ready_w), '-v4', '-o', 'page-server.log'] +
                list(extra),
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=[ready_w], env=env)
        os.close(ready_w)
        ready = select.select([ready_r], [], [], CRIU_TIMEOUT)[0] and os.read(ready_r, 1)
        os.close(ready_r)
        if ready != b'\0':
            raise TestFailure('%s page-server did not start listening' % self.criu_name(binary))
        return port

    def wait_page_server(self, binary):
        server, self.page_server = self.page_server, None
        try:
            code = server.wait(timeout=CRIU_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            raise TestFailure('%s page-server did not exit after the dump'
                              % self.criu_name(binary))
        if code:
            raise TestFailure('%s page-server exited %d: %s' % (
                self.criu_name(binary), code,
                self.last_log_error(os.path.join('..', 'img-ps', 'page-server.log'))))

    def run_page_server(self):
        """Pages over TCP; the other images stay in -D, where the pages join them."""
        server = UPSTREAM_CRIU if self.desc.get('ps_upstream_server') else CRIU
        dumper = UPSTREAM_CRIU if self.desc.get('ps_upstream_dump') else CRIU
        pid, ps_dir = self.pid, self.img + '-ps'
        port = self.start_page_server(server)
        self.dump(['--page-server', '--address', '127.0.0.1', '--port', str(port)],
                  binary=dumper)
        self.wait_page_server(server)
        local = [n for n in os.listdir(self.img) if n.startswith(('pagemap-', 'pages-'))]
        if local:
            raise TestFailure('dump --page-server wrote %s into -D' % local[0], 'dump.log')
        images = [n for n in os.listdir(ps_dir) if n.endswith('.img')]
        if not any(n.startswith('pagemap-') for n in images):
            raise TestFailure('the page server stored no pagemap', 'dump.log')
        errors, _ = CRIT.check(ps_dir, os.path.join(self.out, 'crit-ps'))
        if errors and self.crit_failure is None:
            self.crit_failure = 'crit check of the page server\'s images: ' + errors[0]
        for name in images:
            shutil.copy(os.path.join(ps_dir, name), self.img)
        self.restore(pid)
        self.finish_and_judge()

    def run_page_server_chain(self):
        """A pre-dump into its images directory, which the server's side gets too (here: the
        same one); then criu page-server --prev-images-dir naming it and dump --page-server
        --prev-images-dir: the server stores PE_PARENT for what the pre-dump holds, restore
        follows the chain. 'ps_no_parent': the server has no parent images, the dump fails
        saying so, the server exits 1 and the tree runs on. 'ps_pre_dump': the pre-dumps
        go through page servers too ({img}-psN, each the parent of the next), keeping only
        their pagemaps in {img}-preN; the restore is of the server's side."""
        pid, parent, server_parent = self.pid, None, None
        server = UPSTREAM_CRIU if self.desc.get('ps_upstream_server') else CRIU
        for nr in range(1, self.desc.get('pre_dumps', 1) + 1):
            extra = []
            if self.desc.get('ps_pre_dump'):
                ps_dir = '%s-ps%d' % (self.img, nr)
                port = self.start_page_server(server, ['--prev-images-dir', '../' + server_parent]
                                              if server_parent else [], ps_dir)
                extra = ['--page-server', '--address', '127.0.0.1', '--port', str(port)]
                server_parent = os.path.basename(ps_dir)
            parent = self.pre_dump(nr, parent, extra)
            if self.desc.get('ps_pre_dump'):
                self.wait_page_server(server)
                if any(n.startswith('pages-') for n in os.listdir(parent)):
                    raise TestFailure('pre-dump --page-server wrote pages into its -D',
                                      'pre-dump-%d.log' % nr)
            self.wait_step(nr)
        parent = os.path.basename(parent)
        no_parent = self.desc.get('ps_no_parent')
        port = self.start_page_server(
            server, extra=[] if no_parent else ['--prev-images-dir', '../' + (server_parent or parent)])
        args = ['--page-server', '--address', '127.0.0.1', '--port', str(port),
                '--prev-images-dir', '../' + parent]
        if no_parent:
            server, self.page_server = self.page_server, None
            code, stderr = self.criu('dump', ['-t', str(pid), '-D', self.img] + args,
                                     'dump.log', expect_ok=False)
            self.expect_one_error_line(stderr, 'failed dump', 'dump.log')
            if code == 0 or self.desc['expect'] not in stderr:
                raise TestFailure('dump exited %d: %s' % (code, stderr.strip()), 'dump.log')
            if server.wait(timeout=CRIU_TIMEOUT) != 1:
                raise TestFailure('the page server did not fail with the dump')
            # it runs on, with the pre-dumps' write tracker its own check refuses: stopped here
            self.expect_tasks_untouched(tree_tids(tree_pids(pid)), 'after the failed dump')
            os.kill(pid, signal.SIGKILL)
            self.wait_exit()
            return None
        self.dump(args)
        self.wait_page_server(server)
        ps_dir = self.img + '-ps'
        errors, _ = CRIT.check(ps_dir, os.path.join(self.out, 'crit-ps'))
        if errors and self.crit_failure is None:
            self.crit_failure = 'crit check of the page server\'s images: ' + errors[0]
        shown = subprocess.run(['/usr/bin/crit', 'show', os.path.join(ps_dir, 'pagemap-%d.img'
                                                                      % pid)],
                               capture_output=True, text=True).stdout
        if 'PE_PARENT' not in shown:
            raise TestFailure('the server stored no run of the parent images', 'dump.log')
        if server_parent:
            # the pages are all on the server's side: the dump's other images join them
            for name in os.listdir(self.img):
                if name.endswith('.img'):
                    shutil.copy(os.path.join(self.img, name), ps_dir)
            self.img = ps_dir
        else:
            for name in os.listdir(ps_dir):
                if name.endswith('.img'):
                    shutil.copy(os.path.join(ps_dir, name), self.img)
        self.restore(pid)
        self.finish_and_judge()

    def run_page_server_lazy_images(self):
        """criu page-server --lazy-pages serves the images of a plain dump to a lazy-pages
        daemon (here a client of CRIU's protocol): a PS_IOV_GET of the task's first stored
        page answers PS_IOV_ADD_F/PE_PRESENT with exactly the stored bytes, one for pages
        that are not stored ends the session with exit 1 ('ps_bad_get'); PS_IOV_FLUSH
        gets status 0 and the server exits 0. The images then restore as usual."""
        pid = self.pid
        self.dump()
        entries = json.loads(subprocess.run(
            ['/usr/bin/crit', 'decode', '-i', os.path.join(self.img, 'pagemap-%d.img' % pid)],
            capture_output=True, text=True, check=True).stdout)['entries']
        # Debian's crit does not know nr_pages (field 5): the run's first page only
        head, first, nr = entries[0], entries[1], 1
        vaddr = int(first['vaddr'], 16) if isinstance(first['vaddr'], str) else first['vaddr']
        with open(os.path.join(self.img, 'pages-%d.img' % head['pages_id']), 'rb') as pages:
            stored = pages.read(nr * 4096)
        port = free_tcp_port()
        ready_r, ready_w = os.pipe()
        with open(os.path.join(self.out, 'criu-page-server.err'), 'wb') as err:
            self.page_server = subprocess.Popen(
                [CRIU, 'page-server', '--lazy-pages', '-D', self.img, '--address', '127.0.0.1',
                 '--port', str(port), '--status-fd', str(ready_w), '-v4', '-o',
                 'page-server.log'], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                pass_fds=[ready_w])
        os.close(ready_w)
        ready = select.select([ready_r], [], [], CRIU_TIMEOUT)[0] and os.read(ready_r, 1)
        os.close(ready_r)
        server, self.page_server = self.page_server, None
        bad = self.desc.get('ps_bad_get')
        try:
            if ready != b'\0':
                raise TestFailure('criu page-server --lazy-pages did not start listening')
            with socket.create_connection(('127.0.0.1', port)) as sk:
                sk.sendall(struct.pack('=I4xQQQ', 7, nr, vaddr - 4096 if bad else vaddr, pid))
                answer = sk.recv(32, socket.MSG_WAITALL)
                if not bad:
                    cmd, got, at, dst = struct.unpack('=I4xQQQ', answer)
                    data = sk.recv(got * 4096, socket.MSG_WAITALL) if got <= nr else b''
                    if (cmd, got, at, dst, data) != (6 | 4 << 16, nr, vaddr, pid, stored):
                        raise TestFailure('PS_IOV_GET answered %#x, %d pages at %#x of %d, %s'
                                          % (cmd, got, at, dst, 'the stored bytes'
                                             if data == stored else 'other bytes'))
                    sk.sendall(struct.pack('=I4xQQQ', 0x1023, 0, 0, 0))
                    status = sk.recv(4, socket.MSG_WAITALL)
                    if status != b'\0' * 4:
                        raise TestFailure('PS_IOV_FLUSH answered %r' % status)
            code = server.wait(timeout=CRIU_TIMEOUT)
        finally:
            server.kill()
            server.wait()
        said = self.last_log_error('page-server.log')
        if code != (1 if bad else 0) or (bad and 'no stored pages at' not in said):
            raise TestFailure('criu page-server --lazy-pages exited %d: %s' % (code, said))
        self.restore(pid)
        self.finish_and_judge()

    def run_page_server_killed(self):
        """The server stops once the dump has connected and dies 0.3 s later, the tree
        frozen and the dump waiting for it."""
        port = self.start_page_server()
        ps_pid = self.page_server.pid
        self.write_script('[ "$CRTOOLS_SCRIPT_ACTION" = pre-dump ] || exit 0\n'
                          'kill -STOP %d\n(sleep 0.3; kill -KILL %d) </dev/null >/dev/null 2>&1 &'
                          % (ps_pid, ps_pid))
        self.desc = dict(self.desc, dump_args=[
            '--page-server', '--address', '127.0.0.1', '--port', str(port),
            '--action-script', os.path.join(self.out, 'script.sh')])
        self.run_dump_fails()

    def run_criu_killed(self):
        """criu dump connects to a socket of ours that accepts and never answers: it
        waits for the page server's answer with the parasite started, where it is killed."""
        pid = self.pid
        tids = tree_tids(tree_pids(pid))
        fds, maps = task_fds(pid), task_maps(pid)
        with socket.socket() as listener:
            listener.bind(('127.0.0.1', 0))
            listener.listen(1)
            listener.settimeout(CRIU_TIMEOUT)
            cmd = [CRIU, 'dump', '-t', str(pid), '-D', self.img, '--page-server', '--address',
                   '127.0.0.1', '--port', str(listener.getsockname()[1]), '-v4', '-o',
                   'dump.log']
            with open(os.path.join(self.out, 'criu-dump.err'), 'wb') as err:
                criu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            try:
                conn, _ = listener.accept()
                self.wait_parasite_running(pid)
            finally:
                criu.kill()
                criu.wait()
            conn.close()
        # The parasite puts the task back once it has run again: its fds and compel's
        # scratch page go then, the parasite's area stays.
        deadline = time.monotonic() + CRIU_TIMEOUT
        while True:
            now_fds = task_fds(pid)
            left = [m for m in task_maps(pid) if 'criu-parasite' not in m]
            if now_fds == fds and left == maps:
                break
            if time.monotonic() > deadline:
                raise TestFailure('after criu was killed: the fds are %r, were %r; mappings '
                                  'changed: %r' % (now_fds, fds, sorted(set(left) ^ set(maps))),
                                  'dump.log')
            time.sleep(0.01)
        self.expect_tasks_untouched(tids, 'after criu was killed')
        self.finish_and_judge()

    def wait_parasite_running(self, pid):
        """Until the parasite is mapped in the task and the task sleeps in it (serving
        its socket), no longer stopped by criu."""
        deadline = time.monotonic() + CRIU_TIMEOUT
        while not (any('criu-parasite' in m for m in task_maps(pid)) and
                   proc_status(pid, 'State').startswith('S')):
            if time.monotonic() > deadline:
                raise TestFailure('the parasite did not run in %d' % pid, 'dump.log')
            time.sleep(0.01)

    def run_page_server_refuses(self):
        port = self.start_page_server()
        server, self.page_server = self.page_server, None
        cmd = tuple(self.desc['ps_command']) + (1 << 8 | 1,)
        try:
            with socket.create_connection(('127.0.0.1', port)) as sk:
                sk.sendall(struct.pack('=I4xQQQ', 4, 0, 0, 1 << 8 | 1))
                sk.recv(1)
                sk.sendall(struct.pack('=I4xQQQ', cmd[0], cmd[1], 0x10000, cmd[2]) +
                           b'\0' * 4096 * cmd[1])
                code = server.wait(timeout=CRIU_TIMEOUT)
        finally:
            server.kill()
            server.wait()
        log = os.path.join('..', 'img-ps', 'page-server.log')
        if code != 1 or self.desc['expect'] not in self.last_log_error(log):
            raise TestFailure('criu page-server exited %d: %s' % (code, self.last_log_error(log)))
        self.finish_and_judge()

    def run_page_server_dump_fails(self):
        """A dump that fails for the test's own reason ('expect') once connected: the
        server exits 1 saying that the dump ended before sending every page."""
        port = self.start_page_server()
        server, self.page_server = self.page_server, None
        self.desc = dict(self.desc, dump_args=['--page-server', '--address', '127.0.0.1',
                                               '--port', str(port)])
        try:
            self.run_dump_fails()
            code = server.wait(timeout=CRIU_TIMEOUT)
        finally:
            server.kill()
            server.wait()
        log = os.path.join('..', 'img-ps', 'page-server.log')
        if code != 1 or 'before sending every page' not in self.last_log_error(log):
            raise TestFailure('criu page-server exited %d after the failed dump: %s'
                              % (code, self.last_log_error(log)))

    def run_stopped(self):
        # A task dumped while stopped (SIGSTOP) must come back stopped, then run on SIGCONT.
        pid = self.pid
        os.kill(pid, signal.SIGSTOP)
        self.wait_state(pid, 'T', 'before the dump')
        self.dump()
        self.restore(pid)
        self.wait_state(pid, 'T', 'after the restore')
        os.kill(pid, signal.SIGCONT)
        self.finish_and_judge()

    def wait_state(self, pid, state, when):
        deadline = time.monotonic() + CRIU_TIMEOUT
        while not proc_status(pid, 'State').startswith(state):
            if time.monotonic() > deadline:
                raise TestFailure('%s: pid %d is in state %r, not %s'
                                  % (when, pid, proc_status(pid, 'State'), state), 'restore.log')
            time.sleep(0.01)

    def run_sibling(self):
        # --restore-sibling: the root is created as a child of criu's parent. criu runs under
        # a shell that records the task's parent before it exits itself: without the
        # option the task would be criu's orphan, reparented to us (the subreaper) instead.
        pid = self.pid
        self.dump()
        parent_file = os.path.join(self.out, 'sibling-parent')
        script = ('"$0" restore -D "$1" -d --restore-sibling --pidfile "$2" -v4 -o restore.log'
                  ' || exit 1; echo "$$ $(awk \'/^PPid:/ {print $2}\' /proc/%d/status)" > "$3"'
                  % pid)
        result = subprocess.run(['sh', '-c', script, CRIU, self.img, self.pidfile, parent_file],
                                stdin=subprocess.DEVNULL, capture_output=True,
                                timeout=CRIU_TIMEOUT)
        if result.returncode != 0:
            raise TestFailure('criu restore --restore-sibling exited %d: %s'
                              % (result.returncode, result.stderr.decode(errors='replace')),
                              'restore.log')
        self.expect_restored_pid(pid)
        with open(parent_file) as parents:
            shell, parent = parents.read().split()
        if parent != shell:
            raise TestFailure('--restore-sibling: the task\'s parent was %s, not criu\'s parent %s'
                              % (parent, shell), 'restore.log')
        self.finish_and_judge()

    def run_leave_running(self):
        # 'frozen_cgroup': a v1 freezer cgroup frozen before the dump (a container its
        # runtime paused, as runc and containerd checkpoint one): it must be frozen after
        # the dump -R as before, then the runner thaws it
        frozen = self.desc.get('frozen_cgroup')
        if frozen:
            set_freezer(frozen, 'FROZEN')
        self.dump(['-R'] + self.desc.get('dump_args', []))
        if frozen:
            with open(os.path.join(frozen, 'freezer.state')) as f:
                state = f.read().strip()
            if state != 'FROZEN':
                raise TestFailure('%s was FROZEN before the dump -R, %s after it'
                                  % (frozen, state), 'dump.log')
            set_freezer(frozen, 'THAWED')
        self.expect_alive_untouched('after dump -R')
        self.finish_and_judge()

    def run_twice(self):
        pid = self.pid
        self.dump(self.desc.get('dump_args', []))
        checksum = images_checksum(self.img)
        for attempt in ('first', 'second'):
            self.truncate_output()
            self.restore(pid)
            self.finish_and_judge()
            if images_checksum(self.img) != checksum:
                raise TestFailure('the %s restore changed the images' % attempt, 'restore.log')

    def run_no_detach(self):
        pid = self.pid
        self.dump()
        os.unlink(self.pidfile)
        cmd = [CRIU, 'restore', '-D', self.img, '--pidfile', self.pidfile, '-v4', '-o',
               'restore.log']
        with open(os.path.join(self.out, 'criu-restore.err'), 'wb') as err:
            criu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        try:
            deadline = time.monotonic() + CRIU_TIMEOUT
            while not os.path.exists(self.pidfile):
                if criu.poll() is not None:
                    raise TestFailure('criu restore exited %d before the task was restored'
                                      % criu.returncode, 'restore.log')
                if time.monotonic() > deadline:
                    raise TestFailure('no pidfile from criu restore', 'restore.log')
                time.sleep(0.01)
            with open(self.pidfile) as pidfile:
                self.pid, self.is_child = int(pidfile.read().split()[0]), False
            if self.pid != pid:
                raise TestFailure('restored with pid %d, dumped as %d' % (self.pid, pid),
                                  'restore.log')
            if criu.poll() is not None:
                raise TestFailure('criu restore did not stay to wait for the task',
                                  'restore.log')
            os.kill(self.pid, signal.SIGTERM)
            try:
                criu.wait(EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise TestFailure('criu restore still running after the task got SIGTERM',
                                  'restore.log')
            self.pid = None
            text = self.verdict_text()
            last = text.splitlines()[-1] if text else ''
            if last != 'PASS':
                raise TestFailure(last or 'no verdict', 'restore.log')
            if criu.returncode != 0:
                raise TestFailure('criu restore exited %d after the task passed'
                                  % criu.returncode, 'restore.log')
        finally:
            if criu.poll() is None:
                criu.kill()
                criu.wait()

    def write_script(self, text):
        """{out}/script.sh, executable: the shell text after a #!/bin/sh line."""
        path = os.path.join(self.out, 'script.sh')
        with open(path, 'w') as script:
            script.write('#!/bin/sh\n' + text + '\n')
        os.chmod(path, 0o755)
        return path

    def expect_no_write_tracker(self, why):
        """No task of the tree holds a userfaultfd (pre-dump's write tracker)."""
        for pid in self.tree:
            for fd in os.listdir('/proc/%d/fd' % pid):
                try:
                    link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
                except FileNotFoundError:
                    continue
                if 'userfaultfd' in link:
                    raise TestFailure('%s: pid %d still has a userfaultfd (fd %s)'
                                      % (why, pid, fd), 'dump.log')

    def run_dump_fails(self):
        fields = {'out': self.out, 'free_port': free_tcp_port()}
        action = self.desc.get('action', 'dump')
        if 'script' in self.desc:
            self.write_script(self.desc['script'])
        if 'setup' in self.desc:
            self.desc['setup'](self.out, self.pid)
        self.tree = tree_pids(self.pid)
        tids = tree_tids(self.tree)
        extra = [a.format(**fields) for a in self.desc.get('dump_args', [])]
        code, stderr = self.criu(action, ['-t', str(self.pid), '-D', self.img] + extra,
                                 'dump.log', expect_ok=False)
        if code == 0:
            raise TestFailure('dump succeeded but must fail', 'dump.log')
        self.expect_one_error_line(stderr, 'failed dump', 'dump.log')
        if self.desc.get('expect', '').format(**fields) not in stderr:
            raise TestFailure('the error line does not say %r: %s'
                              % (self.desc['expect'].format(**fields), stderr.strip()),
                              'dump.log')
        if os.path.exists(os.path.join(self.img, 'inventory.img')):
            raise TestFailure('the failed dump left an inventory.img', 'dump.log')
        self.expect_tasks_untouched(tids, 'after the failed dump')
        self.expect_no_write_tracker('after the failed ' + action)
        self.finish_and_judge()

    def run_action_scripts(self):
        """Each stage CRIU runs scripts at, in order, with CRTOOLS_INIT_PID (none before
        restore has a tree) and CRTOOLS_IMAGE_DIR reaching the images dir."""
        pid = self.pid
        script = self.write_script(TRACE_SCRIPT.split('\n', 1)[1])
        self.dump(['--action-script', script])
        self.restore(pid, extra=['--action-script', script])
        img = os.path.realpath(self.img)
        expected = ['pre-dump %d %s ' % (pid, img), 'post-dump %d %s inventory' % (pid, img),
                    'pre-restore none %s inventory' % img] + [
                        '%s %d %s inventory' % (stage, pid, img)
                        for stage in ('setup-namespaces', 'post-setup-namespaces',
                                      'post-restore', 'pre-resume', 'post-resume')]
        with open(script + '.trace') as trace:
            got = trace.read().splitlines()
        if got != expected:
            raise TestFailure('the action script saw %r, expected %r' % (got, expected),
                              'restore.log')
        self.finish_and_judge()

    def status_fd_args(self):
        """A pipe for --status-fd: (criu's args, the read end, the write end)."""
        rd, wr = os.pipe()
        os.set_inheritable(wr, True)
        return ['--status-fd', str(wr)], rd, wr

    def run_status_fd(self):
        """--status-fd gets \0 once the dump is done, and once the restored tree runs
        while criu still waits for it (no -d)."""
        pid = self.pid
        args, rd, wr = self.status_fd_args()
        try:
            self.criu_pass_fds = (wr,)
            self.dump(args)
            self.criu_pass_fds = ()
            os.close(wr)
            if os.read(rd, 2) != b'\0':
                raise TestFailure('dump --status-fd: no \\0', 'dump.log')
        finally:
            os.close(rd)
        args, rd, wr = self.status_fd_args()
        cmd = [CRIU, 'restore', '-D', self.img, '--pidfile', self.pidfile, '-v4', '-o',
               'restore.log'] + args
        with open(os.path.join(self.out, 'criu-restore.err'), 'wb') as err:
            criu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    pass_fds=(wr,))
        os.close(wr)
        try:
            ready = os.read(rd, 2)
            self.pid, self.is_child = pid, False
            if ready != b'\0' or criu.poll() is not None:
                raise TestFailure('restore --status-fd: read %r, criu %s' % (
                    ready, 'still running' if criu.poll() is None else 'exited'),
                    'restore.log')
            os.kill(pid, signal.SIGTERM)
            criu.wait(EXIT_TIMEOUT)
            self.pid = None
            text = self.verdict_text()
            if (text.splitlines() or [''])[-1] != 'PASS' or criu.returncode != 0:
                raise TestFailure('after restore: %r, criu exited %d'
                                  % (text[-200:], criu.returncode), 'restore.log')
        finally:
            os.close(rd)
            if criu.poll() is None:
                criu.kill()
                criu.wait()

    def run_log_pid(self):
        """restore --log-pid: each restored task logs into restore.log.PID, not restore.log."""
        pid = self.pid
        self.dump()
        self.restore(pid, extra=['--log-pid'])
        with open(os.path.join(self.img, 'restore.log'), errors='replace') as log:
            shared = log.read()
        for pid in sorted(self.tree):
            path = os.path.join(self.img, 'restore.log.%d' % pid)
            if not os.path.exists(path):
                raise TestFailure('no restore.log.%d' % pid, 'restore.log')
            with open(path, errors='replace') as log:
                own = log.read()
            if '%d: restoring task %d' % (pid, pid) not in own or \
                    '%d: restoring task' % pid in shared:
                raise TestFailure('task %d did not log into restore.log.%d alone' % (pid, pid),
                                  'restore.log')
        self.finish_and_judge()

    def run_inherit_fd(self):
        """The test's stdin is a pipe the runner holds: restored with --inherit-fd, the task
        gets that very pipe back (not a new one), and the runner's writes reach it."""
        pid, (rd, wr) = self.pid, self.stdin_pipe
        ino = os.fstat(rd).st_ino
        self.dump()
        self.criu_pass_fds = (rd,)
        self.restore(pid, extra=['--inherit-fd', 'fd[%d]:pipe:[%d]' % (rd, ino)])
        self.criu_pass_fds = ()
        link = os.readlink('/proc/%d/fd/0' % pid)
        if link != 'pipe:[%d]' % ino:
            raise TestFailure('restored stdin is %s, not the inherited pipe:[%d]' % (link, ino),
                              'restore.log')
        self.finish_and_judge()

    def expect_tree_stopped(self, when):
        """Every thread of the tree stopped (T), none traced."""
        for pid, tids in tree_tids(tree_pids(self.pid)).items():
            for tid in tids:
                with open('/proc/%d/task/%d/status' % (pid, tid)) as status:
                    fields = dict(l.split(':', 1) for l in status if ':' in l)
                if (fields['State'].split()[0] != 'T' or
                        fields['TracerPid'].strip() != '0'):
                    raise TestFailure('%s: thread %d of %d is %s, TracerPid %s'
                                      % (when, tid, pid, fields['State'].strip(),
                                         fields['TracerPid'].strip()))

    def run_leave_stopped(self):
        """--leave-stopped on dump: the tree is not killed, it stays stopped; killed by
        hand (as CRIU's test driver does) and restored with --leave-stopped: stopped again
        until SIGCONT."""
        pid = self.pid
        self.dump(['--leave-stopped'] + self.desc.get('dump_args', []))
        self.expect_tree_stopped('after dump --leave-stopped')
        for task in self.tree:
            os.kill(task, signal.SIGKILL)
        self.wait_exit()
        self.wait_tree_gone('after SIGKILL')
        self.restore(pid, extra=['--leave-stopped'] + self.desc.get('restore_args', []))
        self.wait_state(pid, 'T', 'after restore --leave-stopped')
        self.expect_tree_stopped('after restore --leave-stopped')
        for task in self.tree:
            os.kill(task, signal.SIGCONT)
        self.finish_and_judge()

    def run_restore_fails(self):
        pid = self.pid
        self.dump(self.desc.get('dump_args', []))
        depth = self.desc.get('corrupt_depth', 0)
        # what 'corrupt' may return (a lock it holds) is closed once restore has failed
        held = self.desc['corrupt'](self.img, min(p for p, d in self.tree.items() if d == depth))
        self.expect_restore_fails(pid, held)

    def expect_restore_fails(self, pid, held=None):
        """Restore of the images in self.img fails with one error line saying desc's
        'expect', creates nothing that lives on and changes no image; held (what 'corrupt'
        returned) is closed once it has failed."""
        checksum = images_checksum(self.img)
        try:
            code, stderr = self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile] +
                                     list(self.desc.get('restore_args', [])), 'restore.log',
                                     expect_ok=False)
        finally:
            if held:
                held.close()
        if code == 0:
            self.pid, self.is_child = pid, False
            raise TestFailure('restore of damaged images succeeded', 'restore.log')
        self.expect_one_error_line(stderr, 'failed restore', 'restore.log')
        # a restored task's own errors go to restore.log only: its stderr is the program's
        said = stderr + ''.join(l for l in self.log_tail('restore.log', None) if 'Error' in l)
        if self.desc.get('expect', '') not in said:
            raise TestFailure('the error line does not say %r: %s' % (self.desc['expect'],
                                                                   stderr.strip()), 'restore.log')
        for tree_pid in sorted(self.tree):
            self.expect_no_process(tree_pid, 'restore.log')
        # the helper that gives a user namespace's files their owners goes too
        service = 'user namespace owner service: process '
        for line in self.log_tail('restore.log', None):
            if service in line:
                self.expect_no_process(int(line.split(service)[1]), 'restore.log')
        if images_checksum(self.img) != checksum:
            raise TestFailure('the failed restore changed the images', 'restore.log')
        if 'verify' in self.desc:
            self.desc['verify']()

    def expect_lazy_restore_fails(self, pid):
        """A restore --lazy-pages, its daemon running, fails as expect_restore_fails()
        says; the daemon, told the restore has ended, exits by itself."""
        self.start_lazy_daemon()
        try:
            self.expect_restore_fails(pid)
        finally:
            daemon, self.lazy_daemon = self.lazy_daemon, None
            try:
                daemon.wait(timeout=CRIU_TIMEOUT)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
                raise TestFailure('criu lazy-pages did not end after the failed restore',
                                  'lazy-pages.log')

    def run_pid_in_use(self):
        self.dump(['-R'])
        checksum = images_checksum(self.img)
        code, stderr = self.criu('restore', ['-D', self.img, '-d'], 'restore.log',
                                 expect_ok=False)
        if code == 0:
            raise TestFailure('restore succeeded while the pid was in use', 'restore.log')
        self.expect_one_error_line(stderr, 'failed restore', 'restore.log')
        self.expect_alive_untouched('after the refused restore')
        if images_checksum(self.img) != checksum:
            raise TestFailure('the failed restore changed the images', 'restore.log')
        self.finish_and_judge()

    def run_cli(self):
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.out)
        fields = {'out': self.out, 'free_pid': free_pid()}
        args = [a.format(**fields) for a in self.desc['args']]
        if 'rc' in self.desc:
            return self.run_cli_expect(args, fields)
        code, stderr = self.criu(args[0], args[1:], expect_ok=False)
        if code == 0:
            raise TestFailure('criu %s succeeded but must fail' % ' '.join(args))
        self.expect_one_error_line(stderr, 'criu ' + ' '.join(args))

    def run_cli_expect(self, args, fields):
        """criu with args, in the test's dir with HOME there: exit status and output
        exactly as the test says."""
        for path, text in self.desc.get('files', {}).items():
            path = os.path.join(self.out, path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(text.format(**fields))
        env = dict(os.environ, HOME=self.out)
        env.pop('CRIU_CONFIG_FILE', None)
        env.update({k: v.format(**fields) for k, v in self.desc.get('env', {}).items()})
        proc = subprocess.run([CRIU] + args, cwd=self.out, env=env, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=CRIU_TIMEOUT)
        got = (proc.returncode, proc.stdout.decode(errors='replace'),
               proc.stderr.decode(errors='replace'))
        want = (self.desc['rc'], self.desc.get('stdout', '').format(**fields),
                self.desc.get('stderr', '').format(**fields))
        if got != want:
            raise TestFailure('criu %s: exit %d, stdout %r, stderr %r; expected exit %d, '
                              'stdout %r, stderr %r' % ((' '.join(args),) + got + want))
        for name in self.desc.get('created', []):
            if not os.path.exists(os.path.join(self.out, name)):
                raise TestFailure('criu %s did not create %s' % (' '.join(args), name))

    def run_check_features(self):
        """Every feature name upstream CRIU knows gets an answer: supported (stdout "NAME
        is supported", exit 0) for the few this criu implements and this kernel has;
        else nothing on stdout, exit 1 and one warning, which -verbosity=0 (as CRIU's
        test driver asks) silences."""
        for feature in UPSTREAM_FEATURES:
            answers = []
            for verbosity in ([], ['-verbosity=0']):
                proc = subprocess.run([CRIU, 'check', '--no-default-config'] + verbosity +
                                      ['--feature', feature], capture_output=True,
                                      stdin=subprocess.DEVNULL, timeout=CRIU_TIMEOUT)
                answers.append((proc.returncode, proc.stdout.decode(),
                                proc.stderr.decode()))
            (code, out, err), quiet = answers
            supported = (code, out, err) == (0, '%s is supported\n' % feature, '')
            # a feature this criu implements may still be missing from the kernel
            why = 'kernel' if feature in IMPLEMENTED_FEATURES else 'criu'
            missing = (code == 1 and out == '' and len(err.splitlines()) == 1 and
                       err.startswith('Warn: %s is not supported by this %s' % (feature, why)))
            if not (missing or (supported and why == 'kernel')) or quiet != (code, out, ''):
                raise TestFailure('check --feature %s: %r, with -verbosity=0 %r (this criu '
                                  '%s it)' % (feature, answers[0], quiet, 'implements'
                                              if why == 'kernel' else 'does not implement'))


    # --- plugins (test/plugins) ------------------------------------------------
    def plugin_env(self, fail=None):
        self.criu_env = {'CRIU_TEST_TRACE': self.trace,
                         'CRIU_TESTDEV_ADDRS': self.pidfile + '.addrs'}
        if fail:
            self.criu_env['CRIU_TEST_FAIL'] = fail

    def take_trace(self):
        """[(pid, event)] the test_trace plugin wrote since the last call."""
        if not os.path.exists(self.trace):
            return []
        with open(self.trace) as trace:
            lines = trace.read().splitlines()
        os.unlink(self.trace)
        events = []
        for line in lines:
            pid, event = line.split(' ', 1)
            events.append((int(pid[len('pid='):]), event))
        return events

    def expect_trace(self, events, criu_expected, task_expected, what, log):
        """criu's events (pid of its INIT) and the task's, each exactly in this order."""
        criu_pid = events[0][0] if events else None
        criu_events = [e for p, e in events if p == criu_pid]
        task_events = [e for p, e in events if p == self.pid_dumped]
        stray = [(p, e) for p, e in events if p not in (criu_pid, self.pid_dumped)]
        if (criu_pid == self.pid_dumped or stray or criu_events != criu_expected or
                task_events != task_expected):
            raise TestFailure('%s: hooks ran as %r; expected criu: %r, task %d: %r' %
                              (what, events, criu_expected, self.pid_dumped, task_expected),
                              log)
        return criu_pid

    def plugin_dump(self):
        self.pid_dumped = self.pid
        self.plugin_env()
        self.dump(['-L', PLUGIN_LIB])

    def plugin_restore(self, libdir=PLUGIN_LIB):
        self.restore(self.pid_dumped, extra=['-L', libdir])

    def inventory_plugins(self):
        inventory = own_crit_entries(os.path.join(self.img, 'inventory.img'))[0]
        return inventory.get('plugins_entry', {}).get('plugins', [])

    def run_plugin_round_trip(self):
        self.plugin_dump()
        dump_trace = self.take_trace()
        self.plugin_restore()
        restore_trace = self.take_trace()
        check = self.desc.get('check')
        if check:
            getattr(self, 'check_plugin_' + check)(dump_trace, restore_trace)
        # plugin_dev's verdict: the flag RESUME_DEVICES_LATE wrote was there before the
        # task's next loop iteration, and fd 10 is the device, with its flags
        self.finish_and_judge()

    def check_plugin_hook_order(self, dump_trace, restore_trace):
        pid = self.pid_dumped
        ext = [e for _, e in dump_trace if e.startswith('DUMP_EXT_FILE')]
        # memory before files: the memfd windows' VMAs come before the device fd
        vmas = [e for _, e in dump_trace if e.startswith('HANDLE_DEVICE_VMA')]
        if len(vmas) != 2:
            raise TestFailure('dump: HANDLE_DEVICE_VMA seen %d times, expected twice'
                              % len(vmas), 'dump.log')
        self.expect_trace(dump_trace, ['INIT stage=0', 'PAUSE_DEVICES arg=%d' % pid,
                                       'CHECKPOINT_DEVICES arg=%d' % pid] + vmas + ext[:1] +
                          ['DUMP_DEVICES_LATE arg=%d' % pid, 'EXIT stage=0 ret=0'], [],
                          'dump', 'dump.log')
        if len(ext) != 1:
            raise TestFailure('dump: DUMP_EXT_FILE seen %d times, expected once' % len(ext))
        file_id = ext[0].split()[1]  # arg=ID
        # RESUME_DEVICES_LATE after the task's RESTORE_EXT_FILE: the trace's order is the
        # time order (O_APPEND writes), checked across both processes here
        events = [e for _, e in restore_trace]
        # UPDATE_VMA_MAP in the task, after its fds, once per window
        vma_maps = [e for p, e in restore_trace if p == pid and e.startswith('UPDATE_VMA_MAP')]
        self.expect_trace(restore_trace, ['INIT stage=2', 'RESTORE_INIT', 'POST_FORKING',
                                          'RESUME_DEVICES_LATE arg=%d' % pid,
                                          'EXIT stage=2 ret=0'],
                          ['RESTORE_EXT_FILE %s retry_ptr=1' % file_id] + vma_maps, 'restore',
                          'restore.log')
        if len(vma_maps) != 2:
            raise TestFailure('restore: UPDATE_VMA_MAP seen %d times in the task, expected '
                              'twice' % len(vma_maps), 'restore.log')
        if (events.index('RESTORE_EXT_FILE %s retry_ptr=1' % file_id) >
                events.index('RESUME_DEVICES_LATE arg=%d' % pid)):
            raise TestFailure('RESUME_DEVICES_LATE ran before the task opened its files: %r'
                              % restore_trace, 'restore.log')

    def check_plugin_enotsup_chain(self, dump_trace, restore_trace):
        # test_trace (first) and test_fail returned -ENOTSUP, and testdev still got it
        if not any(e.startswith('DUMP_EXT_FILE') for _, e in dump_trace):
            raise TestFailure('test_trace never saw DUMP_EXT_FILE', 'dump.log')
        if not any(p == self.pid_dumped and e.startswith('RESTORE_EXT_FILE')
                   for p, e in restore_trace):
            raise TestFailure('test_trace never saw RESTORE_EXT_FILE in the task',
                              'restore.log')
        # only the plugin that took an object is recorded as needed
        plugins = self.inventory_plugins()
        if plugins != ['testdev']:
            raise TestFailure('inventory.img names plugins %r, expected [\'testdev\']'
                              % plugins, 'dump.log')

    def check_plugin_device_vma(self, dump_trace, restore_trace):
        # the windows were handed to the plugin (path, dumped offsets in bytes), their
        # pages stayed out of the page image, and the plugin saved the object instead;
        # plugin_dev then checks bytes, sharing and maps lines itself
        path = '/memfd:testdev-vma (deleted)'
        offsets = sorted(int(e.split('pgoff=')[1]) for p, e in restore_trace
                         if p == self.pid_dumped and e.startswith('UPDATE_VMA_MAP') and
                         ('path=%s ' % path) in e)
        if offsets != [2 * 4096, 3 * 4096]:
            raise TestFailure('UPDATE_VMA_MAP got offsets %r for %s, expected [8192, 12288]'
                              % (offsets, path), 'restore.log')
        if not os.path.exists(os.path.join(self.img, 'testdev-vma.img')):
            raise TestFailure('testdev saved no testdev-vma.img', 'dump.log')
        # in mm-PID.img, as CRIU marks them: VMA_EXT_PLUGIN, shmid naming the file entry
        files = {e['id']: e.get('reg', {}).get('name') for e in
                 own_crit_entries(os.path.join(self.img, 'files.img'))}
        mm = own_crit_entries(os.path.join(self.img, 'mm-%d.img' % self.pid_dumped))[0]
        stored = [v for v in mm['vmas'] if v['status'] & VMA_EXT_PLUGIN]
        if len(stored) != 2 or not all(files.get(v['shmid']) == path for v in stored):
            raise TestFailure('mm-%d.img has %d VMA_EXT_PLUGIN VMAs naming %r, expected 2 '
                              'naming %s' % (self.pid_dumped, len(stored),
                                             [files.get(v['shmid']) for v in stored], path))

    def check_plugin_fdstore_exchange(self, dump_trace, restore_trace):
        with open(os.path.join(self.img, 'restore.log'), errors='replace') as log:
            text = log.read()
        parked = text.find('testdev: socket parked in fdstore')
        pinged = text.find('testdev: worker: task %d pinged for file' % self.pid_dumped)
        if parked < 0 or pinged < parked:
            raise TestFailure('no fdstore socket parked at init and answered by the '
                              'POST_FORKING worker for task %d' % self.pid_dumped,
                              'restore.log')

    def run_plugin_dump_fails(self):
        hook = self.desc['fail']
        self.pid_dumped = self.pid
        self.plugin_env(hook)
        code, stderr = self.criu('dump', ['-t', str(self.pid), '-D', self.img, '-L',
                                          PLUGIN_LIB], 'dump.log', expect_ok=False)
        if code == 0:
            raise TestFailure('dump succeeded but test_fail failed at ' + hook, 'dump.log')
        if 'test_fail' not in stderr:
            raise TestFailure('the error does not name the plugin: %r' % stderr[-300:],
                              'dump.log')
        if os.path.exists(os.path.join(self.img, 'inventory.img')):
            raise TestFailure('the failed dump left an inventory.img', 'dump.log')
        trace = self.take_trace()
        if not trace or not trace[-1][1].startswith('EXIT stage=0 ret=-'):
            raise TestFailure('plugins did not get exit(DUMP, error) last: %r' % trace,
                              'dump.log')
        self.expect_alive_untouched('after the failed dump')
        self.finish_and_judge()

    def run_plugin_restore_fails(self):
        self.plugin_dump()
        checksum = images_checksum(self.img)
        self.take_trace()
        self.plugin_env(self.desc.get('fail'))
        self.criu_env.update(self.desc.get('env', {}))
        code, stderr = self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile,
                                             '-L', self.desc.get('libdir', PLUGIN_LIB)],
                                 'restore.log', expect_ok=False)
        if code == 0:
            self.pid, self.is_child = self.pid_dumped, False
            raise TestFailure('restore succeeded but must fail', 'restore.log')
        # a hook that fails in the task logs to restore.log only: the task's stderr is
        # the restored program's own
        with open(os.path.join(self.img, 'restore.log'), errors='replace') as log:
            errors = [l for l in log.read().splitlines() if 'Error' in l]
        if not any(self.desc['names'] in l for l in stderr.splitlines() + errors):
            raise TestFailure('the error does not name %s: %r' % (self.desc['names'],
                                                                 stderr[-300:]),
                              'restore.log')
        self.expect_no_process(self.pid_dumped, 'restore.log')
        if images_checksum(self.img) != checksum:
            raise TestFailure('the failed restore changed the images', 'restore.log')
        trace = self.take_trace()
        if 'fail' in self.desc and (not trace or
                                    not trace[-1][1].startswith('EXIT stage=2 ret=-')):
            raise TestFailure('plugins did not get exit(RESTORE, error) last: %r' % trace,
                              'restore.log')
        # nothing the failure left behind stands in the way of a good restore
        self.plugin_env()
        self.plugin_restore()
        self.finish_and_judge()

    # --- GPU (KFD emulator + plugins/amdgpu) -----------------------------------
    def gpu_pids(self):
        """The dumped processes that hold GPU state: the root, and with 'procs' the tree."""
        return sorted(self.tree) if self.desc.get('procs', 1) > 1 else [self.pid]

    def expect_bo_path(self):
        """Every GPU process's BO contents went the way the test names: criu's worker, or
        the task itself."""
        with open(os.path.join(self.img, 'restore.log'), errors='replace') as log:
            text = log.read()
        for pid in self.gpu_pids():
            if self.desc['path'] == 'parallel':
                needle = 'amdgpu: worker: task %d: ' % pid
            else:
                needle = 'amdgpu: task %d: ' % pid
            lines = [l for l in text.splitlines() if needle in l and 'BOs (' in l]
            if len(lines) != 1 or ('serial' in lines[0]) != (self.desc['path'] == 'serial'):
                raise TestFailure('BO contents of task %d were not restored on the %s path: %r'
                                  % (pid, self.desc['path'], lines), 'restore.log')
        self.expect_path_choice(text)

    def expect_path_choice(self, log_text):
        """criu's plugin init chose the path for the expected reason, and said so."""
        if self.desc['path'] == 'parallel':
            expected = 'amdgpu: BO worker started'
        else:
            expected = ('amdgpu: BO contents restored in the tasks (serial): '
                        'AMDGPU_PARALLEL_RESTORE=0')
        choices = [l for l in log_text.splitlines()
                   if 'amdgpu: BO worker started' in l or 'amdgpu: BO contents restored in' in l]
        if len(choices) != 1 or expected not in choices[0]:
            raise TestFailure('restore chose %r, expected "%s"' % (choices, expected),
                              'restore.log')

    def expect_ns_tree_restored(self):
        """Every process of the dumped tree is back at its depth, with its pid inside its
        pid namespace (the runner sees them under other pids)."""
        restored = ns_tree(tree_pids(self.pid))
        if restored != self.ns_tree:
            raise TestFailure('restored tree %r (pids in its namespace), dumped %r'
                              % (restored, self.ns_tree), 'restore.log')

    def expect_tree_restored(self):
        """Every process of the dumped tree is back, with its pid, at its depth."""
        if self.desc.get('pidns'):
            return self.expect_ns_tree_restored()
        restored = tree_pids(self.pid)
        if restored != self.tree:
            raise TestFailure('restored tree %r, dumped %r' % (restored, self.tree),
                              'restore.log')

    def move_to_restore_machine(self):
        """'restore_gpus': the images go to a machine with other GPUs (a second emulator
        on the same socket, with a fresh topology)."""
        if 'restore_gpus' in self.desc:
            self.stop_emulator()
            self.start_emulator(self.desc['restore_gpus'])

    def run_gpu(self):
        pid = self.pid
        self.dump(['-L', AMDGPU_PLUGIN_DIR])
        self.move_to_restore_machine()
        self.restore(pid, extra=['-L', AMDGPU_PLUGIN_DIR])
        self.expect_bo_path()
        self.expect_tree_restored()
        self.finish_and_judge()

    def gpu_restore_must_fail(self, pid, plugin_dir):
        """A restore that fails naming the cause, leaving no process, nothing in the
        emulator, and the images as they were."""
        checksum = images_checksum(self.img)
        fault = self.desc.get('fault', '')
        if fault.endswith(':CHILD'):
            fault = fault.replace('CHILD', str(max(p for p in self.tree if p != pid)))
        if fault:
            self.criu_env['AMDGPU_PLUGIN_TEST_FAULT'] = fault
        code, stderr = self.criu('restore', ['-D', self.img, '-d', '--pidfile', self.pidfile,
                                             '-L', plugin_dir], 'restore.log', expect_ok=False)
        self.criu_env.pop('AMDGPU_PLUGIN_TEST_FAULT', None)
        if code == 0:
            self.pid, self.is_child = pid, False
            raise TestFailure('restore succeeded but must fail', 'restore.log')
        # the cause, from the task (log only) or criu's worker (log and stderr)
        with open(os.path.join(self.img, 'restore.log'), errors='replace') as log:
            lines = [l for l in log.read().splitlines() if 'Error' in l or 'Warn' in l]
        if not any(self.desc['names'] in l for l in lines + stderr.splitlines()):
            raise TestFailure('nothing says "%s": %r' % (self.desc['names'], lines[-3:]),
                              'restore.log')
        for tree_pid in self.tree:
            self.expect_no_process(tree_pid, 'restore.log')
        self.expect_emulator_empty('restore.log')
        if images_checksum(self.img) != checksum:
            raise TestFailure('the failed restore changed the images', 'restore.log')

    def run_gpu_restore_fails(self):
        pid = self.pid
        self.dump(['-L', AMDGPU_PLUGIN_DIR])
        if 'corrupt' in self.desc:
            self.desc['corrupt'](self.img, pid)
        self.move_to_restore_machine()
        self.gpu_restore_must_fail(pid, AMDGPU_PLUGIN_DIR)
        if 'fault' not in self.desc:
            return
        # nothing the failure left (emulator state, worker, sockets) stands in the way
        self.restore(pid, extra=['-L', AMDGPU_PLUGIN_DIR])
        self.expect_bo_path()
        self.expect_tree_restored()
        self.finish_and_judge()

    def run_gpu_production_plugin(self):
        """The plugin make install ships has no emulator client and no test hooks, and
        refuses the emulator's images with one clear line."""
        so = os.path.join(AMDGPU_PROD_PLUGIN_DIR, 'amdgpu_plugin.so')
        with open(so, 'rb') as plugin:
            blob = plugin.read()
        for marker in (b'kfdemu_', b'/memfd:kfdemu', b'AMDGPU_PLUGIN_TEST_FAULT',
                       b'task-dies-mid-command'):
            if marker in blob:
                raise TestFailure('%s contains %r: test code in the production build'
                                  % (so, marker.decode()))
        pid = self.pid
        self.dump(['-L', AMDGPU_PLUGIN_DIR])
        self.gpu_restore_must_fail(pid, AMDGPU_PROD_PLUGIN_DIR)


def run_one(name, use_criu):
    test = TestRun(name, dict(TESTS[name]), use_criu)
    try:
        test.run()
    except TestFailure as failure:
        print('FAIL %s: %s' % (name, failure))
        for line in test.log_tail(failure.log) if failure.log else []:
            print('    | ' + line)
        return False
    except OSError as err:
        # e.g. criu said it restored but wrote no pidfile: a failure of this test only
        print('FAIL %s: %s' % (name, err))
        return False
    finally:
        test.kill_leftovers()
        reap_orphans()
        if 'cleanup' in test.desc:
            test.desc['cleanup']()
    print('PASS %s' % name)
    return True


def own_crit_sweep(names):
    """Our crit decodes every image of the given tests' dumps, encodes each back to its
    bytes (plain and --pretty) and explores each dump (x ps/fds/mems/rss), in one run of
    its test script."""
    dirs = [d for d in (os.path.join(OUT_DIR, n, 'img') for n in names) if os.path.isdir(d)]
    proc = subprocess.run([os.path.join(TEST_DIR, 'crit', 'run.py'), '--quick'] + dirs,
                          capture_output=True, text=True, errors='replace')
    failures = [l for l in proc.stdout.splitlines() if l.startswith('FAIL')]
    if proc.returncode == 0:
        print('PASS crit_own_sweep (%d dumps)' % len(dirs))
        return True
    print('FAIL crit_own_sweep: %s' % (failures[0] if failures else proc.stderr.strip()[-300:]))
    return False


def main():
    parser = argparse.ArgumentParser(description='Run zdtm tests against criu/criu.')
    parser.add_argument('action', choices=['run', 'list'])
    parser.add_argument('-t', '--test', action='append', default=[],
                        help='run this test (repeatable)')
    parser.add_argument('-a', '--all', action='store_true', help='run every test')
    parser.add_argument('--no-criu', action='store_true',
                        help='only start, signal and judge the tests (checks the tests)')
    parser.add_argument('--lazy-pages', action='store_true',
                        help='restore lazily: criu lazy-pages serves the memory')
    args = parser.parse_args()
    global LAZY_ALL
    LAZY_ALL = args.lazy_pages

    if args.action == 'list':
        print('\n'.join(TESTS))
        return 0
    names = list(TESTS) if args.all else args.test
    unknown = [n for n in names if n not in TESTS]
    if unknown or not names:
        parser.error('unknown test(s): %s' % ' '.join(unknown) if unknown
                     else 'give -t NAME or --all')
    if args.no_criu:
        names = [n for n in names if TESTS[n].get('mode', 'default') not in NO_PROCESS_MODES]
    # In a pid namespace whose process group leader is outside it (the group reads 0), the
    # tests could not name the runner's group (file_fown_outside_group): lead one here.
    if os.getpgrp() == 0:
        os.setpgid(0, 0)
    have_flags = cpu_flags()
    for name in [n for n in names if not set(TESTS[n].get('cpu_flags', [])) <= have_flags]:
        print('not run (this CPU lacks %s): %s' % (' '.join(TESTS[name]['cpu_flags']), name))
        names.remove(name)
    missing = {feature for feature, probe in KERNEL_PROBES.items() if not probe()}
    for name in [n for n in names if missing & set(TESTS[n].get('kernel', []))]:
        print('not run (this kernel lacks %s): %s'
              % (' '.join(sorted(missing & set(TESTS[name]['kernel']))), name))
        names.remove(name)

    # without the reference next to the repository the cross tests cannot run: skipped
    cross = [n for n in names
             if n.startswith('cross_') or TESTS[n].get('mode', '').startswith('cross_')]
    skipped = 0
    if cross and not os.access(UPSTREAM_CRIU, os.X_OK):
        names = [n for n in names if n not in cross]
        skipped = len(cross)

    # restored tasks are reparented to the nearest subreaper when criu -d exits
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        print('prctl(PR_SET_CHILD_SUBREAPER): %s' % os.strerror(ctypes.get_errno()))
        return 1
    # Ctrl-C and SIGTERM unwind through run_one's cleanup
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    passed = failed = 0
    try:
        # every dump's images go through Debian's crit: without it nothing can pass
        if not args.no_criu and any(TESTS[n].get('mode', 'default') not in NO_PROCESS_MODES
                                    for n in names):
            try:
                CRIT.start()
            except SetupError as err:
                print('setup error: %s' % err)
                failed, names = len(names), []
        clean_dumps = []
        for name in names:
            if run_one(name, not args.no_criu):
                passed += 1
                if 'fail' not in TESTS[name].get('mode', 'default'):
                    clean_dumps.append(name)
            else:
                failed += 1
            sys.stdout.flush()
        if args.all and not args.no_criu:
            if own_crit_sweep(clean_dumps):
                passed += 1
            else:
                failed += 1
    finally:
        CRIT.close()
    if skipped:
        print('%d skipped (the reference %s is absent: cross tests not run)'
              % (skipped, os.path.relpath(UPSTREAM_CRIU, ROOT_DIR)))
    print('%d passed, %d failed' % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    if sys.argv[1:] == ['--crit-helper']:
        sys.exit(crit_helper())
    sys.exit(main())
