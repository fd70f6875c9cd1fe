"""Benchmark target: one steady rank of a CPU training job (RANK from the environment): a small model, a step
every 50 ms, nothing kept. Prints "ready PID" once its first step ran, then runs until killed."""
import os
import time

import torch

torch.manual_seed(int(os.environ.get("RANK", "0")))
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
first = True
while True:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss.item()
    if first:
        print("ready", os.getpid(), flush=True)
        first = False
    time.sleep(0.05)
