"""Workload for the stand-in GPU (scripts/standin-gpu): a loop that keeps one CUDA tensor a step, next to a
scratch tensor freed at the next step. With a control FIFO and an answer FIFO as arguments, "p" pauses the
loop and answers "stats REQUESTED RESERVED ALLOCATED" from PyTorch's own accounting; "r" resumes it."""
import os
import sys
import time

import torch

from protocol import start

ctl = os.open(sys.argv[2], os.O_RDONLY | os.O_NONBLOCK) if len(sys.argv) > 3 else -1
ans = open(sys.argv[3], "w") if len(sys.argv) > 3 else None


def paused():
    """Answer a pause with the stats, and hold until resumed."""
    s = torch.cuda.memory_stats()
    print("stats", s["requested_bytes.all.current"], torch.cuda.memory_reserved(), torch.cuda.memory_allocated(),
          file=ans, flush=True)
    while True:
        try:
            if os.read(ctl, 1) == b"r":
                return
        except BlockingIOError:
            pass
        time.sleep(0.01)


kept = []
torch.cuda.init()
start()
step = 0
while True:
    kept.append(torch.empty(1000 + 37 * (step % 50), device="cuda"))  # LEAK: one tensor kept a step
    scratch = torch.empty(1 << 18, device="cuda")  # freed at the next step: cached, not leaked
    step += 1
    if ctl >= 0:
        try:
            if os.read(ctl, 1) == b"p":
                paused()
        except BlockingIOError:
            pass
    time.sleep(0.01)
