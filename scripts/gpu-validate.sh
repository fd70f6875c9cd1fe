#!/bin/sh
# GPU-machine validation (not run in CI): uprobes on its kernel, the probes memleak-ai attaches in its torch's
# libraries and the driver's, and a real losses.append(loss) leak on the GPU seen in both the cuda and
# torch_cuda layers. Run from the repository root with a built ./memleak-ai, as root, on a machine with a GPU
# and PyPI's torch for CUDA (PYTHON: its interpreter). Needs no gdb, strace, perf or binutils.
set -u
PY=${PYTHON:-python3}
echo "== kernel: $(uname -r)"
for f in /sys/kernel/btf/vmlinux /sys/bus/event_source/devices/uprobe/type; do
	[ -e "$f" ] && echo "   present: $f" || echo "   MISSING: $f"
done
ver=$($PY -c 'import torch; print(torch.__version__, torch.version.cuda)') || exit 1
echo "== torch $ver ($PY)"
# The probes memleak-ai places in the wheel's libraries, attached in a process that imported torch and called
# torch.cuda.is_available(): pytorch:malloc/free (locations, argument specs, semaphores) and the caching
# allocator's raw_alloc/raw_delete in torch/lib/libc10_cuda.so, cudaMalloc/cudaFree in the nvidia runtime's
# libcudart.so.13, and here, with a driver, cuMemCreate/cuMemMap/cuMemAlloc_v2 in libcuda.so.1. The second test
# compares the notes with those recorded for the pinned torch (docs/GPU.md): another torch prints what differs.
# The harness asks bpftool for leftover programs: an empty list where it is not installed.
command -v bpftool >/dev/null || { mkdir -p /tmp/gpu-validate-bin && printf '#!/bin/sh\necho []\n' \
	>/tmp/gpu-validate-bin/bpftool && chmod +x /tmp/gpu-validate-bin/bpftool && PATH=/tmp/gpu-validate-bin:$PATH; }
MEMLEAK_AI_WHEEL_PY=$(command -v "$PY") MEMLEAK_AI_NEED_DRIVER=1 $PY tests/integration/test_wheel.py \
	wheel_probes_attach pinned_wheel_notes_unchanged
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
