"""Workload for the stand-in GPU: tensors of 8 MiB kept until the device (STANDIN_GPU_MEMORY) is full, the
out-of-memory error caught, and the process kept alive holding them."""
import time

import torch

from protocol import start

torch.cuda.init()
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
