#!/bin/sh
# Is what a make goal needs installed? The top Makefile runs this before it builds anything,
# so that a fresh machine gets one line naming what is missing and the command that installs
# it, not the first tool's "No such file or directory" halfway through the build.
#
#   scripts/check-deps.sh GROUP...   GROUP: build man crit fuzz apps runtimes test upstream
#                                    deb, or all
#
# Prints nothing and exits 0 when everything is there; else prints one line on stdout,
# "missing WHAT (DEBIAN PACKAGE), ...: run scripts/install-deps.sh (as root)", and exits 1.
# The tools the Makefile names by variable are taken from the environment: CC, LD, OBJCOPY,
# PROTOC_C, PROTOC, ASCIIDOCTOR (the first word of each, a wrapper's arguments ignored).
# Read-only and quick (no compiler run): the Makefile asks it on every build.

missing=""

# Each name once, though two groups may ask for it (objcopy and ld, python3).
need() { # WHAT PACKAGE
	case ", $missing, " in
	*", $1 ($2), "*) return ;;
	esac
	missing="$missing${missing:+, }$1 ($2)"
}

# A command on PATH, or in an sbin directory a non-root PATH may lack (ip, iptables, nft).
tool() { # COMMAND PACKAGE
	set -- "${1%% *}" "$2"
	command -v "$1" >/dev/null 2>&1 && return
	case "$1" in
	*/*) ;;
	*) [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] && return ;;
	esac
	need "$1" "$2"
}

# A library's pkg-config module. Without pkg-config (reported by the build group) the
# modules cannot be asked; install-deps.sh brings them with it.
module() { # MODULE PACKAGE
	command -v pkg-config >/dev/null 2>&1 || return
	pkg-config --exists "$1" || need "$1" "$2"
}

build() {
	tool "${CC:-cc}" build-essential
	tool "${LD:-ld}" binutils
	tool "${OBJCOPY:-objcopy}" binutils
	tool "${PROTOC_C:-protoc-c}" protobuf-c-compiler
	# crit's Python modules are generated from images/*.proto.
	tool "${PROTOC:-protoc}" protobuf-compiler
	tool pkg-config pkg-config
	module libprotobuf-c libprotobuf-c-dev
	module libdrm_amdgpu libdrm-dev
}

# The man pages (make man, install, deb); criu(8) is checked against criu --help by a
# Python script first.
man() {
	tool "${ASCIIDOCTOR:-asciidoctor}" asciidoctor
	tool python3 python3
}

# crit runs under /usr/bin/python3 (its #! line), with Debian's protobuf module.
crit() {
	if [ ! -x /usr/bin/python3 ]; then
		need /usr/bin/python3 python3
	elif ! /usr/bin/python3 -c 'import google.protobuf' >/dev/null 2>&1; then
		need "python3's google.protobuf" python3-protobuf
	fi
}

# test/fuzz: clang with its libFuzzer runtime, which clang only recommends. clang prints a
# runtime's bare name when it has none.
fuzz() {
	if ! command -v clang >/dev/null 2>&1; then
		need clang clang
		return
	fi
	case "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" in
	/*) ;;
	*) need "clang's libFuzzer" libclang-rt-dev ;;
	esac
}

# make realapps (test/realapps/run.sh): the real programs dumped and restored.
apps() {
	tool redis-server redis-server
	tool tmux tmux
	tool ping iputils-ping
}

# make test besides the above: the network tools criu runs on dump and restore, and
# Debian's crit, which test/zdtm.py decodes every dump's images with.
test_tools() {
	tool ip iproute2
	tool iptables iptables
	tool nft nftables
	[ -x /usr/bin/crit ] || need /usr/bin/crit criu
}

# Upstream CRIU's zdtm tests (test/upstream-zdtm) link these.
upstream() {
	module libnl-3.0 libnl-3-dev
	module libnl-route-3.0 libnl-route-3-dev
	module libcap libcap-dev
	module libbsd libbsd-dev
}

# make runtimes (test/runtimes/): the container runtimes that drive criu, the busybox their
# containers run, zstd for podman's checkpoint archives, python3 for the tests' helpers.
runtimes() {
	tool lxc-checkpoint lxc
	tool runc runc
	tool containerd containerd
	tool ctr containerd
	tool podman podman
	tool zstd zstd
	tool python3 python3
	[ -x /bin/busybox ] || need /bin/busybox busybox-static
}

# make deb and test/pkg: the Debian packages built and linted.
deb() {
	tool dpkg-buildpackage dpkg-dev
	tool dh debhelper
	tool lintian lintian
}

if [ $# -eq 0 ]; then
	echo "usage: check-deps.sh GROUP..." \
		"(build man crit fuzz apps runtimes test upstream deb all)" >&2
	exit 2
fi
for group; do
	case "$group" in
	build | man | crit | fuzz | apps | runtimes | upstream | deb) "$group" ;;
	test) test_tools ;;
	all) build; man; crit; fuzz; apps; runtimes; test_tools; upstream; deb ;;
	*) echo "check-deps.sh: unknown group $group" >&2; exit 2 ;;
	esac
done
if [ -n "$missing" ]; then
	echo "missing $missing: run scripts/install-deps.sh (as root)"
	exit 1
fi
exit 0
