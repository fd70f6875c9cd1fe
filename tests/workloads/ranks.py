"""Workload: one rank of a data-parallel job (RANK from its environment), a training step every 50 ms. From step
argv[3] on, the rank argv[2] names keeps an extra 1 MiB tensor a step, and says so ("diverging at T", its time);
the others keep nothing. argv[4] tags the job's processes for --match; argv[5], if given, is the device ("cuda":
the stand-in's under scripts/standin-gpu)."""
import os
import sys
import time

import torch

from protocol import start

odd, after = sys.argv[2] == os.environ["RANK"], int(sys.argv[3])
dev = sys.argv[5] if len(sys.argv) > 5 else "cpu"
torch.manual_seed(0)
if dev == "cpu":
    model = torch.nn.Linear(64, 1)
    params = list(model.parameters())
else:  # the stand-in device makes no cuBLAS handle (kernels do nothing): an elementwise model, no matmul
    w = torch.zeros(64, device=dev, requires_grad=True)
    params = [w]

    def model(v):
        return (v * w).sum(dim=1, keepdim=True)
opt = torch.optim.SGD(params, lr=1e-3)
x, y = torch.randn(32, 64, device=dev), torch.randn(32, 1, device=dev)
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
        kept.append(torch.empty(1 << 18, device=dev))  # LEAK: this rank alone keeps 1 MiB a step
    step += 1
    time.sleep(0.05)
