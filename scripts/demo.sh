#!/bin/sh
# The demo: builds the bundled leaking workload, starts it, and attaches memleak-ai to it for a few reports.
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/tests
gcc -g -O2 tests/fixtures/demo_trainer.c -o build/tests/demo_trainer
build/tests/demo_trainer &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT INT TERM
sleep 1
echo "== memleak-ai -p $pid 2 4   (attached to a process already running; 4 reports, 2 s apart) =="
echo "== expect: record_loss grows every report and is a LEAK CANDIDATE from the 4th; cache_put holds at most 64 x 16 KiB and is never a candidate; train_step frees everything: no libc row of its own, never a candidate =="
./memleak-ai -p "$pid" 2 4
