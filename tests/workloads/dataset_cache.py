"""Workload: a Dataset whose cache is a class attribute: every sample ever read stays, in every instance."""
import sys
import time

import torch

from protocol import start


class CachedDataset(torch.utils.data.Dataset):
    cache = {}  # the bug: shared and never evicted

    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        if i not in CachedDataset.cache:
            CachedDataset.cache[i] = torch.randn(1024)  # LEAK
        return CachedDataset.cache[i]


ds = CachedDataset()
w = torch.randn(1024, 16)
every = int(sys.argv[2]) if len(sys.argv) > 2 else 0  # benchmarks: print ms a step every EVERY steps
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # end by itself after STEPS steps (0: never)
start()
i, step, t0 = 0, 0, time.perf_counter()
while not steps or step < steps:
    batch = torch.stack([ds[i + k] for k in range(8)])
    (batch @ w).sum()
    i += 8
    time.sleep(0.01)
    step += 1
    if every and step % every == 0:
        t1 = time.perf_counter()
        print(f"{(t1 - t0) * 1e3 / every:.4f}", flush=True)
        t0 = t1
