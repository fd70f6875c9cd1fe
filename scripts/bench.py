"""Overhead benchmark, one run, modes interleaved: no tool, empty uprobes (the floor), memleak-ai."""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "build", "bench")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import read_line  # noqa: E402

ITERS = int(os.environ.get("BENCH_ITERS", "300000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def prog_stats(names):
    out = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout)
    res = {}
    for p in out:
        if p.get("name") in names:
            res[p["name"]] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return res


def proc_cpu_rss(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1])
    return ticks / os.sysconf("SC_CLK_TCK"), rss


def main():
    target = subprocess.Popen([os.path.join(B, "mallocbench"), str(ITERS)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    read_line(target.stdout, 10, "bench ready")
    pid = target.pid

    def run_once():
        target.stdin.write(b"g")
        target.stdin.flush()
        return float(read_line(target.stdout, 300, "bench result"))

    results = {"none": [], "floor": [], "memleak-ai": []}
    bpf = {}
    tool_cpu = tool_rss = 0
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    try:
        run_once()  # warm-up
        for _ in range(ROUNDS):
            results["none"].append(run_once())

            fl = subprocess.Popen([os.path.join(B, "floor"), str(pid)], stdout=subprocess.PIPE)
            read_line(fl.stdout, 20, "floor attached")
            results["floor"].append(run_once())
            fl.kill()
            fl.wait()

            tool = subprocess.Popen([os.path.join(ROOT, "memleak-ai"), "-p", str(pid), "-f", "json", "3600"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            while "attached to pid" not in read_line(tool.stderr, 20, "memleak-ai attached"):
                pass
            before = prog_stats({"alloc_enter", "alloc_exit", "free_enter"})
            results["memleak-ai"].append(run_once())
            after = prog_stats({"alloc_enter", "alloc_exit", "free_enter"})
            for k, (ns, cnt) in after.items():
                b_ns, b_cnt = before.get(k, (0, 0))
                a_ns, a_cnt = bpf.get(k, (0, 0))
                bpf[k] = (a_ns + ns - b_ns, a_cnt + cnt - b_cnt)
            cpu, rss = proc_cpu_rss(tool.pid)
            tool_cpu = max(tool_cpu, cpu)
            tool_rss = max(tool_rss, rss)
            tool.send_signal(2)
            tool.wait(timeout=30)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
        target.kill()

    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"malloc+free pairs per run: {ITERS}, rounds: {ROUNDS} (modes interleaved, one target process)")
    for k in ("none", "floor", "memleak-ai"):
        print(f"  {k:11s} median {med[k]:8.1f} ns per malloc+free   runs: {' '.join(f'{x:.0f}' for x in results[k])}")
    floor_add = med["floor"] - med["none"]
    tool_add = med["memleak-ai"] - med["none"]
    print(f"  added time: floor {floor_add:.1f} ns, memleak-ai {tool_add:.1f} ns, "
          f"ratio memleak-ai/floor = {tool_add / floor_add:.3f} (goal <= 1.10)")
    for k in ("alloc_enter", "alloc_exit", "free_enter"):
        ns, cnt = bpf.get(k, (0, 0))
        if cnt:
            print(f"  BPF run time {k:11s}: {ns / cnt:6.1f} ns per event over {cnt} events")
    print(f"  memleak-ai CPU while attached: {tool_cpu:.2f} s total, peak RSS {tool_rss / 1024:.1f} MiB")
    torch_bench()
    r = subprocess.run([os.path.join(B, "report_bench"), "1000000", "10000"], capture_output=True, text=True)
    print("  " + (r.stdout.strip() or r.stderr.strip()))
    r = subprocess.run([os.path.join(B, "report_bench"), "1000000", "100000"], capture_output=True, text=True)
    print("  " + (r.stdout.strip() or r.stderr.strip()))


def torch_bench():
    """PyTorch CPU training step: no tool, only the torch/CUDA layers, every layer. One process, interleaved."""
    py = "/usr/bin/python3"
    if not os.path.exists(py):
        print("  (PyTorch step benchmark skipped: Debian python3 with python3-torch not found)")
        return
    steps = int(os.environ.get("BENCH_TORCH_STEPS", "20"))
    target = subprocess.Popen([py, os.path.join(ROOT, "tests", "bench", "torch_step.py"), str(steps)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_line(target.stdout, 120, "torch ready")
    modes = {"none": None, "torch/cuda layers": "torch_cpu,torch_cuda,cuda,cuda_host", "all layers": ""}
    res = {k: [] for k in modes}
    rates = {}

    def run_once():
        target.stdin.write(b"g")
        target.stdin.flush()
        return float(read_line(target.stdout, 300, "torch step result"))

    try:
        run_once()  # warm-up
        for _ in range(max(ROUNDS, 7)):  # step times wander by about 1 %: more rounds for a stable median
            for name, layers in modes.items():
                tool = None
                if layers is not None:
                    args = [os.path.join(ROOT, "memleak-ai"), "-p", str(target.pid), "-f", "json", "3600"]
                    if layers:
                        args[1:1] = ["--layers", layers]
                    tool = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    while "attached to pid" not in read_line(tool.stderr, 30, "memleak-ai attached"):
                        pass
                res[name].append(run_once())
                if tool:
                    tool.send_signal(2)
                    out, _ = tool.communicate(timeout=30)
                    rep = json.loads(out.decode().splitlines()[-1])
                    rates[name] = {k: v["allocs"] + v["frees"] for k, v in rep["stats"]["layers"].items()}
    finally:
        target.kill()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"PyTorch CPU training step ({steps} steps per run, {max(ROUNDS, 7)} rounds interleaved, one process):")
    for k, v in med.items():
        slow = (v / med["none"] - 1) * 100
        print(f"  {k:18s} median {v:7.3f} ms/step ({slow:+.2f}%)   runs: {' '.join(f'{x:.3f}' for x in res[k])}")
    for k, r in rates.items():
        per_step = {layer: n / steps for layer, n in r.items()}
        print(f"  events per step with {k}: " + ", ".join(f"{l} {n:.1f}" for l, n in per_step.items()))


if __name__ == "__main__":
    main()
