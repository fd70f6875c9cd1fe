"""Workload: a training loop that sums its losses as tensors (the PyTorch FAQ's "don't accumulate history"):
the running total keeps every step's autograd graph alive."""
import signal
import sys
import time

import torch

from protocol import start

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randn(64, 1)
total, steps = 0, 0
# The steps so far, on SIGUSR1: make bench's truth where no heap census counts the nodes (jemalloc, tcmalloc).
signal.signal(signal.SIGUSR1, lambda *_: print("steps", steps, flush=True))
end = int(sys.argv[2]) if len(sys.argv) > 2 else 0  # end by itself after END steps (0: never)
start()
while not end or steps < end:
    steps += 1
    loss = torch.nn.functional.mse_loss(model(x), y)  # LEAK: the nodes the total keeps are made here
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss  # the bug: total += loss.item() was meant
    time.sleep(0.005)
