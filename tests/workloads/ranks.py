"""Workload: one rank of a data-parallel job (RANK from its environment), a training step every 50 ms. From step
argv[3] on, the rank argv[2] names keeps an extra 1 MiB CPU tensor a step, and says so ("diverging at T", its time);
the others keep nothing. argv[4] tags the job's processes for --match."""
import os
import sys
import time

import torch

from protocol import start

odd, after = sys.argv[2] == os.environ["RANK"], int(sys.argv[3])
torch.manual_seed(0)
model = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 1)
kept = []
start()
step = 0
while True:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if odd and step >= after:
        if step == after:
            print("diverging at", time.time(), flush=True)
        kept.append(torch.empty(1 << 18))  # LEAK: this rank alone keeps 1 MiB a step
    step += 1
    time.sleep(0.05)
