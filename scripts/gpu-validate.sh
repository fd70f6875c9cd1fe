#!/bin/sh
# GPU-machine validation (not run in CI), one short script (about 5 minutes): it checks first and says what is
# missing; then uprobes on its kernel, the probes memleak-ai attaches in its torch's libraries and the driver's,
# a real losses.append(loss) leak on the GPU in the cuda and torch_cuda layers, and the exact accounting and
# pinning tests of the stand-in device, on the real one. Run from the repository root with a built ./memleak-ai,
# as root, with PyPI's torch for CUDA (PYTHON: its interpreter). Needs no gdb, strace, perf or binutils. Where the
# machine lacks the libraries memleak-ai links, run scripts/gpu-bundle.sh here first and carry build/gpu-bundle.
set -u
PY=${PYTHON:-python3}
missing=0
miss() { echo "   MISSING: $*"; missing=$((missing + 1)); }
echo "== checks"
[ "$(id -u)" = 0 ] || miss "root (BPF and uprobes need it)"
[ -x ./memleak-ai ] || { echo "   MISSING: ./memleak-ai (make)"; exit 1; }
if ldd ./memleak-ai 2>/dev/null | grep -q "not found"; then
	if [ -d build/gpu-bundle/lib ]; then
		# Only what this machine lacks, linked from the bundle: its own programs (protoc) keep their libraries.
		lib=/tmp/gpu-validate-lib
		mkdir -p $lib && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		for round in 1 2 3 4 5 6; do
			for l in $(ldd ./memleak-ai | awk '/not found/ {print $1}'); do
				[ -e "build/gpu-bundle/lib/$l" ] && ln -sf "$PWD/build/gpu-bundle/lib/$l" $lib/
			done
		done
		echo "   libraries from build/gpu-bundle/lib: $(ls $lib | tr '\n' ' ')"
	fi
	if ldd ./memleak-ai | grep -q "not found"; then
		ldd ./memleak-ai | grep "not found" | sed 's/^/   MISSING library: /'
		missing=$((missing + 1))
	fi
fi
echo "   kernel: $(uname -r)"
for f in /sys/kernel/btf/vmlinux /sys/bus/event_source/devices/uprobe/type; do
	[ -e "$f" ] && echo "   present: $f" || miss "$f"
done
$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	miss "a GPU that $PY's torch can use (torch.cuda.is_available())"
# BPF: the whole tool on a short command. Under gVisor the programs may not load: then nothing else can run.
if ! timeout 60 ./memleak-ai -f json -c "sleep 1" 1 1 >/dev/null 2>/tmp/gpu-validate-bpf.err; then
	echo "   BLOCKED: memleak-ai cannot trace here: $(grep -m1 'memleak-ai:' /tmp/gpu-validate-bpf.err)"
	exit 1
fi
echo "   BPF: the programs load and attach"
[ "$missing" = 0 ] || { echo "== $missing missing: stopping"; exit 1; }
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
reps = [json.loads(l) for l in open("/tmp/gpu-validate.json") if l.startswith("{")]  # the loop's own lines too
for r in reps:
    t = r["totals"]
    print(r["seq"], {k: (v["bytes"], v["growth_bytes"]) for k, v in t.items()}, r.get("devices"))
PYEOF
echo "== PyTorch's caching allocator on this GPU: exact layers, pinned host memory, pinning rows, OOM, peaks"
# The stand-in device's tests (docs/GPU.md) with the real device: scripts/standin-gpu is not used. torch_cuda =
# requested bytes and cuda = reserved, with -c and -p; pin_memory()'s torch_host and cuda_host layers against
# host_memory_stats(); the fragmented cache's pinned bytes; a failed cudaMalloc (16 GiB tensors until the device
# is full) and c10::OutOfMemoryError raised under a 32 MiB memory fraction, each one report with the line; and
# a loop that ends by itself under -c, whose final report keeps its leak line and PyTorch's own peaks.
# Its HTML is not loaded in a browser: the machine has no Selenium.
MEMLEAK_AI_REAL_GPU=1 MEMLEAK_AI_NO_BROWSER=1 MEMLEAK_AI_WL_PY=$(command -v "$PY") $PY tests/workloads/test_workloads.py \
	standin_gpu_caching_allocator_exact standin_gpu_expandable_segments_exact \
	standin_gpu_attached_after_cuda_init_exact standin_gpu_fragmented_cache_pinned_by_rows \
	standin_gpu_out_of_memory_report standin_gpu_out_of_memory_by_memory_fraction \
	standin_gpu_kept_tensors_started_ending_peaks
echo "== Python frames with this machine's interpreter ($($PY -V 2>&1))"
# The same fixture as tests/integration/test_python.py: the kept blocks' stack must name make_block,
# leak_step, basic and <module> at their '# at:' lines.
(printf g; sleep 5) | ./memleak-ai -f json --max-overhead 100 -c "$PY tests/fixtures/py_leaky.py basic" 1 5 \
	> /tmp/gpu-validate-py.json
$PY - <<'PYEOF'
import json
reps = [json.loads(l) for l in open("/tmp/gpu-validate-py.json") if l.startswith("{")]
# Any report while the fixture lived (the final one comes after its exit dropped its records).
st = [s for r in reps[:-1] for s in r["stacks"] if s["count"] == 20 and s["bytes"] == sum(300001 + i for i in range(20))]
for s in st[-1:]:
    print([(f["file"].rsplit("/", 1)[-1], f["func"], f["line"]) for f in s["frames"] if f["kind"] == "python"])
print("python stats:", reps[-1]["stats"]["python"])
PYEOF
echo "== the tool's own cost on a CUDA rank: attach time and memory (issue 36)"
# A CUDA loop that keeps its losses, paused before its loop: from the command to 'attached to pid' (median of 3),
# then the tool's VmHWM after 15 s of the running loop at default settings.
$PY - ./memleak-ai <<'PYEOF'
import os, signal, statistics, subprocess, sys, threading, time
tool_bin, times, hwm = sys.argv[1], [], 0
for i in range(3):
    loop = subprocess.Popen([sys.executable, "tests/fixtures/torch_loop.py", "keep", "cuda", "100000"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    loop.stdout.readline()
    t0 = time.time()
    tool = subprocess.Popen([tool_bin, "-p", str(loop.pid), "-o", "/dev/null", "5"], stderr=subprocess.PIPE, text=True)
    for line in tool.stderr:
        if "attached to pid" in line:
            times.append(time.time() - t0)
            print("  ", line.strip(), f"after {times[-1]:.2f} s")
            break
    threading.Thread(target=tool.stderr.read, daemon=True).start()
    if i == 2:
        loop.stdin.write(b"g"); loop.stdin.flush()
        time.sleep(15)
        hwm = next(int(l.split()[1]) for l in open(f"/proc/{tool.pid}/status") if l.startswith("VmHWM:"))
    tool.send_signal(signal.SIGINT); tool.wait(60)
    loop.kill(); loop.wait()
print(f"   attach: {' '.join(f'{t:.2f}' for t in times)} s (median {statistics.median(times):.2f} s); "
      f"VmHWM after 15 s of the loop: {hwm / 1024:.1f} MiB; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
PYEOF
