"""Benchmark target: `import torch`, timed inside the process (the import bench): prints "import SECONDS"."""
import time

t0 = time.monotonic()
import torch  # noqa: E402,F401

print("import", time.monotonic() - t0, flush=True)
