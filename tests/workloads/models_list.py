"""Workload: a model made every step and kept in a list (snapshots meant to be saved, never dropped)."""
import time

import torch

from protocol import start

x = torch.randn(32, 64)
snapshots = []
start()
while True:
    model = torch.nn.Linear(64, 64)  # LEAK
    model(x).sum().backward()
    snapshots.append(model)  # the bug: kept for good
    time.sleep(0.02)
