"""Workload: a Dataset whose cache is a class attribute: every sample ever read stays, in every instance."""
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
start()
i = 0
while True:
    batch = torch.stack([ds[i + k] for k in range(8)])
    (batch @ w).sum()
    i += 8
    time.sleep(0.01)
