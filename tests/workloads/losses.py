"""Workload: a training loop that keeps every loss tensor, and with it the autograd nodes of its step."""
import time

import torch

from protocol import start

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randn(64, 1)
losses = []
start()
while True:
    loss = torch.nn.functional.mse_loss(model(x), y)  # LEAK: the nodes each kept loss holds are made here
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)  # the bug: loss.item() was meant
    time.sleep(0.005)
