"""Workload: DataLoader workers (forked) over a Dataset holding a large Python list. Nothing leaks in the
allocator's sense: reading an item writes its reference count, and each page so written is copied into the
worker (copy-on-write), so every worker's private memory grows until it has copied the whole list."""
import itertools
import time

import torch

from protocol import start


class Rows(torch.utils.data.Dataset):
    def __init__(self):
        self.rows = [f"row {i:>8} " + "x" * 90 for i in range(2_000_000)]  # one str object each

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]  # LEAK: the read writes the str's reference count: its page is copied
        return len(row)


if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(Rows(), batch_size=256, num_workers=2, persistent_workers=True)
    start()
    for batch in itertools.islice(loader, None):
        batch.sum()
        time.sleep(0.02)
