"""Benchmark target: a running PyTorch job that allocates a tagged block every 10 ms and keeps it (a tensor of
TAG bytes), for the attach bench: the oldest record at the tagged line says when the first one was recorded.
Prints "ready PID" once its loop runs, then runs until killed."""
import os
import time

import torch

TAG = 40_961  # bytes: no other allocation of the job has this size
keep = []
torch.set_num_threads(1)
first = True
while True:
    keep.append(torch.empty(TAG, dtype=torch.uint8))  # at: tagged
    if first:
        print("ready", os.getpid(), flush=True)
        first = False
    time.sleep(0.01)
