"""Workload: one rank of a data-parallel job (RANK from its environment), a training step every 50 ms. The rank
argv[2] names keeps an extra 1 MiB CPU tensor a step; the others keep nothing ("none": no rank does). argv[3] tags
the job's processes for --match."""
import os
import sys
import time

import torch

from protocol import start

odd = sys.argv[2] == os.environ["RANK"]
torch.manual_seed(0)
model = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 1)
kept = []
start()
while True:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if odd:
        kept.append(torch.empty(1 << 18))  # LEAK: this rank alone keeps 1 MiB a step
    time.sleep(0.05)
