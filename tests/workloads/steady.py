"""Workload, the control: the same training loop keeping only each loss's value. Nothing grows."""
import time

import torch

from protocol import start

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randn(64, 1)
total, steps = 0.0, 0


def step():
    global total, steps
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()
    steps += 1


# A job is attached to once it runs: the first 3,000 steps fill the Python heap's pools up to where its
# collector holds them (on torch 2.15, 64 KiB of pool pages over the first 2,000 steps), before the go.
for _ in range(3000):
    step()
start()
history = torch.zeros(1 << 16)  # made once and kept: a stack that is stable, never growing
while True:
    step()
    time.sleep(0.005)
