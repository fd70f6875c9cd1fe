"""Workload: DataLoader workers (forked) whose Dataset caches every sample it builds, in each worker."""
import itertools
import time

import torch

from protocol import start


class Cached(torch.utils.data.Dataset):
    def __init__(self):
        self.cache = {}  # the bug: grows in every worker, one copy each

    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        if i not in self.cache:
            self.cache[i] = torch.randn(1024)  # LEAK
        return self.cache[i].clone()


if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(Cached(), batch_size=8, num_workers=2, persistent_workers=True)
    start()
    for batch in itertools.islice(loader, None):
        batch.sum()
        time.sleep(0.01)
