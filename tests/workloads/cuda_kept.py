"""Workload for the stand-in GPU (scripts/standin-gpu): a loop that keeps one CUDA tensor a step, next to a
scratch tensor freed at the next step. With a control FIFO and an answer FIFO as arguments, "p" pauses the
loop and answers "stats REQUESTED RESERVED ALLOCATED RAW" from PyTorch's own accounting; "r" resumes it. With
CUDA_KEPT_RAW=1 each step also takes a block through torch.cuda.caching_allocator_alloc (raw_alloc) and every
third step gives the oldest back: RAW is the bytes of those still held. With CUDA_KEPT_PIN=1 each step also pins a
CPU tensor (pin_memory(), the host caching allocator) and every third step drops the oldest: the answer adds the
host allocator's active_requests and allocated_bytes (what cudaHostAlloc reserved), and the pinned bytes and
tensors held."""
import os
import sys
import time

import torch

from protocol import start

ctl = os.open(sys.argv[2], os.O_RDONLY | os.O_NONBLOCK) if len(sys.argv) > 3 else -1
ans = open(sys.argv[3], "w") if len(sys.argv) > 3 else None


def paused():
    """Answer a pause with the stats, and hold until resumed."""
    s = torch.cuda.memory_stats()
    print("stats", s["requested_bytes.all.current"], torch.cuda.memory_reserved(), torch.cuda.memory_allocated(),
          sum(n for _, n in raw), *host_stats(), file=ans, flush=True)
    while True:
        try:
            if os.read(ctl, 1) == b"r":
                return
        except BlockingIOError:
            pass
        time.sleep(0.01)


kept, raw, pinned = [], [], []
take_raw = os.environ.get("CUDA_KEPT_RAW") == "1"
take_pin = os.environ.get("CUDA_KEPT_PIN") == "1"


def host_stats():
    """The host caching allocator's active requests and reserved bytes, and the pinned tensors' bytes and count."""
    if not take_pin:
        return []
    h = torch.cuda.host_memory_stats()
    return [h["active_requests.current"], h["allocated_bytes.current"], sum(t.nbytes for t in pinned), len(pinned)]


torch.cuda.init()
start()
step = 0
while True:
    kept.append(torch.empty(1000 + 37 * (step % 50), device="cuda"))  # LEAK: one tensor kept a step
    scratch = torch.empty(1 << 18, device="cuda")  # freed at the next step: cached, not leaked
    if take_raw:
        n = 4096 + 512 * (step % 7)
        raw.append((torch.cuda.caching_allocator_alloc(n), n))  # RAW: two of three kept
        if step % 3 == 2:
            torch.cuda.caching_allocator_delete(raw.pop(0)[0])
    if take_pin:
        pinned.append(torch.empty(500 + 50 * (step % 9)).pin_memory())  # PIN: two of three kept
        if step % 3 == 2:
            del pinned[0]
    step += 1
    if ctl >= 0:
        try:
            if os.read(ctl, 1) == b"p":
                paused()
        except BlockingIOError:
            pass
    time.sleep(0.01)
