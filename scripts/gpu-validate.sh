#!/bin/sh
# GPU-machine validation (not run in CI): uprobes on its kernel, what its libc10_cuda.so carries, and a real
# losses.append(loss) leak on the GPU seen in both the cuda and torch_cuda layers. Run from the repository
# root with a built ./memleak-ai, as root, on a machine with a GPU and PyTorch built for CUDA.
set -u
PY=${PYTHON:-python3}
echo "== kernel: $(uname -r)"
for f in /sys/kernel/btf/vmlinux /sys/bus/event_source/devices/uprobe/type; do
	[ -e "$f" ] && echo "   present: $f" || echo "   MISSING: $f"
done
libdir=$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || exit 1
echo "== torch $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)') in $libdir"
c10=$libdir/libc10_cuda.so
echo "== USDT notes in $c10"
readelf -n "$c10" | grep -A3 'Provider: pytorch' || echo "   none"
echo "== caching-allocator symbols in $c10 (.symtab)"
nm -C "$c10" 2>/dev/null | grep -E 'NativeCachingAllocator::(raw_alloc|raw_alloc_with_stream|raw_delete)\(' || echo "   none"
echo "== cudart / driver entry points"
for lib in "$libdir"/../../nvidia/cuda_runtime/lib/libcudart.so* "$libdir"/libcudart*.so* /usr/lib/x86_64-linux-gnu/libcuda.so.1; do
	[ -e "$lib" ] && echo "   $lib: $(nm -D "$lib" 2>/dev/null | grep -cE ' (cudaMalloc|cuMemAlloc_v2|cuMemCreate)(@|$)') of cudaMalloc/cuMemAlloc_v2/cuMemCreate"
done
echo "== memleak-ai on a GPU training loop that keeps its losses"
# The fixture starts on a byte from stdin and, once done, holds its tensors until stdin closes.
(printf g; sleep 30) | ./memleak-ai -f json --layers cuda,torch_cuda -c "$PY tests/fixtures/torch_loop.py keep cuda" \
	1 15 > /tmp/gpu-validate.json
$PY - <<'PYEOF'
import json
reps = [json.loads(l) for l in open("/tmp/gpu-validate.json")]
for r in reps:
    t = r["totals"]
    print(r["seq"], {k: (v["bytes"], v["growth_bytes"]) for k, v in t.items()}, r.get("devices"))
PYEOF
echo "== Python frames with this machine's interpreter ($($PY -V 2>&1))"
# The same fixture as tests/integration/test_python.py: the kept blocks' stack must name make_block,
# leak_step, basic and <module> at their '# at:' lines.
(printf g; sleep 5) | ./memleak-ai -f json --max-overhead 100 -c "$PY tests/fixtures/py_leaky.py basic" 1 5 \
	> /tmp/gpu-validate-py.json
$PY - <<'PYEOF'
import json
reps = [json.loads(l) for l in open("/tmp/gpu-validate-py.json")]
st = [s for s in reps[-1]["stacks"] if s["count"] == 20 and s["bytes"] == sum(300001 + i for i in range(20))]
for s in st:
    print([(f["file"].rsplit("/", 1)[-1], f["func"], f["line"]) for f in s["frames"] if f["kind"] == "python"])
print("python stats:", reps[-1]["stats"]["python"])
PYEOF
