"""Benchmark target for the Python frame walk: recurse to DEPTH Python frames, then serve commands from stdin.

At every allocation the Python stack is exactly DEPTH frames deep (the module frame, DEPTH - 2 frames of
down(), and serve()). Commands, one byte each:
  g  run ITERS iterations of bytearray(1000) + drop (one libc malloc of 1001 bytes and one free each: the
     buffer is over pymalloc's 512-byte limit, the object itself comes from pymalloc), print ns per iteration
  k  keep one bytearray(1000) (an outstanding allocation whose stack shows the depth), print "kept"
  d  print the Python depth at the allocation point
"""
import os
import sys
import time

depth = int(sys.argv[1]) if len(sys.argv) > 1 else 50
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
kept = []


def serve():
    read = sys.stdin.buffer.read
    out = sys.stdout
    out.write(f"ready {os.getpid()}\n")
    out.flush()
    while True:
        c = read(1)
        if not c:
            return
        if c == b"g":
            n = iters
            t0 = time.perf_counter()
            while n:
                b = bytearray(1000)
                del b
                n -= 1
            out.write(f"{(time.perf_counter() - t0) * 1e9 / iters:.1f}\n")
        elif c == b"k":
            kept.append(bytearray(1000))
            out.write("kept\n")
        elif c == b"d":
            f, d = sys._getframe(), 0
            while f:
                d, f = d + 1, f.f_back
            out.write(f"{d}\n")
        out.flush()


def down(n):
    if n > 0:
        return down(n - 1)
    return serve()


if depth < 3:
    sys.exit("DEPTH must be at least 3 (the module frame and serve())")
sys.setrecursionlimit(depth + 100)
down(depth - 3)
