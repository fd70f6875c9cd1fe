#!/bin/sh
# Every commit since the message rule began (the reformat, issue 26) passes scripts/commit-msg.
cd "$(dirname "$0")/.."
FIRST=02a18e4
if ! git cat-file -e "$FIRST^{commit}" 2>/dev/null; then
	echo "not ok - commits: $FIRST (the rule's first commit) is not in this clone's history"
	echo "commits: 0 passed, 1 failed"
	exit 1
fi
f=$(mktemp)
trap 'rm -f "$f"' EXIT
passed=0 failed=0
for c in $(git rev-list --no-merges "$FIRST^..HEAD"); do
	git log -1 --format=%B "$c" >"$f"
	if why=$(scripts/commit-msg "$f" 2>&1); then
		passed=$((passed + 1))
	else
		echo "not ok - commit $(git log -1 --format='%h %s' "$c" | cut -c1-60): ${why#commit-msg: }"
		failed=$((failed + 1))
	fi
done
[ "$failed" -eq 0 ] && echo "ok - commits: $passed messages since $FIRST follow the rule"
echo "commits: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
