"""Workload for the stand-in GPU: tensors of 8 MiB kept until the device (STANDIN_GPU_MEMORY) is full, the
out-of-memory error caught, and the process kept alive holding them. With a second argument F, the process may use
only that fraction of the device (set_per_process_memory_fraction): the allocator raises with no failed call."""
import sys
import time

import torch

from protocol import start

torch.cuda.init()
if len(sys.argv) > 2:  # after "run" or "wait"
    torch.cuda.set_per_process_memory_fraction(float(sys.argv[2]))
start()
kept = []
try:
    while True:
        kept.append(torch.empty(2 << 20, device="cuda"))  # OOM: the request that fails
        time.sleep(0.2)
except torch.OutOfMemoryError:
    print("oom", len(kept), flush=True)
while True:
    time.sleep(1)
