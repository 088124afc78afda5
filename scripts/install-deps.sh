#!/bin/sh
# Installs the Debian 12 packages the build, the tests and the benchmarks need.
# Idempotent: only missing packages are installed. Needs root.
set -e
PKGS="build-essential pkg-config protobuf-c-compiler libprotobuf-c-dev libnl-3-dev libcap-dev
libbsd-dev libdrm-dev python3 binutils protobuf-compiler python3-protobuf"
# A tree with a net namespace of its own: its addresses, routes and rules are saved and
# restored with iproute2's `ip ... save/restore` (criu/kinds/net-tables.c), as CRIU does.
PKGS="$PKGS iproute2"
# Upstream zdtm's netns_sub_veth (test/upstream-zdtm) links libnl-route.
PKGS="$PKGS libnl-route-3-dev"
# The network lock (--network-lock iptables, the default): iptables rules hold a TCP
# connection whose peer is outside the dumped tree (criu/kinds/sk-tcp.c).
PKGS="$PKGS iptables"
# nftables of a tree's net namespace (criu/kinds/net-nft.c) and --network-lock nftables
# (criu/kinds/netlock-nft.c) run nft, as the tables' and routes' tools are run.
PKGS="$PKGS nftables"
# The fuzz smoke of make test (test/fuzz): clang, and its libFuzzer and sanitizer runtimes,
# which clang only recommends.
PKGS="$PKGS clang libclang-rt-dev"
# Debian's criu: test/zdtm.py decodes every dump's images with its crit (/usr/bin/crit,
# python3 pycriu). Its /usr/sbin/criu is never run: the tests run criu/criu by path.
PKGS="$PKGS criu"
# make realapps (test/realapps/): real programs dumped and restored. The tests start their
# own redis-server on a Unix socket; the one the package starts as a service (where systemd
# runs) is never used.
PKGS="$PKGS redis-server tmux iputils-ping"
# make install renders the man pages with asciidoctor; make deb and test/pkg build the
# Debian packages (debhelper) and check them with lintian.
PKGS="$PKGS asciidoctor debhelper lintian"
# make runtimes (test/runtimes/lxc.sh): LXC's lxc-checkpoint drives criu; its busybox
# template builds the container's root from busybox-static.
PKGS="$PKGS lxc busybox-static"
# make runtimes (runc.sh, containerd.sh, podman.sh): the runtimes that drive criu over its
# RPC; podman's checkpoint archives are zstd (the test lists them with tar).
PKGS="$PKGS runc containerd podman zstd"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-deps: installing$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
else
	echo "install-deps: all packages present"
fi
# The reference the cross tests run (test/zdtm.py), where a checkout has it next to the
# repository: its own runtime libraries.
UPSTREAM="$(dirname "$0")/../../shared/upstream-criu"
if [ -x "$UPSTREAM/install-deps" ]; then
	"$UPSTREAM/install-deps"
fi
