"""How a workload starts: at once (traced with -c), or after the test's go on stdin (attached with -p)."""
import os
import sys


def start():
    """argv[1] "wait": say ready (with the pid) and wait for one byte on stdin; "run": start at once."""
    if sys.argv[1:2] == ["wait"]:
        print("ready", os.getpid(), flush=True)
        sys.stdin.buffer.read(1)
