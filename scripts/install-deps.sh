#!/bin/sh
# Installs every build and test dependency from Debian's packages; does nothing when all are present.
set -e
PKGS="make gcc g++ clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev pkg-config libc6-dev
python3 util-linux procps binutils gdb libc6-dbg systemtap-sdt-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
chromium chromium-driver python3-selenium libjs-chart.js python3-torch python3.11-venv libjemalloc2 libtcmalloc-minimal4
libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev prometheus heaptrack clang-format"
# Everything comes from Debian's packages: the HTML report's chart library (libjs-chart.js) is inlined at build time,
# and the browser test drives Debian's chromium through chromium-driver. PyPI's torch is scripts/make-venv.sh's.
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
