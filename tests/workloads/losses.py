"""Workload: a training loop that keeps every loss tensor, and with it the autograd nodes of its step."""
import os
import random
import sys
import time

import torch

from protocol import start

torch.manual_seed(0)
# More layers: each keeps about 2 KiB more of autograd nodes with each loss. Narrow, so that a backward pass's
# passing buffers stay as small as with one (a report may catch them).
depth = int(os.environ.get("LOSSES_DEPTH", "1"))
first = torch.nn.Linear(128, 256)  # made first, as with one layer only: the same weights as ever
hidden = [m for k in range(depth - 1) for m in (torch.nn.Linear(32 if k else 256, 32), torch.nn.ReLU())]
model = torch.nn.Sequential(first, torch.nn.ReLU(), *hidden, torch.nn.Linear(32 if hidden else 256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randn(64, 1)
losses = []
every = int(sys.argv[2]) if len(sys.argv) > 2 else 0  # benchmarks: print ms a step every EVERY steps
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # end by itself after STEPS steps (0: never)
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 0  # batches of 16 to ROWS rows, drawn each step (0: always 64)
fixed = sys.argv[5:6] == ["item"]  # "item": the fixed loop, which keeps loss.item(); lines as in the leaking one
pause = float(os.environ.get("LOSSES_SLEEP_MS", "5")) / 1e3  # benchmarks: 2 ms, or none (a CPU-bound loop)
rng = random.Random(0)
start()
step, t0 = 0, time.perf_counter()
while not steps or step < steps:
    if rows:  # varied sizes: the step's freed buffers seldom fit the holes earlier ones left
        n = rng.randint(16, rows)
        x, y = torch.randn(n, 128), torch.randn(n, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)  # LEAK: the nodes each kept loss holds are made here
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item() if fixed else loss)  # the bug: loss.item() was meant
    if pause:
        time.sleep(pause)
    step += 1
    if every and step % every == 0:
        t1 = time.perf_counter()
        print(f"{(t1 - t0) * 1e3 / every:.4f}", flush=True)
        t0 = t1
