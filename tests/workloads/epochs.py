"""Workload: epochs of training steps with a pause between them, keeping a 1 MiB CPU tensor a step or not.

argv: wait|run, keep|steady, steps an epoch, seconds of pause after each epoch, epochs (0: until killed).
It prints "steps N at T" after each epoch: the steps it made (one backward pass each), and when (time.time()), so a
test knows when the pause began however late it reads the line."""
import sys
import time

import torch

from protocol import start

keep = sys.argv[2] == "keep"
epoch_steps, pause_s, epochs = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
torch.manual_seed(0)
model = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 1)
kept = []
start()
steps = epoch = 0
while not epochs or epoch < epochs:
    for _ in range(epoch_steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if keep:
            kept.append(torch.empty(1 << 18))  # LEAK: 1 MiB a step (262,144 floats), kept for good
        steps += 1
        time.sleep(0.08)
    epoch += 1
    print("steps", steps, "at", time.time(), flush=True)
    time.sleep(pause_s)
