"""Workload for the stand-in GPU (scripts/standin-gpu): keeps one 1 MiB CUDA tensor a step for STEPS steps, then
writes PyTorch's own peaks (requested_bytes.all.peak, reserved_bytes.all.peak) to the file PEAKS and returns:
the interpreter's teardown then frees every tensor kept. Arguments: run|wait STEPS PEAKS."""
import sys
import time

import torch

from protocol import start

steps, peaks = int(sys.argv[2]), sys.argv[3]
kept = []
torch.cuda.init()
start()
for step in range(steps):
    kept.append(torch.empty(1 << 18, device="cuda"))  # LEAK: one 1 MiB tensor kept a step
    time.sleep(0.02)
s = torch.cuda.memory_stats()
with open(peaks, "w") as f:
    print(s["requested_bytes.all.peak"], s["reserved_bytes.all.peak"], file=f, flush=True)
