#!/bin/sh
# Every C and C++ file of ours is as clang-format 14 (.clang-format) leaves it; `make format` fixes a difference.
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
	echo "not ok - format: clang-format is not installed"
	echo "format: 0 passed, 1 failed"
	exit 1
fi
files=$(git ls-files '*.c' '*.h' '*.cpp' ':!vmlinux/*')
n=$(echo "$files" | wc -l)
if out=$(clang-format --dry-run -Werror $files 2>&1); then
	echo "ok - format: $n files as clang-format $(clang-format --version | sed -n 's/.*version \([0-9.]*\).*/\1/p') leaves them"
	echo "format: 1 passed, 0 failed"
else
	echo "$out" | grep 'error:' | head -20
	echo "not ok - format: $(echo "$out" | grep -c 'error:') differences (make format fixes them)"
	echo "format: 0 passed, 1 failed"
	exit 1
fi
