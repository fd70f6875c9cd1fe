#!/bin/sh
# Bundle ./memleak-ai with the shared libraries it links, for a GPU machine that lacks them (scripts/gpu-validate.sh
# uses build/gpu-bundle/lib when present). glibc's and the C++ runtime's libraries stay out: the machine's are used
# (its own programs, protoc among them, need its newer libstdc++), so the bundle needs a glibc and a libstdc++ at
# least as new as this one's (2.36, GCC 12). About 36 libraries, 20 MiB.
set -eu
cd "$(dirname "$0")/.."
[ -x ./memleak-ai ] || { echo "gpu-bundle: build ./memleak-ai first (make)" >&2; exit 1; }
out=build/gpu-bundle/lib
rm -rf build/gpu-bundle && mkdir -p "$out"
ldd ./memleak-ai | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
	case $(basename "$lib") in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux* | \
	libstdc++.so.* | libgcc_s.so.*) ;;
	*) cp -L "$lib" "$out/" ;;
	esac
done
echo "gpu-bundle: $(ls "$out" | wc -l) libraries, $(du -sm build/gpu-bundle | cut -f1) MiB in $out"
