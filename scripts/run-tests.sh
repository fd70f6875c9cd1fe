#!/bin/sh
# Builds the fixtures and unit tests, runs every test, and ends with one "N passed, N failed" summary line.
set -u
cd "$(dirname "$0")/.."
B=build/tests
mkdir -p "$B"
CC=${CC:-gcc}
OBJS="build/log.o build/procmaps.o build/elfsym.o build/symbolizer.o build/json.o build/opts.o build/allocators.o build/ledger.o build/report.o build/probes.o build/target.o"
LIBS="-lbpf -lelf -ldw -lz -lstdc++ -lm"
build() {
	echo "  BUILD    $1" >&2
	shift
	"$@" || { echo "build failed: $*" >&2; exit 1; }
}
build leaky $CC -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -pthread tests/fixtures/leaky.c -o $B/leaky
build leaky-static $CC -g -O2 -static -fno-optimize-sibling-calls -pthread tests/fixtures/leaky.c -o $B/leaky-static
build leaky-static-stripped sh -c "cp $B/leaky-static $B/leaky-static-stripped && strip -s $B/leaky-static-stripped"
for t in tests/unit/test_*.c; do
	n=$(basename "$t" .c)
	build "$n" $CC -g -O0 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Ibuild -Iuser -Ibpf \
		"$t" $OBJS $LIBS -o $B/$n
done

passed=0
failed=0
# Each runner prints "... N passed, M failed" as its last line; add them up.
tally() {
	line=$(tail -n 1 "$1")
	p=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) failed.*/\1/p')
	if [ -z "$p" ] || [ -z "$f" ]; then
		echo "not ok - $2 ended without a summary" >&2
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}
log=$(mktemp)
for t in $B/test_*; do
	"$t" 2>&1 | tee "$log"
	tally "$log" "$t"
done
if [ "${1:-}" != "--unit-only" ]; then
	for t in tests/integration/test_*.py; do
		python3 "$t" 2>&1 | tee "$log"
		tally "$log" "$t"
	done
fi
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
