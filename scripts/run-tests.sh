#!/bin/sh
# Builds the fixtures and unit tests, runs every test, and ends with one "N passed, N failed" summary line.
# Independent work runs TEST_JOBS at a time (default 3): builds, unit tests, fuzzers, and the test files of both
# integration passes and the workloads, whose tests wait on their targets far more than they compute (one alone
# left 59 % of two CPUs idle; the suite took 18.9 min with three, 21.2 with two). Each job's
# output is held back and printed whole, after a "# NAME (SECONDS s)" line, when it ends. The tests whose outcome
# rests on the share of the machine they get (@alone in tests/integration/harness.py: the tool's measure of its own
# cost share, the workloads at default settings, a DataLoader whose workers may outrun its main process)
# run last, apart from the others' files, one file at a time (the workloads' two halves at once on an idle machine;
# on an idle machine, six files' ASan passes run one after another beside the C targets' files there).
set -u
cd "$(dirname "$0")/.."
B=build/tests
mkdir -p "$B"
CC=${CC:-gcc}
J=${TEST_JOBS:-3}
case $J in '' | *[!0-9]* | 0*) echo "run-tests.sh: TEST_JOBS must be a whole number from 1 up, not '$J'" >&2; exit 2 ;; esac
# Every module but main.c, as the Makefile builds them
OBJS="$(for f in user/*/*.c; do f=${f#user/}; printf 'build/%s.o ' "${f%.c}"; done)build/profile.pb-c.o build/html_assets.o"
LIBS="-lbpf -lelf -ldw -lz -lstdc++ -lm -lprotobuf-c -lmicrohttpd -lcurl -ljansson -lpthread"
build() {
	echo "  BUILD    $1" >&2
	shift
	"$@" || { echo "build failed: $*" >&2; exit 1; }
}

passed=0
failed=0
skipped=0
# Each runner prints "... N passed, M failed" (", K skipped" when some could not run here) as its last line; add
# them up.
tally() {
	line=$(tail -n 1 "$1")
	p=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) failed.*/\1/p')
	s=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) skipped.*/\1/p')
	if [ -z "$p" ] || [ -z "$f" ]; then
		echo "not ok - $2 ended without a summary" >&2
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + ${s:-0}))
}

# The job pool: `job NAME KIND CMD...` runs CMD in the background with its output in a file, at most $J at once;
# as each one ends (its status and name come back through a FIFO), `done_KIND STATUS NAME LOG SECONDS` takes it.
P=$(mktemp -d)
mkfifo "$P/fifo"
exec 3<>"$P/fifo"
trap 'rm -rf "$P"' EXIT
running=0
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Their variables are job_* and reap_*: the callers' own (entry's kind, t, shard, py) stay as they were.
job() {
	while [ "$running" -ge "$J" ]; do reap; done
	job_name=$1 job_kind=$2
	shift 2
	job_n=$(echo "$job_name" | tr -c 'A-Za-z0-9_.\n-' _)
	# CMD in a subshell of its own: one that exits (build's failure) still has its status reported, not awaited forever.
	( t0=$(now_ms); ("$@") >"$P/$job_n.log" 2>&1 3>&-; rc=$?
	  echo "$rc $(($(now_ms) - t0)) $job_kind $job_n $job_name" >&3 ) &
	running=$((running + 1))
}
reap() {
	read -r reap_rc reap_ms reap_kind reap_n reap_name <&3
	running=$((running - 1))
	"done_$reap_kind" "$reap_rc" "$reap_name" "$P/$reap_n.log" "$((reap_ms / 1000)).$((reap_ms % 1000 / 100))"
}
drain() {
	while [ "$running" -gt 0 ]; do reap; done
}
done_build() {
	cat "$3" >&2
	[ "$1" -eq 0 ] || { drain; exit 1; }
}
done_test() {
	echo "# $2 ($4 s)"
	cat "$3"
	tally "$3" "$2"
}

fixtures() {
	build leaky $CC -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -pthread tests/fixtures/leaky.c -o $B/leaky
	build leaky-static $CC -g -O2 -static -fno-optimize-sibling-calls -pthread tests/fixtures/leaky.c -o $B/leaky-static
	build demo_trainer $CC -g -O2 tests/fixtures/demo_trainer.c -o $B/demo_trainer
	build family $CC -g -O2 tests/fixtures/family.c -o $B/family
	build oom_leak $CC -g -O2 tests/fixtures/oom_leak.c -o $B/oom_leak
	build pages $CC -g -O2 tests/fixtures/pages.c -o $B/pages
	build fragheap $CC -g -O2 tests/fixtures/fragheap.c -o $B/fragheap
	build hostile $CC -g -O2 tests/fixtures/hostile.c -o $B/hostile
	build arenaheap $CC -g -O2 -pthread tests/fixtures/arenaheap.c -o $B/arenaheap
	build history $CC -g -O2 -fomit-frame-pointer tests/fixtures/history.c -o $B/history
	build hot_loop $CC -g -O2 tests/fixtures/hot_loop.c -o $B/hot_loop
	build sampled_leak $CC -g -O2 tests/fixtures/sampled_leak.c -o $B/sampled_leak
	build soak $CC -g -O2 -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread tests/fixtures/soak.c -o $B/soak
	# Native unwinding without frame pointers: a C++ program and a shared library built as distributions build
	build unwind sh -c "$CC -g -O2 -fomit-frame-pointer -shared -fPIC tests/fixtures/unwind_lib.c -o $B/libunwind_fix.so &&
		g++ -g -O2 -fomit-frame-pointer tests/fixtures/unwind.cpp $B/libunwind_fix.so -Wl,-rpath,'\$ORIGIN' -o $B/unwind"
	# The same library with its call frame information in .debug_frame only (no .eh_frame entries)
	build unwind-df sh -c "mkdir -p $B/unwind-df && cp $B/unwind $B/unwind-df/ && $CC -g -O2 -fomit-frame-pointer \
		-fno-asynchronous-unwind-tables -fno-unwind-tables -shared -fPIC tests/fixtures/unwind_lib.c -o $B/unwind-df/libunwind_fix.so"
	build leaky-static-stripped sh -c "cp $B/leaky-static $B/leaky-static-stripped && strip -s $B/leaky-static-stripped"
	G=$B/gpu
	mkdir -p $G
	# Stand-ins for the CUDA driver, runtime and PyTorch's libc10_cuda.so: this machine has no GPU.
	build libcuda.so.1 $CC -g -O2 -shared -fPIC tests/fixtures/gpu/fake_cuda.c -Wl,-soname,libcuda.so.1 -o $G/libcuda.so.1
	build libcudart.so.13 $CC -g -O2 -shared -fPIC tests/fixtures/gpu/fake_cudart.c -Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=tests/fixtures/gpu/fake_cudart.map $G/libcuda.so.1 -Wl,-rpath,'$ORIGIN' -o $G/libcudart.so.13
	build libc10_cuda.so g++ -g -O2 -shared -fPIC -fvisibility=hidden tests/fixtures/gpu/fake_c10_cuda.cpp \
		$G/libcudart.so.13 -Wl,-rpath,'$ORIGIN' -o $G/libc10_cuda.so
	# A PyTorch build whose .symtab was stripped: USDT notes stay, raw_alloc & co. are gone.
	build gpu-stripped sh -c "mkdir -p $B/gpu-stripped && cp $G/libcuda.so.1 $G/libcudart.so.13 $B/gpu-stripped/ &&
		cp $G/libc10_cuda.so $B/gpu-stripped/ && strip --strip-all $B/gpu-stripped/libc10_cuda.so"
	build libtorchext.so $CC -g -O2 -shared -fPIC -DCUDART_STATIC tests/fixtures/gpu/fake_cudart.c $G/libcuda.so.1 \
		-Wl,-rpath,'$ORIGIN' -o $G/libtorchext.so
	build ext_app $CC -g -O2 tests/fixtures/gpu/ext_app.c $G/libtorchext.so -Wl,-rpath,'$ORIGIN' -o $G/ext_app
	build early_app $CC -g -O2 tests/fixtures/gpu/early_app.c $G/libcudart.so.13 -Wl,-rpath,'$ORIGIN' -o $G/early_app
	build gpu_app $CC -g -O2 tests/fixtures/gpu/gpu_app.c -ldl -o $G/gpu_app
	build dlopen_burst $CC -g -O2 tests/fixtures/gpu/dlopen_burst.c -ldl -o $G/dlopen_burst
	CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
	if [ -e "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
		build cuda_real $CC -g -O2 -I$CUDA_HOME/include tests/fixtures/gpu/cuda_real.c -L$CUDA_HOME/lib64 -lcudart \
			-Wl,-rpath,$CUDA_HOME/lib64 -o $G/cuda_real
	fi
}
# Fuzz the parsers of what comes from the target (maps text, ELF files), and of the files diff reads, for a bounded time: a crash, a leak or
# undefined behaviour fails the run. New inputs go to a scratch corpus, the checked-in seeds stay as they are.
fuzz() {
	f=$1
	build fuzz_$f clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iuser -Ibpf -Ibuild tests/fuzz/fuzz_$f.c \
		$(case $f in maps) echo user/lib/procmaps.c ;; pyline) echo user/python/pyline.c ;; ehframe) echo "user/unwind/ehframe.c user/unwind/cfi.c user/lib/elfsym.c -lelf" ;;
		heapfrag) echo "user/collect/heapfrag.c user/collect/census.c user/collect/pyheap.c user/lib/procmaps.c" \
			"user/lib/procmem.c user/lib/elfsym.c user/lib/demangle.c user/lib/log.c user/lib/u64map.c -lelf -lstdc++" ;;
		pyheap) echo "user/collect/pyheap.c user/collect/census.c user/lib/procmaps.c user/lib/procmem.c" \
			"user/lib/elfsym.c user/lib/demangle.c user/lib/log.c user/lib/u64map.c -lelf -lstdc++" ;;
		diff) echo "user/diff/diffrun.c user/diff/jsonin.c user/diff/pprofin.c user/diff/compare.c user/diff/diffview.c" \
			"user/diff/diffhtml.c user/lib/frameclass.c user/report/format.c user/report/json.c build/profile.pb-c.c" \
			"-ljansson -lprotobuf-c -lz -lm" ;;
		pyframes) echo "user/python/pyframes.c user/python/pycode.c user/python/pyoffsets.c user/python/pyline.c user/report/format.c" \
			"user/lib/procmaps.c user/lib/procmem.c user/lib/elfsym.c user/lib/demangle.c user/lib/log.c user/lib/u64map.c -lbpf -lelf -lstdc++" ;;
		*) echo "user/lib/elfsym.c user/lib/elfsites.c -lelf" ;; esac) \
		-o $B/fuzz_$f 2>&1
	scratch=$(mktemp -d)
	if $B/fuzz_$f -max_total_time=${FUZZ_SECONDS:-5} -max_len=65536 -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch" \
		tests/fuzz/corpus/$f >"$scratch.log" 2>&1; then
		echo "ok - fuzz_$f: $(grep -o 'Done [0-9]* runs' "$scratch.log")"
		echo "fuzz $f: 1 passed, 0 failed"
	else
		tail -n 30 "$scratch.log"
		echo "not ok - fuzz_$f crashed (input kept in $scratch)"
		echo "fuzz $f: 0 passed, 1 failed"
	fi
	rm -f "$scratch.log"
}
FUZZERS="maps elf pyline ehframe heapfrag pyheap pyframes diff"
if [ "${1:-}" = "--fuzz-only" ]; then # make fuzz: the fuzzers alone, FUZZ_SECONDS each
	for f in $FUZZERS; do
		job "fuzz_$f" test fuzz $f
	done
	drain
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit
fi
job fixtures build fixtures
for t in tests/unit/test_*.c; do
	n=$(basename "$t" .c)
	job "$n" build build "$n" $CC -g -O0 -Werror -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Ibuild \
		-Iuser -Ibpf "$t" $OBJS $LIBS -o $B/$n
done
drain

# The unit tests, the checks, the fuzzers and the ASan build in one pool: a phase apiece left slots idle while
# each one's longest job ended.
for t in $B/test_*; do
	job "$t" test "$t"
done
# The architecture: user/'s stage folders include only from earlier stages.
job tests/check_layers.py test python3 tests/check_layers.py
# The documentation: every long option in the man page, every JSON key in docs/usage.md.
job tests/check_docs.py test python3 tests/check_docs.py
# The formatting: every C file as clang-format 14 leaves it.
job tests/check_format.sh test tests/check_format.sh
# Commit messages since the rule began: a subject of at most 72 characters, a blank line, a body.
job tests/check_commits.sh test tests/check_commits.sh
for f in $FUZZERS; do
	job "fuzz_$f" test fuzz $f
done
if [ "${1:-}" != "--unit-only" ]; then
	# memleak-ai built with AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, which stops at the
	# first report: the integration tests run once more against it, bad input must never be a crash.
	A=build/asan
	mkdir -p $A
	asan_obj() {
		$CC -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -Ibuild -Iuser -Ibpf -DML_VERSION='"asan"' \
			-c "$1" -o $A/$(basename "$1" .c).o || { echo "asan build failed: $1" >&2; exit 1; }
	}
	for f in user/*.c user/*/*.c; do
		job "asan $f" build asan_obj "$f"
	done
	job "asan profile.pb-c" build $CC -g -O1 -fsanitize=address,undefined -Ibuild -c build/profile.pb-c.c -o $A/profile.pb-c.o
	job "asan html_assets" build $CC -c build/html_assets.c -o $A/html_assets.o
fi
drain
if [ "${1:-}" != "--unit-only" ]; then
	build memleak-ai-asan $CC -fsanitize=address,undefined $A/*.o $LIBS -o $A/memleak-ai
	# A test file's output goes to a file, not through a pipe: a process a failed test left behind (holding the
	# pipe) cannot hold the run up. PART: shared, alone (tests/integration/harness.py: alone), or all.
	integration() {
		MEMLEAK_AI_TEST_PART=$1 python3 "$2" 2>&1
	}
	asan() {
		out=$(mktemp)
		MEMLEAK_AI_TEST_PART=$1 MEMLEAK_AI_BIN=$A/memleak-ai MEMLEAK_AI_SOAK_S=10 ASAN_OPTIONS=detect_leaks=1 \
			UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 python3 "$2" >"$out" 2>&1
		sed 's/^integration:/integration (asan):/' "$out"
		rm -f "$out"
	}
	# Real PyTorch workloads, the whole tool as a user runs it (once: not under ASan, whose cost the
	# full-fidelity import of torch would multiply).
	# In full on PyPI's torch under Python 3.12 (build/venv/3.12); the smoke subset on 3.11 and 3.13 (their
	# venvs) and on Debian's python3.11 with its torch 1.13. A venv make-venv.sh could not build fails here.
	workloads() {
		out=$(mktemp)
		case ${3:-} in
		'') env= label=workloads ;;
		debian) env="MEMLEAK_AI_WL_PY=/usr/bin/python3.11 MEMLEAK_AI_WL_SMOKE=1" label="workloads (Debian's torch)" ;;
		*) env="MEMLEAK_AI_WL_PY=build/venv/$3/bin/python MEMLEAK_AI_WL_SMOKE=1" label="workloads ($3)" ;;
		esac
		env MEMLEAK_AI_TEST_PART=$1 MEMLEAK_AI_TEST_SHARD=$shard $env python3 "$2" >"$out" 2>&1
		sed "s/^integration:/$label:/" "$out"
		rm -f "$out"
	}
	# Every test file in both passes (the workloads once), three at a time, the longest first and the two soaks
	# (busy targets) apart, then any file not named here. (The hostile files, 48 s each, came last unnamed: they
	# ended the shared part 46 s after the workloads' serial job, where short files now fill the tail.) The tests
	# that rest on the tool's measure of its own cost share (@alone) after them, apart from the rest. (The workloads' shared tests stay one job: in two
	# halves beside a third file they ran 1 min sooner, but put two PyTorch loops beside the epochs test, whose
	# sampled row then read stable through its pause, beside stress-ng. Only their @beside tests, exact
	# accounting on the stand-in GPU with no libc probes, are a job of their own, as another file's would be. The
	# diff test stays last in the serial job, where the shared part's load has fallen: in the beside job at a load
	# of 7 to 8 a fixed run's torch_cpu total jumped by 5 MB and failed diff's gate.)
	QUEUE="workloads/test_workloads core core:asan workloads/test_workloads@3.11 workloads/test_workloads@3.13
		workloads/test_workloads@debian fleet soak fleet:asan gpu python python:asan soak:asan unwind
		hostile hostile:asan gpu:asan follow overhead rss rss:asan overhead:asan unwind:asan oom oom:asan follow:asan frag frag:asan"
	QUEUE=$(echo $QUEUE)
	for t in $(ls tests/integration/test_*.py | sed 's/.*test_\(.*\)\.py/\1/'); do
		case " $QUEUE " in *" $t "*) ;; *) QUEUE="$QUEUE $t $t:asan" ;; esac
	done
	label() {
		case $1 in asan) echo " (asan${2:+, $2 tests})" ;; *) echo "${2:+ ($2 tests)}" ;; esac
	}
	# A queue entry (workloads/test_x, name, name:asan): its file in t, how it runs in kind.
	entry() {
		py="" shard=""
		case $1 in *#*) shard=${1#*#} ;; esac
		set -- "${1%#*}"
		case $1 in
		*/*@*) t=tests/${1%@*}.py kind=workloads py=${1#*@} ;;
		*/*) t=tests/$1.py kind=workloads ;;
		*) t=tests/integration/test_${1%:asan}.py kind=integration ;;
		esac
		case $1 in *:asan) kind=asan ;; esac
	}
	# Hundredths of a CPU that processes kept busy over two seconds (/proc/stat), taken while nothing of the
	# suite runs: other work on the machine.
	others_busy() {
		set -- $(head -n 1 /proc/stat)
		b0=$(($2 + $3 + $4 + $7 + $8 + $9)) t0=$(($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9))
		sleep 2
		set -- $(head -n 1 /proc/stat)
		b1=$(($2 + $3 + $4 + $7 + $8 + $9)) t1=$(($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9))
		echo $(((b1 - b0) * 100 * $(nproc) / (t1 - t0 + 1)))
	}
	ALONE="" SHARES="" BESIDE=""
	flush_beside() {
		for q in $BESIDE; do
			entry "$q"
			job "$t$(label $kind beside)" test $kind beside "$t"
		done
		BESIDE=""
	}
	ALONE_J=${ALONE_JOBS:-2}
	case $ALONE_J in '' | *[!0-9]* | 0*) echo "run-tests.sh: ALONE_JOBS must be a whole number from 1 up" >&2; exit 2 ;; esac
	# FILL: ASan passes of files whose tests run shared (core's @alone test is not run under ASan), held back from
	# the shared part (CPU-bound, three files at a time) to run one after another beside the files that run alone
	# one at a time (C targets that leave a CPU idle: the @alone part used half the machine), on a machine nothing
	# else keeps busy; TEST_FILL=0 keeps them in the shared part. About the load of `stress-ng --cpu 1`, beside
	# which the whole suite must pass anyway: a fresh clone took 1,105 s against about 1,250. Six files (226 s in
	# proof A of stop 60) about as long as the files they run beside (231 s): python:asan as well (85 s) would
	# run on past the last of those. (The one test that failed beside them,
	# over_budget_in_heap_growth_mode_samples_tensors_then_sheds, now runs its loop until the reports show what
	# it checks.)
	FILL=""
	case ${TEST_FILL:-1} in
	0) ;;
	1) FILL="core:asan hostile:asan fleet:asan gpu:asan unwind:asan follow:asan" ;;
	*) echo "run-tests.sh: TEST_FILL must be 0 or 1, not '$TEST_FILL'" >&2; exit 2 ;;
	esac
	if [ -n "$FILL" ] && busy=$(others_busy) && [ "$busy" -gt 25 ]; then
		echo "# the ASan passes in the shared part: other processes kept $busy % of a CPU busy"
		FILL=""
	fi
	# Each FILL entry's output in a log of its own (fill_run), printed and added up as any job's (done_fill).
	fill_run() {
		i=0
		for q in $FILL; do
			i=$((i + 1))
			entry "$q"
			t0=$(now_ms)
			"$kind" "" "$t" >"$P/fill$i.log" 2>&1
			echo "$(($(now_ms) - t0)) $t$(label $kind)" >"$P/fill$i.name"
		done
	}
	done_fill() {
		i=0
		for q in $FILL; do
			i=$((i + 1))
			read -r ms name <"$P/fill$i.name" || { echo "not ok - $q did not run"; failed=$((failed + 1)); continue; }
			echo "# $name ($((ms / 1000)).$((ms % 1000 / 100)) s)"
			cat "$P/fill$i.log"
			tally "$P/fill$i.log" "$name"
		done
		FILL="" filling=0
	}
	for q in $QUEUE; do
		case " $FILL " in *" $q "*) continue ;; esac
		entry "$q"
		part=""
		if grep -q '^@alone' "$t"; then
			part=shared
			# The workloads' @alone tests in two halves (#K/N: MEMLEAK_AI_TEST_SHARD, by each test's @takes).
			case $q in
			workloads/test_workloads) SHARES="$SHARES $q#1/2 $q#2/2" ;;
			*@*) SHARES="$SHARES $q" ;;
			*) ALONE="$ALONE $q" ;;
			esac
			[ "$(grep -c '^@alone' "$t")" -lt "$(grep -c '^@test' "$t")" ] || continue
		fi
		# A file's @beside tests (the workloads' stand-in GPU accounting) in a job of their own, queued after the
		# longest files: its other shared tests then run one after another without them.
		if [ -z "$py" ] && grep -q '^@beside' "$t"; then
			BESIDE="$BESIDE $q"
			part=shared
		fi
		job "$t${py:+@$py}${shard:+ #$shard}$(label $kind $part)" test $kind "$part" "$t" $py
		case " $QUEUE " in *" $q "*" core:asan "*) ;; *) flush_beside ;; esac
	done
	flush_beside
	drain
	# The @alone files one at a time, but for the shares of the workloads (their two halves, and their smoke subset
	# on each other interpreter), which run ALONE_JOBS (2) at a time on an otherwise idle machine: PyTorch loops
	# beside PyTorch loops (both halves at once passed, 8/8 and 7/7, in 251 and 278 s against 505 s in turn). The C targets' files (the overhead tests' busy loops, the
	# demo) failed beside one, and two halves failed beside `stress-ng --cpu 1`: a machine that other work keeps
	# busy gets them one at a time.
	if busy=$(others_busy) && [ "$busy" -gt 25 ]; then
		echo "# the @alone part one file at a time: other processes kept $busy % of a CPU busy"
		ALONE_J=1
		[ -z "$FILL" ] || { job "the ASan passes held back" fill fill_run; drain; }
	fi
	# The shares first: one starts as soon as another ends (the file the demo is in sat between the halves and the
	# smoke subsets, and made each wait for the longer of a pair: 14 s in proof W), so no share runs beside a file
	# that runs alone. The FILL passes start with the first such file, once the shares have ended; each of those
	# files waits for the one before it.
	filling=0
	for q in $SHARES $ALONE; do
		entry "$q"
		if [ -n "$shard$py" ]; then
			J=$ALONE_J
		else
			if [ -n "$FILL" ] && [ "$filling" -eq 0 ]; then
				drain
				job "the ASan passes held back" fill fill_run
				filling=1
			fi
			while [ "$running" -gt "$filling" ]; do reap; done
			J=2
		fi
		job "$t${py:+@$py}${shard:+ #$shard}$(label $kind alone)" test $kind alone "$t" $py
	done
	[ -z "$FILL" ] || [ "$filling" -eq 1 ] || job "the ASan passes held back" fill fill_run
	drain
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
