"""The leak entries of a memray capture file, as `memray table --leaks` and `memray flamegraph --leaks` rank them:
the allocations not freed when tracking ended, merged by stack (threads merged), largest first. Prints JSON: a
list of {"bytes", "count", "frames": [[function, file, line], ...] innermost first}, native and Python frames
interleaved when the capture has native frames. Run with the Python that memray is installed in (bench.py peers).
Usage: memray_leaks.py CAPTURE [N]"""
import json
import sys

import memray

reader = memray.FileReader(sys.argv[1], report_progress=False)
native = reader.metadata.has_native_traces
recs = sorted(reader.get_leaked_allocation_records(merge_threads=True), key=lambda r: r.size, reverse=True)
out = []
for r in recs[:int(sys.argv[2]) if len(sys.argv) > 2 else 3]:
    frames = r.hybrid_stack_trace() if native else r.stack_trace()
    out.append({"bytes": r.size, "count": r.n_allocations, "frames": [list(f) for f in frames]})
print(json.dumps({"native": native, "total_allocations": reader.metadata.total_allocations, "leaks": out}))
