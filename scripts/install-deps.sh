#!/bin/sh
# Installs the Debian 12 packages the build, the tests and the benchmarks need.
# Idempotent: only missing packages are installed. Needs root.
set -e
PKGS="build-essential pkg-config protobuf-c-compiler libprotobuf-c-dev libnl-3-dev libcap-dev
libbsd-dev libdrm-dev python3 binutils"
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
