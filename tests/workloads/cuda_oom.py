"""Workload for the stand-in GPU: tensors of 8 MiB (env OOM_TENSOR_MIB) kept until the device is full, the
out-of-memory error caught, and the process kept alive holding them. With a second argument F, the process may use
only that fraction of the device (set_per_process_memory_fraction), or with NM only N MiB of it (a real GPU's
fraction of 140 GB would take minutes to fill): the allocator raises with no failed call. Each step also raises and
catches an error of another kind, through the same c10::Error constructor."""
import os
import sys
import time

import torch

from protocol import start

torch.cuda.init()
if len(sys.argv) > 2:  # after "run" or "wait"
    limit = sys.argv[2]
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(int(limit[:-1]) * 2**20 / total if limit.endswith("M") else float(limit))
start()
kept = []
numel = int(os.environ.get("OOM_TENSOR_MIB", "8")) << 18  # float32
try:
    while True:
        kept.append(torch.empty(numel, device="cuda"))  # OOM: the request that fails
        try:
            torch.empty(6).view(4)  # a c10::Error of another kind each step: not an out-of-memory report
        except RuntimeError:
            pass
        time.sleep(0.2)
except torch.OutOfMemoryError:
    print("oom", len(kept), torch.cuda.memory_reserved(), flush=True)
while True:
    time.sleep(1)
