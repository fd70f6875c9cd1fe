"""Benchmark target: a PyTorch CPU training step, timed from inside; one run of STEPS steps per byte on stdin."""
import os
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
plant = len(sys.argv) > 2 and sys.argv[2] == "plant"  # planted leaks: a tensor and a C-heap block kept every step
leaked = []
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(128, 512)
y = torch.randint(0, 10, (128,))
print("ready", os.getpid(), flush=True)
while sys.stdin.buffer.read(1):
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if plant:
            leaked.append(torch.empty(65536))  # at: plant-tensor
            leaked.append(bytearray(262144))  # at: plant
    print(f"{(time.perf_counter() - t0) * 1e3 / steps:.4f}", flush=True)
