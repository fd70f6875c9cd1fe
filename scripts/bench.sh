#!/bin/sh
# Builds the benchmark programs and runs the side-by-side overhead and report-time benchmarks (see docs/BENCHMARKS.md).
set -eu
cd "$(dirname "$0")/.."
B=build/bench
mkdir -p $B
CLANG=${CLANG:-clang}
SYS_INC=$($CLANG -v -E - </dev/null 2>&1 | sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }')
$CLANG -g -O2 -target bpf -D__TARGET_ARCH_x86 -Ivmlinux $SYS_INC -c tests/bench/empty.bpf.c -o $B/empty.tmp.bpf.o
bpftool gen object $B/empty.bpf.o $B/empty.tmp.bpf.o
bpftool gen skeleton $B/empty.bpf.o name empty_bpf > $B/empty.skel.h
# Every module but main.c, as run-tests.sh links the unit tests: a list by hand fell behind verdict.c's calls.
OBJS="$(for f in user/*/*.c; do f=${f#user/}; printf 'build/%s.o ' "${f%.c}"; done)build/profile.pb-c.o build/html_assets.o"
LIBS="-lbpf -lelf -ldw -lz -lstdc++ -lm -lprotobuf-c -lmicrohttpd -lcurl -ljansson -lpthread"
gcc -g -O2 -I$B -Ibuild -Iuser -Ibpf tests/bench/floor.c $OBJS $LIBS -o $B/floor
gcc -g -O2 -Ibuild -Iuser -Ibpf tests/bench/report_bench.c $OBJS $LIBS -o $B/report_bench
gcc -g -O2 tests/bench/mallocbench.c -o $B/mallocbench
gcc -g -O2 tests/bench/costbench.c -o $B/costbench
gcc -g -O2 -fomit-frame-pointer tests/bench/deepbench.c -o $B/deepbench-nofp
gcc -g -O2 -fno-omit-frame-pointer tests/bench/deepbench.c -o $B/deepbench-fp
gcc -g -O2 tests/bench/three_leaks.c -o $B/three_leaks
gcc -g -O2 tests/fixtures/sampled_leak.c -o $B/sampled_leak
# libbpf-tools memleak, the reference the peers and default benchmarks run beside memleak-ai, from a bcc checkout
# (BENCH_BCC_SRC) with this machine's libbpf, bpftool and kernel BTF; BENCH_MEMLEAK_BPFTOOLS names it unless set.
if [ -n "${BENCH_BCC_SRC:-}" ] && [ -z "${BENCH_MEMLEAK_BPFTOOLS:-}" ]; then
	T=${BENCH_BCC_SRC%/}/libbpf-tools
	[ -f "$T/memleak.bpf.c" ] || { echo "bench.sh: no libbpf-tools/memleak.bpf.c in BENCH_BCC_SRC=$BENCH_BCC_SRC" >&2; exit 2; }
	mkdir -p $B/bpftools
	bpftool btf dump file /sys/kernel/btf/vmlinux format c >$B/bpftools/vmlinux.h
	$CLANG -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$B/bpftools -I"$T" $SYS_INC -include tests/bench/bpftools_compat.h \
		-c "$T/memleak.bpf.c" -o $B/bpftools/memleak.bpf.o
	bpftool gen skeleton $B/bpftools/memleak.bpf.o name memleak_bpf >$B/bpftools/memleak.skel.h
	gcc -g -O2 -I$B/bpftools -I"$T" "$T/memleak.c" "$T/trace_helpers.c" "$T/uprobe_helpers.c" -lbpf -lelf -lz \
		-o $B/bpftools-memleak
	BENCH_MEMLEAK_BPFTOOLS=$PWD/$B/bpftools-memleak
	export BENCH_MEMLEAK_BPFTOOLS
fi
# The peers benchmark's Memray (tests/bench/requirements.txt), into the venv of PyPI's torch when missing.
VENV=build/venv/3.12
case " $* " in *" peers "*)
	if [ -x $VENV/bin/python ] && ! cmp -s tests/bench/requirements.txt $VENV/bench-requirements.txt; then
		$VENV/bin/python -m pip install -q --disable-pip-version-check -r tests/bench/requirements.txt &&
			cp tests/bench/requirements.txt $VENV/bench-requirements.txt
	fi ;;
esac
exec python3 scripts/bench.py "$@"
