"""Workload for the stand-in GPU: the caching allocator's cache fragmented on purpose. Eight 2 MiB tensors are
carved from one 20 MiB segment and every other one is freed: the four left keep the segment, and its 12 MiB of
free space, from being released, empty_cache() or not; one of two 1 MiB tensors keeps a small-pool segment. On "p" from the control FIFO it answers, from
torch.cuda.memory_snapshot(), "pinned BYTES RESERVED ALLOCATED": the free bytes of segments that hold a live
block."""
import os
import sys
import time

import torch

from protocol import start

ctl = os.open(sys.argv[2], os.O_RDONLY | os.O_NONBLOCK)
ans = open(sys.argv[3], "w")
torch.cuda.init()
start()
big = [torch.empty(1 << 19, device="cuda") for _ in range(8)]  # PIN: 2 MiB blocks of one 20 MiB segment
del big[::2]
small = [torch.empty(1 << 18, device="cuda") for _ in range(2)]  # SMALL: 1 MiB blocks of a 2 MiB segment
del small[1:]
torch.cuda.empty_cache()
while True:
    try:
        if os.read(ctl, 1) == b"p":
            pinned = sum(s["total_size"] - sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
                         for s in torch.cuda.memory_snapshot()
                         if any(b["state"] == "active_allocated" for b in s["blocks"]))
            print("pinned", pinned, torch.cuda.memory_reserved(), torch.cuda.memory_allocated(), file=ans, flush=True)
    except BlockingIOError:
        pass
    time.sleep(0.05)
