"""Workload, the control: the same training loop keeping only each loss's value. Nothing grows."""
import time

import torch

from protocol import start

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randn(64, 1)
total, steps = 0.0, 0
start()
while True:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()
    steps += 1
    time.sleep(0.005)
