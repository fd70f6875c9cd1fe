"""Workload: every round's model goes through a functools.lru_cache keyed by the model, which keeps the model,
its parameters and their gradients (1.1 MiB a round) for as long as the entry. argv[2], the cache's maxsize:
"none" (the default, the leak) or a number ("2": the control, a bounded cache; nothing grows)."""
import functools
import sys
import time

import torch

from protocol import start

MAXSIZE = None if sys.argv[2:3] in ([], ["none"]) else int(sys.argv[2])


@functools.lru_cache(maxsize=MAXSIZE)
def size_of(model):
    """The model's parameter count, cached: the cache's key is the model itself."""
    return sum(p.numel() for p in model.parameters())


x = torch.randn(32, 256)
start()
while True:
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 32))  # LEAK
    model(x).sum().backward()
    size_of(model)  # the bug: with maxsize=None every model stays a key
    time.sleep(0.04)
