"""Benchmarks (docs/BENCHMARKS.md), each measuring its modes side by side in one run, interleaved.

Usage: scripts/bench.py [overhead|cost|startup|pyframes|unwind|torch|budget|report|fleet|rss|default|paired|start|peers ...]   (no argument: all, as `make bench`)
  overhead  malloc/free loop: no tool, empty uprobes (the floor), memleak-ai
  cost      the overhead line's share against 1 - T(without)/T(with) in the same run, on a loop with work between
            its malloc/free pairs; one calibrated hit against the empty-probe floor
  startup   command to probes attached, and to the end of one 0.5 s report: idle C target, idle PyTorch process
  pyframes  the BPF Python frame walk at 10, 50 and 100 Python frames: memleak-ai with and without --no-python
  unwind    a malloc 30 calls deep: table unwinding vs frame pointers; table sizes and build times of PyTorch
  torch     PyTorch CPU training step: no tool, torch/CUDA layers, every layer, each with and without Python frames
  report    report time over 1,000,000 outstanding allocations
  default   the PyTorch loop keeping its losses at default settings (-p, text every 2 s) against no tool
  paired    the same, two processes at once, one traced: the host's load cancels out of each round's ratio; loops
            asleep 2 ms and 0 ms a step, default settings and the torch layers, the leak named or not
  start     the same loop's first 200 steps from 'attached': what the full-cost start and the switch cost it
  fleet     16 steady PyTorch ranks under one memleak-ai --match at default settings: the tool's own CPU and memory
  memory    the tool's own VmHWM and RSS by kind: -p on a small C program, on one PyTorch rank, --match on eight
  attach    -p on a running torch job: to attached, to its first tagged block recorded with its stack, to every
            unwinding table loaded
  import    `import torch` under -c at default settings against bare, timed inside the target, in pairs
  fullcost  -c at full fidelity on the losses loop, beside a bare one: the time added a step against its probe
            hits a step at the calibrated trap cost
  owncpu    the tool's own CPU (/proc, all threads, and its overhead lines) on the losses loop asleep 2 ms a step,
            -p at default settings and the default interval
  findings  -c on the losses loop ending by itself (PyPI's torch): the run's time against none, what decoding code
            objects as their stacks come and keeping the findings cost, and whether the final report after the
            exit still names the leak
  peers     not in the default run (`make bench BENCH=peers`): the losses loop, the Dataset cache and a C program
            leaking from three sites under memleak-ai, memray attach, memray run --native, heaptrack -p and (given
            BENCH_MEMLEAK_BPFTOOLS) libbpf-tools memleak: step time against none, start-up, leak named or not
Environment: BENCH_ROUNDS (5), BENCH_ITERS (300000), BENCH_TOOL (the memleak-ai binary, ./memleak-ai),
BENCH_PYTHON (build/venv/3.12/bin/python: PyPI's torch 2.15; /usr/bin/python3.11 for Debian's 1.13), BENCH_PY_ITERS (50000), BENCH_PY_ROUNDS and BENCH_TORCH_ROUNDS (at least 7),
BENCH_TORCH_STEPS (20), BENCH_COST_WORK (arithmetic rounds between pairs, comma-separated: 2500,10000),
BENCH_COST_ITERS (pairs a run, 300000), BENCH_FLEET_RANKS (16), BENCH_FLEET_SECONDS (60), BENCH_FLEET_SETTLE (60), BENCH_UNWIND_MODES (tables,alternating,diverging,fp-build,fp-only: a subset, comma-separated),
BENCH_PEERS_SECONDS (10), BENCH_PEERS_ROUNDS (3), BENCH_PEERS_PYTHON (build/venv/3.12/bin/python),
BENCH_MEMLEAK_BPFTOOLS (a libbpf-tools memleak binary; bench.sh builds one from BENCH_BCC_SRC, a bcc checkout; unset: not run; also paired's reference row), BENCH_MEMORY_SECONDS (15),
BENCH_ATTACH_ROUNDS (3), BENCH_IMPORT_ROUNDS (5), BENCH_OWNCPU_SECONDS (60), BENCH_OWNCPU_ROUNDS (3),
BENCH_FULLCOST_SECONDS (30), BENCH_FULLCOST_ROUNDS (3), BENCH_FULLCOST_SLEEP (2), BENCH_PAIRED_SLEEPS (2,0), BENCH_PAIRED_MODES (default,torch).
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "build", "bench")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import read_line  # noqa: E402

ITERS = int(os.environ.get("BENCH_ITERS", "300000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
# the memleak-ai binary measured: a copy keeps one run's figures to one build while the tree is rebuilt
TOOL = os.environ.get("BENCH_TOOL", os.path.join(ROOT, "memleak-ai"))
# another build of memleak-ai (an older commit) measured interleaved with TOOL in the overhead bench: ratios new/old
TOOL_OLD = os.environ.get("BENCH_TOOL_OLD")
# PyPI's torch 2.15, the one the tests run and users install (scripts/make-venv.sh)
VENV_PY = os.path.join(ROOT, "build", "venv", "3.12", "bin", "python")


def torch_python():
    """The Python with torch every PyTorch mode runs: BENCH_PYTHON (/usr/bin/python3.11: Debian's torch 1.13), else
    PyPI's torch 2.15 in build/venv/3.12. A path is made absolute: modes run their loops from the workloads' folder."""
    py = os.environ.get("BENCH_PYTHON", VENV_PY)
    return os.path.abspath(py) if "/" in py else py


def prog_ids(pid):
    """IDs of the BPF programs process PID holds open (other memleak-ai runs may have programs of the same names)."""
    ids = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def prog_stats(names, pid=None):
    """(run_time_ns, run_cnt) by program name, only programs of process PID when given."""
    ids = prog_ids(pid) if pid else None
    out = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout)
    res = {}
    for p in out:
        if p.get("name") in names and (ids is None or p.get("id") in ids):
            ns, cnt = res.get(p["name"], (0, 0))
            res[p["name"]] = (ns + p.get("run_time_ns", 0), cnt + p.get("run_cnt", 0))
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


def overhead_bench():
    target = subprocess.Popen([os.path.join(B, "mallocbench"), str(ITERS)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    read_line(target.stdout, 10, "bench ready")
    pid = target.pid

    def run_once():
        target.stdin.write(b"g")
        target.stdin.flush()
        return float(read_line(target.stdout, 300, "bench result"))

    tools = [("memleak-ai", TOOL)] + ([("old", TOOL_OLD)] if TOOL_OLD else [])
    results = {"none": [], "floor": [], **{name: [] for name, _ in tools}}
    bpf = {name: {} for name, _ in tools}
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

            for name, path in tools:
                tool = subprocess.Popen([path, "-p", str(pid), "-f", "json", "--max-overhead", "100", "3600"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
                    pass
                before = prog_stats({"alloc_enter", "alloc_exit", "free_enter"}, tool.pid)
                results[name].append(run_once())
                after = prog_stats({"alloc_enter", "alloc_exit", "free_enter"}, tool.pid)
                for k, (ns, cnt) in after.items():
                    b_ns, b_cnt = before.get(k, (0, 0))
                    a_ns, a_cnt = bpf[name].get(k, (0, 0))
                    bpf[name][k] = (a_ns + ns - b_ns, a_cnt + cnt - b_cnt)
                if name == "memleak-ai":
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
    for k in results:
        print(f"  {k:11s} median {med[k]:8.1f} ns per malloc+free   runs: {' '.join(f'{x:.0f}' for x in results[k])}")
    floor_add = med["floor"] - med["none"]
    tool_add = med["memleak-ai"] - med["none"]
    print(f"  added time: floor {floor_add:.1f} ns, memleak-ai {tool_add:.1f} ns, "
          f"ratio memleak-ai/floor = {tool_add / floor_add:.3f} (goal <= 1.10)")
    for name, _ in tools:
        for k in ("alloc_enter", "alloc_exit", "free_enter"):
            ns, cnt = bpf[name].get(k, (0, 0))
            if cnt:
                print(f"  BPF run time {k:11s} ({name}): {ns / cnt:6.1f} ns per event over {cnt} events")
    if TOOL_OLD:
        old_add = med["old"] - med["none"]
        print(f"  new/old: added time {tool_add / old_add:.3f}, per malloc+free {med['memleak-ai'] / med['old']:.3f}")
        for k in ("alloc_enter", "alloc_exit", "free_enter"):
            n_ns, n_cnt = bpf["memleak-ai"].get(k, (0, 0))
            o_ns, o_cnt = bpf["old"].get(k, (0, 0))
            if n_cnt and o_cnt:
                print(f"  new/old: BPF run time {k}: {(n_ns / n_cnt) / (o_ns / o_cnt):.3f}")
    print(f"  memleak-ai CPU while attached: {tool_cpu:.2f} s total, peak RSS {tool_rss / 1024:.1f} MiB")


def cost_bench():
    """The share the overhead line reports, against 1 - T(without)/T(with) measured in the same run (modes
    interleaved: no tool, the empty-probe floor, memleak-ai with every probe on), on malloc/free pairs with work
    between them. T is taken both as elapsed time and as the target's CPU time (a loaded machine stretches the
    first). The calibrated cost of a pair's traps (two entries and a return) is shown next to the floor's."""
    works = [int(w) for w in os.environ.get("BENCH_COST_WORK", "2500,10000").split(",")]
    iters = os.environ.get("BENCH_COST_ITERS", "300000")
    for work in works:
        target = subprocess.Popen([os.path.join(B, "costbench"), iters, str(work)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        read_line(target.stdout, 10, "bench ready")

        def run_once():
            target.stdin.write(b"g")
            target.stdin.flush()
            wall, cpu = read_line(target.stdout, 600, "bench result").split()
            return float(wall), float(cpu)

        res = {"none": [], "floor": [], "memleak-ai": []}
        reported, calib = [], []
        try:
            run_once()
            for _ in range(ROUNDS):
                res["none"].append(run_once())
                fl = subprocess.Popen([os.path.join(B, "floor"), str(target.pid)], stdout=subprocess.PIPE)
                read_line(fl.stdout, 20, "floor attached")
                res["floor"].append(run_once())
                fl.kill()
                fl.wait()
                tool = subprocess.Popen([TOOL, "-p", str(target.pid), "-f", "json", "--max-overhead", "100", "0.5"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
                    pass
                arrived = []
                reader = threading.Thread(target=lambda: arrived.extend((time.time(), line) for line in tool.stdout),
                                          daemon=True)
                reader.start()
                t0 = time.time()
                res["memleak-ai"].append(run_once())
                t1 = time.time()
                tool.send_signal(signal.SIGINT)
                tool.wait(timeout=60)
                reader.join(10)
                reps = [json.loads(line) for t, line in arrived if t0 + 1.6 < t <= t1]
                pcts = [r["overhead"]["pct"] for r in reps if r["overhead"]["measured"]]
                if pcts:
                    reported.append(statistics.median(pcts))
                last = json.loads(arrived[-1][1])["overhead"] if arrived else None
                if last and last["calibrated"]:
                    calib.append(2 * last["hit_ns"] + last["ret_ns"])
        finally:
            target.kill()
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in res.items()}
        true_wall = [(1 - med["none"][0] / w) * 100 for w, _ in res["memleak-ai"]]
        true_cpu = [(1 - med["none"][1] / c) * 100 for _, c in res["memleak-ai"]]
        print(f"cost figure: {iters} pairs a run, {work} rounds of work between pairs, {ROUNDS} rounds interleaved")
        for k, (w, c) in med.items():
            print(f"  {k:11s} median {w:9.1f} ns a pair elapsed, {c:9.1f} ns CPU")
        print(f"  true share 1 - T(without)/T(with): elapsed {med_range(true_wall, '{:.1f}')} %, "
              f"CPU {med_range(true_cpu, '{:.1f}')} %")
        if reported:
            print(f"  reported share (overhead.pct, reports inside each run): {med_range(reported, '{:.1f}')} %; "
                  f"median difference from the CPU share {statistics.median(reported) - statistics.median(true_cpu):+.1f} "
                  f"points (goal: within 10)")
        if calib:
            floor_pair = med["floor"][1] - med["none"][1]
            print(f"  a pair's traps: calibrated {med_range(calib)} ns (2 entries + 1 return), empty-probe floor in "
                  f"the target {floor_pair:.0f} ns CPU ({statistics.median(calib) / floor_pair:.2f} x)")


def startup_bench():
    """From the command to the probes attached ('attached' on stderr) and to the end of a run of one 0.5 s report,
    at default settings: an idle C target, and an idle PyTorch process (unwinding tables for its ~300 files)."""
    py = torch_python()
    targets = [("C target (mallocbench, idle)", [os.path.join(B, "mallocbench")]),
               ("PyTorch target (torch_step.py after import, idle)", [py, os.path.join(ROOT, "tests", "bench",
                                                                                       "torch_step.py")])]
    tools = [("memleak-ai", TOOL)] + ([("old", TOOL_OLD)] if TOOL_OLD else [])
    for name, argv in targets:
        target = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        res = {t: ([], []) for t, _ in tools}
        try:
            read_line(target.stdout, 120, "target ready")
            for _ in range(ROUNDS):
                for t, path in tools:
                    s = time.time()
                    tool = subprocess.Popen([path, "-p", str(target.pid), "0.5", "1"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE)
                    while "attached to pid" not in read_line(tool.stderr, 120, "memleak-ai attached"):
                        pass
                    res[t][0].append(time.time() - s)
                    tool.communicate(timeout=120)
                    res[t][1].append(time.time() - s)
        finally:
            target.kill()
        print(f"start-up, {name}, {ROUNDS} rounds interleaved:")
        for t, (att, done) in res.items():
            print(f"  {t:11s} command to probes attached {med_range(att, '{:.2f}')} s, to a 0.5 s report done "
                  f"{med_range(done, '{:.2f}')} s")


def report_bench():
    for args in (["1000000", "10000"], ["1000000", "100000"], ["0", "0", "store"]):
        r = subprocess.run([os.path.join(B, "report_bench")] + args, capture_output=True, text=True)
        print("  " + (r.stdout.strip() or r.stderr.strip()))


PROGS = ("alloc_enter", "alloc_exit", "free_enter")


def start_tool(pid, extra):
    """memleak-ai -p PID with JSON reports and no periodic report during the run; returns once attached. Every
    probe stays on (--max-overhead 100) unless extra sets a budget: these runs measure the cost of tracing."""
    budget = [] if "--max-overhead" in extra else ["--max-overhead", "100"]
    tool = subprocess.Popen([TOOL, "-p", str(pid), "-f", "json", *budget, *extra, "3600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while "attached to pid" not in read_line(tool.stderr, 30, "memleak-ai attached"):
        pass
    return tool


def stop_tool(tool):
    """Ctrl-C, and the final JSON report."""
    tool.send_signal(2)
    out, _ = tool.communicate(timeout=60)
    return json.loads(out.decode().splitlines()[-1])


def stat_delta(before, after):
    return {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1]) for k in after}


def med_range(xs, fmt="{:.0f}"):
    """'median [min, max]' of a list."""
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}, {fmt.format(max(xs))}]"


def py_depths(rep):
    """Python frames in each stack of a JSON report."""
    return [sum(1 for f in st["frames"] if f.get("kind") == "python") for st in rep["stacks"]]


def pyframes_bench():
    """
    The BPF Python frame walk: one py_depth.py target per depth (10, 50, 100 Python frames at every
    allocation), each iteration one bytearray(1000): exactly one libc malloc and one free. Per round and
    depth: no tool, memleak-ai (Python frames on), memleak-ai --no-python (the two tool modes in alternating
    order). BPF run time per event from kernel.bpf_stats_enabled, of this memleak-ai's programs only.
    """
    py = torch_python()
    if not os.path.exists(py):
        print(f"  (Python frame-walk benchmark skipped: {py} not found)")
        return
    iters = int(os.environ.get("BENCH_PY_ITERS", "50000"))
    rounds = int(os.environ.get("BENCH_PY_ROUNDS", str(max(ROUNDS, 7))))
    depths = (10, 50, 100)
    version = subprocess.run([py, "--version"], capture_output=True, text=True).stdout.strip()
    targets = {}
    res = {(d, m): {"wall": [], **{k: [] for k in PROGS}} for d in depths for m in ("none", "python", "no-python")}
    failures = []

    def run_once(d):
        t = targets[d]
        t.stdin.write(b"g")
        t.stdin.flush()
        return float(read_line(t.stdout, 300, "py_depth result"))

    def command(d, c):
        targets[d].stdin.write(c)
        targets[d].stdin.flush()
        return read_line(targets[d].stdout, 30, "py_depth reply")

    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    try:
        for d in depths:
            targets[d] = subprocess.Popen([py, os.path.join(ROOT, "tests", "bench", "py_depth.py"), str(d), str(iters)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            read_line(targets[d].stdout, 30, "py_depth ready")
            if int(command(d, b"d")) != d:
                failures.append(f"depth {d}: target reports another depth")
            run_once(d)  # warm-up
        for r in range(rounds):
            for d in depths:
                res[(d, "none")]["wall"].append(run_once(d))
                for mode in (("python", "no-python") if r % 2 == 0 else ("no-python", "python")):
                    tool = start_tool(targets[d].pid, ["--no-python"] if mode == "no-python" else [])
                    before = prog_stats(set(PROGS), tool.pid)
                    res[(d, mode)]["wall"].append(run_once(d))
                    delta = stat_delta(before, prog_stats(set(PROGS), tool.pid))
                    keep = r == 0 and mode == "python"
                    if keep:
                        command(d, b"k")  # one outstanding allocation: its stack shows the depth walked
                    rep = stop_tool(tool)
                    for k in PROGS:
                        ns, cnt = delta.get(k, (0, 0))
                        res[(d, mode)][k].append(ns / cnt if cnt else float("nan"))
                        if cnt != iters:
                            failures.append(f"depth {d} {mode}: {k} ran {cnt} times for {iters} iterations")
                    ev, pys = rep["stats"]["events"], rep["stats"]["python"]
                    if ev["allocs"] != iters + keep or ev["frees"] != iters:
                        failures.append(f"depth {d} {mode}: {ev['allocs']} allocs, {ev['frees']} frees")
                    want = ev["allocs"] if mode == "python" else 0
                    if pys["with_frames"] != want or pys["truncated"] or pys["unreadable"]:
                        failures.append(f"depth {d} {mode}: python stats {pys}")
                    if keep and py_depths(rep) != [d]:
                        failures.append(f"depth {d}: kept allocation's stack has {py_depths(rep)} Python frames")
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
        for t in targets.values():
            t.kill()
    print(f"Python frame walk ({py}, {version}; {iters} x bytearray(1000) = one malloc + one free per run; "
          f"{rounds} rounds, modes interleaved, one target per depth):")
    for d in depths:
        p, n = res[(d, "python")], res[(d, "no-python")]
        walk = [a - b for a, b in zip(p["alloc_enter"], n["alloc_enter"])]
        ratio = [a / b for a, b in zip(p["wall"], n["wall"])]
        added = [a - b for a, b in zip(p["wall"], n["wall"])]
        print(f"  depth {d:3d}: BPF alloc_enter ns/event: Python frames {med_range(p['alloc_enter'])}, "
              f"--no-python {med_range(n['alloc_enter'])}; walk adds {med_range(walk)} ns")
        print(f"             alloc_exit {statistics.median(p['alloc_exit']):.0f} / {statistics.median(n['alloc_exit']):.0f} ns, "
              f"free_enter {statistics.median(p['free_enter']):.0f} / {statistics.median(n['free_enter']):.0f} ns "
              "(Python frames / --no-python)")
        print(f"             ns per iteration: no tool {med_range(res[(d, 'none')]['wall'])}, Python frames "
              f"{med_range(p['wall'])}, --no-python {med_range(n['wall'])}")
        print(f"             ratio Python frames / --no-python per iteration {med_range(ratio, '{:.3f}')}, "
              f"added {med_range(added)} ns")
        print(f"             runs alloc_enter Python frames: {' '.join(f'{x:.0f}' for x in p['alloc_enter'])}")
    at50 = statistics.median(res[(50, "python")]["alloc_enter"])
    print(f"  goal: alloc_enter < 2000 ns per event at 50 Python frames: {'met' if at50 < 2000 else 'NOT met'} "
          f"({at50:.0f} ns)")
    for f in failures:
        print(f"  CHECK FAILED: {f}")


def native_depth(rep):
    """Native frames of the one kept 64-byte allocation (caller included) of a deepbench report."""
    st = [s for s in rep["stacks"] if s["layer"] == "libc" and s["bytes"] == 64 and s["count"] == 1]
    return len(st[0]["frames"]) if st else 0


def unwind_bench():
    """
    Native unwinding: BPF run time per event of a malloc 30 calls deep (tests/bench/deepbench.c), five ways,
    interleaved per round: the -fomit-frame-pointer build unwound with the tables (the same stack every time:
    the remembered walk replays), the same with two chains that part at the top (the replay stops late and the
    walk resumes) and with two that part at malloc's caller (every walk done with the tables), the
    -fno-omit-frame-pointer build walked by frame pointers (--unwind fp: the classic capture of the same 30
    frames), and the -fomit-frame-pointer build with frame pointers only (what it costs to get almost nothing).
    Then the tables of a PyTorch process (memleak-ai -v's lines): rows, memory and build time per library.
    """
    iters = int(os.environ.get("BENCH_UNWIND_ITERS", "100000"))
    rounds = int(os.environ.get("BENCH_UNWIND_ROUNDS", str(max(ROUNDS, 5))))
    modes = {"tables": ("deepbench-nofp", [], b"g"), "alternating": ("deepbench-nofp", [], b"a"),
             "diverging": ("deepbench-nofp", [], b"b"),
             "fp-build": ("deepbench-fp", ["--unwind", "fp"], b"g"),
             "fp-only": ("deepbench-nofp", ["--unwind", "fp"], b"g")}
    only = os.environ.get("BENCH_UNWIND_MODES")
    if only:
        modes = {m: modes[m] for m in only.split(",")}
    res = {m: {"wall": [], "depth": [], "replayed": [], **{k: [] for k in PROGS}} for m in modes}
    failures = []
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    try:
        for r in range(rounds):
            order = list(modes) if r % 2 == 0 else list(reversed(modes))
            for m in order:
                exe, extra, go = modes[m]
                t = subprocess.Popen([os.path.join(B, exe), str(iters)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                read_line(t.stdout, 30, "deepbench ready")
                tool = start_tool(t.pid, extra)
                before = prog_stats(set(PROGS), tool.pid)
                t.stdin.write(go)
                t.stdin.flush()
                res[m]["wall"].append(float(read_line(t.stdout, 300, "deepbench result")))
                delta = stat_delta(before, prog_stats(set(PROGS), tool.pid))
                t.stdin.write(b"k")
                t.stdin.flush()
                read_line(t.stdout, 30, "deepbench kept")
                time.sleep(0.2)
                rep = stop_tool(tool)
                t.kill()
                t.wait()
                for k in PROGS:
                    ns, cnt = delta.get(k, (0, 0))
                    res[m][k].append(ns / cnt if cnt else float("nan"))
                    if cnt != iters:
                        failures.append(f"{m}: {k} ran {cnt} times for {iters} iterations")
                res[m]["depth"].append(native_depth(rep))
                uw = rep["stats"].get("unwind", {})
                res[m]["replayed"].append(100.0 * uw.get("replayed", 0) / max(uw.get("stacks", 0), 1))
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
    print(f"Native unwinding (malloc 30 calls deep, {iters} malloc + free per run, {rounds} rounds, interleaved):")
    labels = {"tables": "tables, -fomit-frame-pointer build", "alternating": "tables, chains parting at the top",
              "diverging": "tables, chains parting at malloc's caller",
              "fp-build": "frame pointers, -fno-omit-frame-pointer build",
              "fp-only": "frame pointers, -fomit-frame-pointer build"}
    for m in modes:
        replayed = f", replayed {statistics.median(res[m]['replayed']):.0f} %" if modes[m][1] == [] else ""
        print(f"  {labels[m]:46s}: BPF alloc_enter {med_range(res[m]['alloc_enter'])} ns/event, frames captured "
              f"{med_range(res[m]['depth'])}, ns per iteration {med_range(res[m]['wall'])}{replayed}")
    if "tables" in modes:
        at = statistics.median(res["tables"]["alloc_enter"])
        print(f"  goal: alloc_enter < 1000 ns per event for a 30-frame stack with the tables: "
              f"{'met' if at < 1000 else 'NOT met'} ({at:.0f} ns)")
    for f in failures:
        print(f"  CHECK FAILED: {f}")
    if not only:
        tables_bench()


def tables_bench():
    """The unwinding tables of a PyTorch CPU process, as memleak-ai -v reports them when it attaches (3 attaches)."""
    py = torch_python()
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode:
        print("  (table sizes skipped: no torch for " + py + ")")
        return
    t = subprocess.Popen([py, "-c", "import torch, sys; print('ready', flush=True); sys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_line(t.stdout, 60, "torch ready")
    rows = {}
    try:
        for _ in range(3):
            tool = subprocess.Popen([TOOL, "-v", "-p", str(t.pid), "--max-overhead", "100", "3600"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for line in tool.stderr:
                if "attached to pid" in line:
                    break
                m = re.search(r"unwinding table for (\S+): (\d+) rows, (\d+) index entries, (\d+) KiB, built in "
                              r"([0-9.]+) ms", line)
                if m:
                    rows.setdefault(m.group(1), []).append((int(m.group(2)), int(m.group(4)), float(m.group(5))))
            tool.send_signal(2)
            tool.communicate(timeout=60)
    finally:
        t.kill()
    total = sum(v[0][1] for v in rows.values())
    print(f"  unwinding tables of a PyTorch CPU process ({len(rows)} files, {total / 1024:.1f} MiB in all); largest:")
    for path, v in sorted(rows.items(), key=lambda kv: -kv[1][0][1])[:8]:
        print(f"    {os.path.basename(path):32s} {v[0][0]:9d} rows {v[0][1]:7d} KiB, built in "
              f"{med_range([x[2] for x in v], '{:.1f}')} ms")


def torch_bench():
    """
    PyTorch CPU training step, one process, interleaved: no tool; the torch/CUDA layers; every layer; each
    tool mode with Python frames (the default) and with --no-python.
    """
    py = torch_python()
    if not os.path.exists(py):
        print(f"  (PyTorch step benchmark skipped: {py} not found; make venv)")
        return
    steps = int(os.environ.get("BENCH_TORCH_STEPS", "20"))
    # step times wander by about 1 %: more rounds for a stable median
    rounds = int(os.environ.get("BENCH_TORCH_ROUNDS", str(max(ROUNDS, 7))))
    target = subprocess.Popen([py, os.path.join(ROOT, "tests", "bench", "torch_step.py"), str(steps)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_line(target.stdout, 120, "torch ready")
    tc = ["--layers", "torch_cpu,torch_cuda,cuda,cuda_host"]
    modes = {"none": None, "torch/cuda layers": tc, "torch/cuda --no-python": tc + ["--no-python"],
             "all layers": [], "all --no-python": ["--no-python"]}
    res = {k: [] for k in modes}
    bpf = {k: {} for k in modes}
    rates, pystats = {}, {}

    def run_once():
        target.stdin.write(b"g")
        target.stdin.flush()
        return float(read_line(target.stdout, 300, "torch step result"))

    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    try:
        run_once()  # warm-up
        for _ in range(rounds):
            for name, extra in modes.items():
                tool = start_tool(target.pid, extra) if extra is not None else None
                if tool:
                    before = prog_stats(set(PROGS), tool.pid)
                res[name].append(run_once())
                if tool:
                    for k, (ns, cnt) in stat_delta(before, prog_stats(set(PROGS), tool.pid)).items():
                        a_ns, a_cnt = bpf[name].get(k, (0, 0))
                        bpf[name][k] = (a_ns + ns, a_cnt + cnt)
                    rep = stop_tool(tool)
                    rates[name] = {k: v["allocs"] + v["frees"] for k, v in rep["stats"]["layers"].items()}
                    pystats[name] = rep["stats"]["python"]
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)
        target.kill()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"PyTorch CPU training step ({steps} steps per run, {rounds} rounds interleaved, one process):")
    for k, v in med.items():
        slow = (v / med["none"] - 1) * 100
        print(f"  {k:22s} median {v:7.3f} ms/step ({slow:+.2f}%)   runs: {' '.join(f'{x:.3f}' for x in res[k])}")
    for k, r in rates.items():
        per_step = {layer: n / steps for layer, n in r.items()}
        print(f"  events per step with {k}: " + ", ".join(f"{l} {n:.1f}" for l, n in per_step.items()))
    for k, b in bpf.items():
        if not b:
            continue
        total = sum(ns for ns, _ in b.values()) / (rounds * steps) / 1e6
        ae_ns, ae_cnt = b.get("alloc_enter", (0, 1))
        pys = pystats[k]
        print(f"  BPF with {k}: alloc_enter {ae_ns / max(ae_cnt, 1):.0f} ns/event, all programs {total:.3f} ms/step; "
              f"allocations with Python frames {pys['with_frames']} of {pys['with_frames'] + pys['without_frames']} "
              f"(last run)")
    for on, off in (("torch/cuda layers", "torch/cuda --no-python"), ("all layers", "all --no-python")):
        added = [a - b for a, b in zip(res[on], res[off])]
        b_on = sum(ns for ns, _ in bpf[on].values()) / (rounds * steps) / 1e6
        b_off = sum(ns for ns, _ in bpf[off].values()) / (rounds * steps) / 1e6
        ae_on, ae_off = (bpf[m].get("alloc_enter", (0, 1)) for m in (on, off))
        print(f"  Python frames' added cost, {on}: step time {med[on] - med[off]:+.3f} ms "
              f"({(med[on] / med[off] - 1) * 100:+.2f}%; per round {med_range(added, '{:+.3f}')} ms); "
              f"BPF run time {b_on - b_off:+.3f} ms/step ({(b_on - b_off) / med['none'] * 100:+.2f}% of a step), "
              f"{ae_on[0] / max(ae_on[1], 1) - ae_off[0] / max(ae_off[1], 1):+.0f} ns per allocation")


def timed_reports(tool, fn, warm=None):
    """Run fn() while the tool reports (JSON, 0.5 s); warm() first if given. Stop the tool. Returns fn's result
    and the overhead.pct of the reports whose sample lay inside fn's run (arrived 1.1 s after its start or
    later: a sample spans a second), and with warm, all the reports too."""
    arrived = []
    reader = threading.Thread(target=lambda: arrived.extend((time.time(), l) for l in tool.stdout), daemon=True)
    reader.start()
    if warm:
        warm()
    t0 = time.time()
    r = fn()
    t1 = time.time()
    tool.send_signal(signal.SIGINT)
    tool.wait(timeout=60)
    reader.join(10)
    reps = [json.loads(l) for _, l in arrived if l.strip()]
    inside = [json.loads(l)["overhead"]["pct"] for t, l in arrived if t0 + 1.1 < t <= t1 and l.strip()]
    return (r, inside, reps) if warm else (r, inside)


def budget_bench():
    """
    The overhead budget on the PyTorch CPU training step with planted leaks (a 256 KiB tensor and a 256 KiB
    bytearray kept every step):
    no tool; every layer with every probe kept on (--max-overhead 100); every layer at the default budget.
    In budget mode one run goes first (the tool measures its cost and switches the C heap to heap-growth
    mode), then the measured run; the planted leak must be flagged at its Python line in that mode.
    """
    py = torch_python()
    if not os.path.exists(py):
        print(f"  (budget benchmark skipped: {py} not found; make venv)")
        return
    script = os.path.join(ROOT, "tests", "bench", "torch_step.py")
    plant_line = next(n for n, t in enumerate(open(script), 1) if "# at: plant\n" in t)
    tensor_line = next(n for n, t in enumerate(open(script), 1) if "# at: plant-tensor" in t)
    steps = int(os.environ.get("BENCH_TORCH_STEPS", "20"))
    rounds = int(os.environ.get("BENCH_BUDGET_ROUNDS", str(max(ROUNDS, 7))))
    target = subprocess.Popen([py, script, str(steps), "plant"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_line(target.stdout, 120, "torch ready")
    res = {"none": [], "every probe (--max-overhead 100)": [], "default budget (2%)": []}
    flagged, flagged_t, modes_seen, costs = [], [], [], []
    shares = {"every probe (--max-overhead 100)": [], "default budget (2%)": []}

    def run_once():
        target.stdin.write(b"g")
        target.stdin.flush()
        return float(read_line(target.stdout, 300, "torch step result"))

    try:
        run_once()  # warm-up
        for _ in range(rounds):
            res["none"].append(run_once())
            tool = subprocess.Popen([TOOL, "-p", str(target.pid), "-f", "json", "--top", "20", "--max-overhead",
                                     "100", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while "attached to pid" not in read_line(tool.stderr, 30, "memleak-ai attached"):
                pass
            t, inside = timed_reports(tool, run_once)
            res["every probe (--max-overhead 100)"].append(t)
            shares["every probe (--max-overhead 100)"].append((t, inside))
            tool = subprocess.Popen([TOOL, "-p", str(target.pid), "-f", "json", "--top", "20", "0.5"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while "attached to pid" not in read_line(tool.stderr, 30, "memleak-ai attached"):
                pass
            t, inside, reps = timed_reports(tool, run_once, warm=run_once)
            res["default budget (2%)"].append(t)
            shares["default budget (2%)"].append((t, inside))
            modes_seen.append(reps[-1].get("modes", {}).get("libc"))
            costs.append(max(r["overhead"]["pct"] for r in reps if r["overhead"]["measured"]))
            def at(line, layer):
                return any(s["verdict"] == "growing" and s["layer"] == layer and
                           any(f.get("line") == line and f["kind"] == "python" for f in s["frames"])
                           for r in reps[-3:] for s in r["stacks"])
            flagged.append(at(plant_line, "libc"))
            flagged_t.append(at(tensor_line, "torch_cpu"))
    finally:
        target.kill()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"Overhead budget on the PyTorch CPU step with a planted leak ({steps} steps per run, {rounds} rounds):")
    for k, v in med.items():
        print(f"  {k:34s} median {v:7.3f} ms/step ({(v / med['none'] - 1) * 100:+.2f}%)   runs: "
              f"{' '.join(f'{x:.3f}' for x in res[k])}")
    for k, v in shares.items():
        true = [(1 - med["none"] / t) * 100 for t, _ in v]
        rep = [statistics.median(x) for _, x in v if x]
        if rep:
            print(f"  {k}: reported share {med_range(rep, '{:.2f}')}% (reports inside the timed run), "
                  f"1 - T(without)/T(with) {med_range(true, '{:.2f}')}%")
    print(f"  budget mode: libc mode at the end of each run {modes_seen}; cost measured before the switch "
          f"{med_range(costs, '{:.1f}')}%")
    print(f"  planted tensor leak (torch_cpu) flagged at torch_step.py:{tensor_line} in {sum(flagged_t)} of "
          f"{len(flagged_t)} runs; planted C-heap leak (libc, 256 KiB blocks) flagged at torch_step.py:{plant_line} "
          f"in {sum(flagged)} of {len(flagged)} runs")


def proc_cpu_s(pid):
    """User plus system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def fleet_bench():
    """BENCH_FLEET_RANKS steady PyTorch ranks, one memleak-ai --match over all of them at the default settings
    (budget 2%, 10 s interval, metrics served). Start-up: from the command to every rank traced, and the tool's
    CPU in its first BENCH_FLEET_SETTLE seconds, which hold each rank's first three heap walks (a report each).
    Then the tool's own CPU time (user + system of all its threads) over BENCH_FLEET_SECONDS, its VmRSS along the
    way, and beside it the BPF time its programs charge to the traced processes. The paced walks that follow
    come every (all the ranks' walk time) x 100 s, one rank a report: at 1/100 of a core on average, by
    construction, mostly outside the window."""
    import threading
    n = int(os.environ.get("BENCH_FLEET_RANKS", "16"))
    secs = float(os.environ.get("BENCH_FLEET_SECONDS", "60"))
    settle = float(os.environ.get("BENCH_FLEET_SETTLE", "60"))
    py = torch_python()
    tag = f"fleet{os.getpid()}"
    ranks = []
    tool = None
    try:
        t0 = time.time()
        for r in range(n):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n))
            ranks.append(subprocess.Popen([py, os.path.join(ROOT, "tests", "bench", "fleet_rank.py"), tag],
                                          stdout=subprocess.PIPE, env=env))
        for p in ranks:
            read_line(p.stdout, 300, "rank ready")
        started = time.time() - t0
        t1 = time.time()
        tool = subprocess.Popen([TOOL, "--match", f"fleet_rank\\.py {tag}$", "--metrics-listen", "127.0.0.1:0",
                                 "-f", "json", "-o", "/dev/null", "10"], stderr=subprocess.PIPE)
        notes = []

        def read_err():
            for line in tool.stderr:
                notes.append((time.time() - t1, line.decode(errors="replace").rstrip()))
        threading.Thread(target=read_err, daemon=True).start()
        while sum("tracing pid " in l for _, l in notes) < n:
            if time.time() - t1 > 300 or tool.poll() is not None:
                sys.exit(f"fleet: not every rank traced: {notes[-5:]}")
            time.sleep(0.1)
        attach = time.time() - t1
        while time.time() - t1 < settle:
            time.sleep(0.5)
        switch = next((t for t, l in notes if "heap-growth mode" in l), None)
        progs = prog_ids(tool.pid)
        names = {p["name"] for p in json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True,
                                                               text=True).stdout) if p.get("id") in progs}
        c_start = proc_cpu_s(tool.pid)
        b0, c0, w0 = prog_stats(names, tool.pid), c_start, time.time()
        rss = [proc_rss_kib(tool.pid)]
        while time.time() - w0 < secs:
            time.sleep(min(5, secs))
            rss.append(proc_rss_kib(tool.pid))
        b1, c1, w1 = prog_stats(names, tool.pid), proc_cpu_s(tool.pid), time.time()
        bpf_ns = sum(b1[k][0] - b0.get(k, (0, 0))[0] for k in b1)
        print(f"Fleet: {n} steady PyTorch ranks (started in {started:.0f} s), one memleak-ai --match, default settings, "
              f"10 s interval, --metrics-listen:")
        print(f"  start-up: all {n} traced {attach:.1f} s after the command; heap-growth mode from "
              f"{'%.1f s' % switch if switch is not None else 'never'}; the tool's CPU in its first {settle:.0f} s: "
              f"{c_start:.1f} s")
        print(f"  steady state, {w1 - w0:.0f} s from {settle:.0f} s on: the tool's own CPU {(c1 - c0) / (w1 - w0) * 100:.2f}% of "
              f"one core (user+system, all threads)")
        print(f"  the tool's VmRSS along it (MiB, every 5 s): {' '.join(str(round(r / 1024)) for r in rss)}")
        print(f"  BPF time charged to the ranks: {bpf_ns / (w1 - w0) / 1e6:.1f} ms/s in all "
              f"({bpf_ns / (w1 - w0) / 1e9 * 100:.2f}% of one core; {bpf_ns / (w1 - w0) / 1e9 * 100 / n:.2f}% "
              f"a rank)")
    finally:
        if tool and tool.poll() is None:
            tool.send_signal(signal.SIGINT)
            try:
                tool.wait(60)
            except subprocess.TimeoutExpired:
                tool.kill()
        for p in ranks:
            p.kill()
            p.wait()


def sampled_run(argv, secs, extra=(), cwd=None, until=None, usr1=False):
    """A fixture speaking ready/go on stdin, attached with -p at default settings (JSON every 2 s) for secs, or
    until it prints a line starting with until; returns (the final report, the fixture's process, that line).
    usr1: after secs, SIGUSR1 to the fixture just before the tool's final report, and its answer is the line."""
    fx = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd)
    tool = None
    try:
        read_line(fx.stdout, 120, "fixture ready")
        tool = subprocess.Popen([TOOL, "-p", str(fx.pid), "-f", "json", "--top", "60", *extra, "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while "attached to pid" not in read_line(tool.stderr, 120, "memleak-ai attached"):
            pass
        threading.Thread(target=lambda: [None for _ in tool.stderr], daemon=True).start()
        out = []
        reader = threading.Thread(target=lambda: out.extend(tool.stdout), daemon=True)
        reader.start()
        fx.stdin.write(b"g")
        fx.stdin.flush()
        line = None
        if until:
            while not (line or "").startswith(until):
                line = read_line(fx.stdout, secs + 60, until)
        else:
            time.sleep(secs)
        if usr1:
            fx.send_signal(signal.SIGUSR1)
            line = read_line(fx.stdout, 10, "the fixture's answer to SIGUSR1")
        tool.send_signal(signal.SIGINT)
        tool.wait(timeout=120)
        reader.join(timeout=60)
        return json.loads(out[-1]), fx, line
    finally:
        if tool and tool.poll() is None:
            tool.kill()


def addmm_sampled(rep):
    """The sampled count of AddmmBackward0 nodes: the C heap rows of operator new called from the addmm kernel
    (libstdc++'s operator new is a frame of its own over glibc; jemalloc's and tcmalloc's are the probe)."""
    def node(frames):
        funcs = [f.get("func") or "" for f in frames]
        funcs = funcs[1:] if funcs[:1] and funcs[0].startswith("operator new") else funcs
        return bool(funcs) and "::addmm(" in funcs[0]
    return sum(st["count"] for st in rep["stacks"] if st["layer"] == "libc" and node(st["frames"]))


def estimate_bench():
    """
    The C heap sampled in windows (heap-growth mode's default): its estimate of a leak against the truth.
    C: tests/fixtures/sampled_leak keeps a block of SIZE bytes after every 200 malloc/free pairs, at most
    RATE a second, for BENCH_ESTIMATE_SECONDS (12: six reports); the estimate is the count of its leak_step
    row, the truth the count it printed. PyTorch (PyPI's, BENCH_PYTHON or build/venv/3.12): the running-total
    loop, the sampled count of AddmmBackward0 nodes (operator new in the addmm kernel) against the heap census's
    exact count of them. Each case BENCH_ROUNDS times; the ratio estimate/truth, median [min, max].
    """
    secs = float(os.environ.get("BENCH_ESTIMATE_SECONDS", "12"))
    fixture = os.path.join(B, "sampled_leak")
    lib = "/usr/lib/x86_64-linux-gnu/"
    # (size, rate, budget, preload, bytes written of each kept block): under jemalloc and tcmalloc the records
    # weigh by resident growth, so a 64 KiB block with 256 bytes written counts as one page of its sixteen.
    je, tc = "libjemalloc.so.2", "libtcmalloc_minimal.so.4"
    cases = [(64, 2000, "2", None, 256), (1024, 2000, "2", None, 256), (65536, 200, "2", None, 256),
             (1 << 20, 20, "2", None, 256), (1024, 2000, "5", None, 256), (1024, 2000, "2", je, 256),
             (1024, 2000, "2", tc, 256), (65536, 200, "2", je, 256), (65536, 200, "2", je, 65536)]
    print(f"C heap sampled in windows, estimate over truth after {secs:.0f} s (-p, default settings but the budget):")
    for size, rate, budget, preload, written in cases:
        ratios, weights = [], []
        pre = ["env", "LD_PRELOAD=" + lib + preload] if preload else []
        for _ in range(ROUNDS):
            rep, fx, line = sampled_run(pre + [fixture, str(secs), str(size), str(rate), str(written)], secs,
                                        ["--max-overhead", budget], until="leaked")
            line = line.split()
            fx.kill()
            fx.wait()
            est = sum(st["count"] for st in rep["stacks"] if st["layer"] == "libc" and
                      [f.get("func") for f in st["frames"][:1]] == ["leak_step"])
            ratios.append(est / int(line[1]) if int(line[1]) else 0)
            weights.append((rep["modes"].get("libc_windows") or {}).get("weight", 0))
        print(f"  {size:>8} B x {rate}/s, budget {budget}%{', ' + preload if preload else ''}"
              f"{f', {written} B written' if written != 256 else ''}: "
              f"estimate/truth {med_range(ratios, '{:.2f}')}, weight {med_range(weights)}")
    py = torch_python()
    wl = os.path.join(ROOT, "tests", "workloads")
    ratios = []
    for _ in range(ROUNDS):
        rep, fx, _ = sampled_run([py, os.path.join(wl, "running_total.py"), "wait"], secs, cwd=wl)
        fx.kill()
        fx.wait()
        cen = next(p.get("census") or {} for p in rep["processes"] if p["pid"] == fx.pid)
        exact = next((t["count"] for t in cen.get("types", []) if t["name"].endswith("::AddmmBackward0")), 0)
        est = addmm_sampled(rep)
        ratios.append(est / exact if exact else 0)
    print(f"  PyTorch running total, AddmmBackward0 nodes: sampled/census {med_range(ratios, '{:.2f}')} "
          f"({' '.join(f'{r:.2f}' for r in ratios)})")
    # Under jemalloc or tcmalloc there is no census: the truth is two AddmmBackward0 nodes a step the total keeps.
    for preload in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4"):
        ratios = []
        for _ in range(ROUNDS):
            rep, fx, line = sampled_run(["env", "LD_PRELOAD=" + lib + preload, py,
                                         os.path.join(wl, "running_total.py"), "wait"], secs, cwd=wl, usr1=True)
            fx.kill()
            fx.wait()
            ratios.append(addmm_sampled(rep) / (2 * int(line.split()[1])))
        print(f"  PyTorch running total under {preload}, AddmmBackward0 nodes: sampled/(2 a step) "
              f"{med_range(ratios, '{:.2f}')} ({' '.join(f'{r:.2f}' for r in ratios)})")


def rss_bench():
    """
    The rss layer's cost on the PyTorch workloads at default settings, attached with -p: faults a second of
    the traced process, and the BPF time of the layer's four programs (the tool's own, counted for every
    process's faults and system calls, so an upper bound) per fault of the traced process.
    """
    py = torch_python()
    if not os.path.exists(py):
        print(f"  (rss benchmark skipped: {py} not found; make venv)")
        return
    secs = float(os.environ.get("BENCH_RSS_SECONDS", "20"))
    names = {"rss_fault_user", "rss_fault_kernel", "rss_page_alloc", "rss_exit"}
    wl_dir = os.path.join(ROOT, "tests", "workloads")
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    print(f"rss layer on the PyTorch workloads (default settings, -p, {secs:.0f} s after a 4 s warm-up, one at a time):")
    try:
        for script in ("steady.py", "losses.py", "dataloader_cow.py"):
            wl = subprocess.Popen([py, os.path.join(wl_dir, script), "wait"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, cwd=wl_dir)
            tool = None
            try:
                read_line(wl.stdout, 120, f"{script} ready")
                tool = start_tool(wl.pid, ["--max-overhead", "2"])  # default settings
                wl.stdin.write(b"g")
                wl.stdin.flush()
                time.sleep(4)
                b0, t0 = prog_stats(names, tool.pid), time.time()
                time.sleep(secs)
                b1, t1 = prog_stats(names, tool.pid), time.time()
                rep = stop_tool(tool)
                tool = None
                rs = rep["stats"]["rss"]
                d = {k: (b1[k][0] - b0.get(k, (0, 0))[0], b1[k][1] - b0.get(k, (0, 0))[1]) for k in b1}
                ns = sum(v[0] for v in d.values())
                faults = rs["faults"]
                mem = next((p["memory"] for p in rep["processes"] if p["pid"] == wl.pid), {})
                per = ", ".join(f"{k} {v[0] / max(v[1], 1):.0f} ns x {v[1] / (t1 - t0):.0f}/s" for k, v in sorted(d.items()))
                print(f"  {script:18s} traced faults {faults} since attach ({rs['pages']} pages, {rs['copies']} copies, "
                      f"one page in {rep['stats']['rss_sample_every']} recorded at the end); BPF {ns / (t1 - t0) / 1e6:.2f} ms/s "
                      f"({ns / (t1 - t0) / 1e9 * 100:.2f}% of a core); explained {mem.get('explained_pct')}")
                print(f"  {'':18s} per program: {per}")
            finally:
                if tool:
                    stop_tool(tool)
                wl.kill()
                wl.wait()
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)


def losses_settings(what):
    """The Python with torch (torch_python()),
    BENCH_DEFAULT_SECONDS and _ROUNDS, and the workloads' folder, for the benchmarks on
    tests/workloads/losses.py; None (and why, printed) without it."""
    py = torch_python()
    if not os.path.exists(py):
        print(f"  ({what} benchmark skipped: {py} with torch not found)")
        return None
    return (py, float(os.environ.get("BENCH_DEFAULT_SECONDS", "30")),
            int(os.environ.get("BENCH_DEFAULT_ROUNDS", str(ROUNDS))), os.path.join(ROOT, "tests", "workloads"))


def attach_default(pid, path=TOOL, stdout=subprocess.PIPE):
    """memleak-ai at default settings on pid, text every 2 s, returned once it says it is attached."""
    tool = subprocess.Popen([path, "-p", str(pid), "2"], stdout=stdout, stderr=subprocess.PIPE)
    while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
        pass
    return tool


def default_bench():
    """
    The goal's figure: the PyTorch loop that keeps its losses (tests/workloads/losses.py), memleak-ai at default
    settings attached with -p, text reports every 2 s, against no tool. Each run is a fresh process, idle
    while the tool attaches, then BENCH_DEFAULT_SECONDS (30: fifteen reports; 12 is the goal's six) of steps
    timed inside the target; the modes alternate round by round. Also the tool's own CPU time and the share it
    reported at the end, since attach (what 1 - T(without)/T(with) measures over the same run) and the last
    sample's; the spread of the runs without the tool is the noise floor of any one comparison.
    """
    settings = losses_settings("default-settings")
    if not settings:
        return
    py, secs, rounds, wl_dir = settings
    res = {"none": [], "default": []}
    tool_cpu, shares, steps = [], [], []
    for _ in range(rounds):
        for mode in res:
            wl = subprocess.Popen([py, os.path.join(wl_dir, "losses.py"), "wait", "25"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, cwd=wl_dir)
            tool = None
            try:
                read_line(wl.stdout, 120, "losses.py ready")
                if mode == "default":
                    tool = attach_default(wl.pid)
                    out = []
                    threading.Thread(target=lambda: out.extend(tool.stdout), daemon=True).start()
                    cpu0 = proc_cpu_s(tool.pid)
                wl.stdin.write(b"g")
                wl.stdin.flush()
                t0, times = time.time(), []
                while time.time() - t0 < secs:
                    times.append(float(read_line(wl.stdout, 60, "losses.py step times")))
                res[mode].append(statistics.mean(times))
                steps.append(len(times) * 25)
                if tool:
                    tool_cpu.append(proc_cpu_s(tool.pid) - cpu0)
                    tool.send_signal(signal.SIGINT)
                    tool.wait(timeout=60)
                    tool = None
                    pct = [tuple(float(g) for g in m.groups()) for m in
                           (re.search(rb"^overhead: ([0-9.]+)% of the traced processes' time \(([0-9.]+)% since "
                                      rb"attach.* itself ([0-9.]+)% of a CPU", l) for l in out) if m]
                    shares.append(pct[-1] if pct else None)
            finally:
                if tool:
                    tool.kill()
                wl.kill()
                wl.wait()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"PyTorch loop keeping its losses, -p, default settings, text every 2 s ({secs:.0f} s a run, {rounds} rounds "
          f"interleaved, a fresh process a run; about {statistics.median(steps):.0f} steps a run):")
    for k, v in res.items():
        print(f"  {k:8s} median {med[k]:7.3f} ms/step (x{med[k] / med['none']:.3f})   runs: "
              f"{' '.join(f'{x:.3f}' for x in v)}")
    ratios = [t / n for t, n in zip(res["default"], res["none"])]
    true = [(1 - med["none"] / t) * 100 for t in res["default"]]
    over = " ".join(f"{t / med['none']:.3f}" for t in res["default"])
    print(f"  per round default/none: {med_range(ratios, '{:.3f}')}; each default run over the median without: {over}")
    alone = " ".join(f"{t / med['none']:.3f}" for t in res["none"])
    print(f"  noise floor: the runs without the tool spread x{max(res['none']) / min(res['none']):.3f} (slowest over "
          f"fastest); each over their own median: {alone}")
    print(f"  1 - T(without)/T(with): {med_range(true, '{:.2f}')}%; the share reported at the end since attach: "
          f"{med_range([x[1] for x in shares if x], '{:.1f}')}%, the last sample's: "
          f"{med_range([x[0] for x in shares if x], '{:.1f}')}%")
    print(f"  tool's own CPU a run: {med_range(tool_cpu, '{:.2f}')} s over {secs:.0f} s; in its last sample "
          f"{med_range([x[2] for x in shares if x], '{:.1f}')}% of a CPU")


def owncpu_bench():
    """
    The goal's figure for the tool's own CPU: one losses loop (asleep 2 ms a step, one intra-op thread) under
    memleak-ai -p at default settings and the default interval (text every 5 s), BENCH_OWNCPU_ROUNDS (3) fresh
    runs. Each waits out 30 s of start (tables, the first heap walks), then takes BENCH_OWNCPU_SECONDS (60) of the
    tool's user and system CPU from /proc, all its threads; beside it, what its overhead lines said of it then.
    """
    settings = losses_settings("own-CPU")
    if not settings:
        return
    py, _, _, wl_dir = settings
    secs = float(os.environ.get("BENCH_OWNCPU_SECONDS", "60"))
    rounds = int(os.environ.get("BENCH_OWNCPU_ROUNDS", "3"))
    env = dict(os.environ, OMP_NUM_THREADS="1", LOSSES_SLEEP_MS="2")
    pct, said, loads = [], [], []
    for _ in range(rounds):
        wl = subprocess.Popen([py, os.path.join(wl_dir, "losses.py"), "wait"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, cwd=wl_dir, env=env)
        tool = None
        try:
            read_line(wl.stdout, 120, "losses.py ready")
            tool = subprocess.Popen([TOOL, "-p", str(wl.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
                pass
            out = []
            threading.Thread(target=lambda: out.extend(tool.stdout), daemon=True).start()
            threading.Thread(target=lambda: [None for _ in tool.stderr], daemon=True).start()
            wl.stdin.write(b"g")
            wl.stdin.flush()
            time.sleep(30)
            n0, c0, t0 = len(out), proc_cpu_s(tool.pid), time.time()
            time.sleep(secs)
            pct.append((proc_cpu_s(tool.pid) - c0) * 100 / (time.time() - t0))
            loads.append(os.getloadavg()[0])
            said += [float(m.group(1)) for m in (re.search(rb"^overhead: .* itself ([0-9.]+)% of a CPU", l)
                                                 for l in out[n0:]) if m]
        finally:
            if tool:
                tool.kill()
            wl.kill()
            wl.wait()
    print(f"memleak-ai's own CPU, -p on the losses loop asleep 2 ms a step, default settings and interval ({rounds} "
          f"runs of {secs:.0f} s after 30 s):")
    print(f"  by /proc, all threads: {med_range(pct, '{:.2f}')}% of a core (runs: {' '.join(f'{x:.2f}' for x in pct)}); "
          f"its overhead lines then: {med_range(said, '{:.1f}') + '%' if said else 'none read'}; load average {med_range(loads, '{:.2f}')}")


def fullcost_round(py, wl_dir, secs, sleep_ms):
    """One round: two fresh losses loops at once, one bare, one under memleak-ai -c at full fidelity (JSON every
    2 s on the tool's stdout, the loop's step times among them). Returns the mean step times (bare, traced) over
    secs, and the traced loop's periodic reports."""
    env = dict(os.environ, OMP_NUM_THREADS="1", LOSSES_SLEEP_MS=str(sleep_ms))
    every = max(1, int(50 / (sleep_ms + 1)))
    script = [py, os.path.join(wl_dir, "losses.py"), "wait", str(every)]
    bare = subprocess.Popen(script, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=wl_dir, env=env)
    # The reports to a file: on the target's stdout, a line of its would land inside a report's.
    jdir = tempfile.mkdtemp(prefix="fullcost-")
    tool = subprocess.Popen([TOOL, "-f", "json", "--json", os.path.join(jdir, "r.jsonl"), "--max-overhead", "100",
                             "-c", " ".join(script), "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=wl_dir, env=env)
    lines = []
    try:
        threading.Thread(target=lambda: [lines.append(l) for l in tool.stdout if not l.startswith(b"{")],
                         daemon=True).start()
        read_line(bare.stdout, 120, "losses.py ready")
        t0 = time.time()
        while not any(l.startswith(b"ready") for l in lines):
            if time.time() - t0 > 300 or tool.poll() is not None:
                raise RuntimeError("the traced loop did not start")
            time.sleep(0.1)
        for p in (bare, tool):
            p.stdin.write(b"g")
            p.stdin.flush()
        times, t0, n0, c0 = [], time.time(), len(lines), proc_cpu_s(tool.pid)
        while time.time() - t0 < secs:
            times.append(float(read_line(bare.stdout, 60, "losses.py step times")))
        tool_pct = (proc_cpu_s(tool.pid) - c0) * 100 / (time.time() - t0)
        traced = [float(l) for l in lines[n0:] if re.match(rb"^[0-9.]+$", l.strip())]
        with open(os.path.join(jdir, "r.jsonl")) as f:  # whole lines: the tool may be writing the next
            reps = [json.loads(l) for l in f if l.endswith("\n")]
        return statistics.mean(times[2:]), statistics.mean(traced[2:]), reps, tool_pct
    finally:
        tool.send_signal(signal.SIGINT)
        try:
            tool.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tool.kill()
        bare.kill()
        bare.wait()
        shutil.rmtree(jdir, ignore_errors=True)


def fullcost_bench():
    """
    Issue 36's full-fidelity goal: the time memleak-ai adds to a step of the losses loop under -c at full fidelity
    (--max-overhead 100) against what its probe hits cost at the calibrated trap cost. Each of BENCH_FULLCOST_ROUNDS
    (3) rounds runs a bare loop and a traced one at once (asleep BENCH_FULLCOST_SLEEP ms a step, 2), for
    BENCH_FULLCOST_SECONDS (30) after both start stepping. Per step: the hits and the step clock's steps between
    the traced run's second and last periodic reports, times the hit's and the return's calibrated costs; the
    added time is the traced mean less the bare one. The BPF programs' own time is shown beside, not counted in.
    """
    settings = losses_settings("full-fidelity cost")
    if not settings:
        return
    py, _, _, wl_dir = settings
    secs = float(os.environ.get("BENCH_FULLCOST_SECONDS", "30"))
    rounds = int(os.environ.get("BENCH_FULLCOST_ROUNDS", "3"))
    sleep_ms = float(os.environ.get("BENCH_FULLCOST_SLEEP", "2"))
    print(f"PyTorch loop keeping its losses, -c at full fidelity against bare, side by side, asleep {sleep_ms:g} ms "
          f"a step ({rounds} rounds of {secs:.0f} s):")
    ratios, with_bpf = [], []
    for _ in range(rounds):
        tb, tt, reps, tool_pct = fullcost_round(py, wl_dir, secs, sleep_ms)
        per = [r for r in reps if not r.get("final") and (r.get("steps") or {}).get("most")][1:]
        if len(per) < 2 or per[-1]["steps"]["most"] <= per[0]["steps"]["most"]:
            print(f"  round: too few reports with steps ({len(per)})")
            continue
        a, b = per[0], per[-1]
        steps = b["steps"]["most"] - a["steps"]["most"]
        hits = lambda r, k: sum(v[k] for v in r["stats"]["hits"].values() if isinstance(v, dict))  # noqa: E731
        plain = lambda r: sum(v for v in r["stats"]["hits"].values() if not isinstance(v, dict))  # noqa: E731
        ov = b["overhead"]
        e = (hits(b, "entry") - hits(a, "entry") + plain(b) - plain(a)) / steps
        r = (hits(b, "return") - hits(a, "return")) / steps
        pred_ms = (e * ov["hit_ns"] + r * ov["ret_ns"]) / 1e6
        added = tt - tb
        span = b["time_unix"] - a["time_unix"]
        bpf_ms = ov.get("bpf_ns_per_s", 0) / 1e6 * span / steps if span else 0
        ratios.append(added / pred_ms)
        with_bpf.append(added / (pred_ms + bpf_ms))
        print(f"  bare {tb:.3f} ms/step, traced {tt:.3f}: adds {added * 1e3:.0f} us; {steps} steps in {span:.0f} s, "
              f"{e:.1f} entry and {r:.1f} return hits a step at {ov['hit_ns'] / 1e3:.2f} us and {ov['ret_ns'] / 1e3:.2f} "
              f"us: {pred_ms * 1e3:.0f} us (x{added / pred_ms:.2f}); with the BPF programs' {bpf_ms * 1e3:.0f} us a step: "
              f"x{added / (pred_ms + bpf_ms):.2f}; the tool {tool_pct:.0f}% of a core; load {os.getloadavg()[0]:.2f}")
    if ratios:
        print(f"  added over hits x trap cost: {med_range(ratios, 'x{:.2f}')} (goal <= x1.2); with the programs' time: "
              f"{med_range(with_bpf, 'x{:.2f}')}")


def steps_bench():
    """
    The step clock's cost (issue 39): the losses loop (5 ms asleep a step: about 150 steps a second, a step clock's
    worst case) with the tool attached (-p, --layers cuda: no CPU allocator probed, so the clock is what is left) by
    turns with the clock and with --step none, BENCH_STEPS_ROUNDS (3) pairs of BENCH_DEFAULT_SECONDS. The clock's
    steps against the script's, its traps a second, and what they cost at the calibrated trap time.
    """
    settings = losses_settings("steps")
    if not settings:
        return
    py, secs, _, wl_dir = settings
    rounds = int(os.environ.get("BENCH_STEPS_ROUNDS", "3"))
    res, counted, rate, hit_us = {"clock": [], "none": []}, [], [], []
    for _ in range(rounds):
        for mode in res:
            wl = subprocess.Popen([py, os.path.join(wl_dir, "losses.py"), "wait", "25"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, cwd=wl_dir, env=dict(os.environ, OMP_NUM_THREADS="1"))
            out = tempfile.mktemp(prefix="bench-steps-")
            tool = None
            try:
                read_line(wl.stdout, 120, "losses.py ready")
                tool = subprocess.Popen([TOOL, "-l", "cuda", "--json", out, *(["--step", "none"] if mode == "none" else []),
                                         "-p", str(wl.pid), "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
                    pass
                wl.stdin.write(b"g")
                wl.stdin.flush()
                t0, times = time.time(), []
                while time.time() - t0 < secs:
                    times.append(float(read_line(wl.stdout, 60, "losses.py step times")))
                tool.send_signal(signal.SIGINT)
                tool.wait(timeout=60)
                wl.kill()
                res[mode].append(statistics.mean(times))
                last = [json.loads(l) for l in open(out)][-1]
                if mode == "clock":
                    counted.append((last["steps"]["most"], len(times) * 25))
                    rate.append(last["stats"]["hits"]["step"] / (time.time() - t0))
                    hit_us.append(last["overhead"]["hit_ns"] / 1e3)
            finally:
                if tool and tool.poll() is None:
                    tool.kill()
                wl.kill()
                wl.wait()
                if os.path.exists(out):
                    os.unlink(out)
    ratios = [c / n for c, n in zip(res["clock"], res["none"])]
    ms = statistics.median(res["clock"])
    print(f"Step clock, losses loop (5 ms asleep a step), -p --layers cuda, with the clock and with --step none by turns "
          f"({rounds} pairs of {secs:.0f} s):")
    print(f"  steps counted / the script's steps by the time the tool stopped, each run: "
          f"{' '.join(f'{c}/{n}' for c, n in counted)} (the script counts in 25s: the clock may be up to 24 ahead)")
    print(f"  step time with / without the clock, each pair: {' '.join(f'{r:.3f}' for r in ratios)}; median "
          f"x{statistics.median(ratios):.3f} ({ms:.3f} ms a step with it)")
    print(f"  {statistics.median(rate):.0f} step traps/s at {statistics.median(hit_us):.2f} us (calibrated): "
          f"{statistics.median(hit_us) / 1e3 / ms * 100:.2f} % of a step, one trap a step")


def busy_cpu_s():
    """CPU seconds the whole machine has spent busy (every CPU's non-idle time, /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pids):
    """CPU seconds of these processes and their live descendants (the bench's own work)."""
    seen, total = set(), 0.0
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            total += proc_cpu_s(pid)
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total


class Others:
    """The CPU that processes other than the bench's own used over a stretch: the machine's busy time less the
    bench's tree's. A figure measured beside more than OTHERS_MAX of a CPU is measured again."""
    MAX = 0.2

    def __init__(self, pids):
        self.pids, self.t0, self.busy0, self.ours0 = pids, time.time(), busy_cpu_s(), tree_cpu_s(pids)

    def cpus(self):
        dt = time.time() - self.t0
        return max(0.0, (busy_cpu_s() - self.busy0) - (tree_cpu_s(self.pids) - self.ours0)) / dt if dt > 0 else 0.0


def bpftools_start(path, pid):
    """libbpf-tools memleak -p pid, a report every 2 s, line-buffered, returned once it says it traces: older
    versions say "Tracing outstanding memory allocs", newer "Attaching to pid"."""
    tool = subprocess.Popen(["stdbuf", "-oL", path, "-p", str(pid), "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    line = ""
    while not any(w in line for w in ("Tracing outstanding memory allocs", "Attaching to pid")):
        line = read_line(tool.stdout, 120, "memleak (libbpf-tools) attached")
    return tool


PAIRED_MODES = {"default": [], "torch": ["--layers", "torch_cpu,torch_cuda,cuda,cuda_host"], "bpftools": ["bpftools"]}


def paired_round(py, wl_dir, secs, sleep_ms, args, which):
    """One paired round: two fresh losses loops sleeping sleep_ms a step, memleak-ai (-f json -p PID 2, plus args)
    on wls[which] unless args is None. Returns (traced/untraced or other/one, the JSON reports, the other
    processes' CPU)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", LOSSES_SLEEP_MS=str(sleep_ms))
    every = max(1, int(50 / (sleep_ms + 1)))
    wls = [subprocess.Popen([py, os.path.join(wl_dir, "losses.py"), "wait", str(every)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=wl_dir, env=env) for _ in range(2)]
    tool, out = None, []
    try:
        for wl in wls:
            read_line(wl.stdout, 120, "losses.py ready")
        if args == ["bpftools"]:  # the reference: libbpf-tools memleak, every malloc probed, text every 2 s
            tool = bpftools_start(os.environ["BENCH_MEMLEAK_BPFTOOLS"], wls[which].pid)
            threading.Thread(target=lambda: [None for _ in tool.stdout], daemon=True).start()
        elif args is not None:
            tool = subprocess.Popen([TOOL, "-f", "json", *args, "-p", str(wls[which].pid), "2"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
                pass
            threading.Thread(target=lambda: out.extend(tool.stdout), daemon=True).start()
            threading.Thread(target=lambda: [None for _ in tool.stderr], daemon=True).start()
        others = Others([os.getpid()])
        times = [[], []]

        def timed(k):
            t0 = time.time()
            while time.time() - t0 < secs:
                times[k].append(float(read_line(wls[k].stdout, 60, "losses.py step times")))
        for wl in wls:
            wl.stdin.write(b"g")
            wl.stdin.flush()
        ths = [threading.Thread(target=timed, args=(k,)) for k in range(2)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        cpus = others.cpus()
        mean = [statistics.mean(t) for t in times]
        if tool:
            tool.send_signal(signal.SIGINT)
            tool.wait(timeout=60)
            tool = None
        reps = [json.loads(l) for l in out if l.startswith(b"{")]
        return mean[which] / mean[1 - which], reps, cpus
    finally:
        if tool:
            tool.kill()
        for wl in wls:
            wl.kill()
            wl.wait()


def paired_bench():
    """
    The goal's figure with the host's noise cancelled: each round starts two fresh losses.py processes (one intra-op
    thread each: the two vCPUs hold both), attaches memleak-ai (-f json -p PID 2) to one of them, the first or the
    second by turns, and starts both together; the ratio is the traced one's mean step time over the other's, both
    over the same BENCH_DEFAULT_SECONDS. Null rounds (neither traced) give the spread of that ratio without any
    tool. Loops: BENCH_PAIRED_SLEEPS (ms asleep a step, "2,0": LOSSES_SLEEP_MS); tool settings: BENCH_PAIRED_MODES
    ("default,torch": the default, and --layers torch_cpu,torch_cuda,cuda,cuda_host). Each traced round also says
    whether the loss line was a top-3 leak candidate within the first 6 reports, the tool's own CPU in its last
    report, and the calibrated trap cost. A round run beside more than 0.2 of a CPU of other processes' work is run
    again (up to twice).
    What the two loops share: the machine's load, and the tool's machine-wide tracepoint programs (rss, heap
    growth), which run a filter for the untraced process's faults and system calls too.
    """
    settings = losses_settings("paired default-settings")
    if not settings:
        return
    py, secs, rounds, wl_dir = settings
    nulls = int(os.environ.get("BENCH_PAIRED_NULL", str(max(2, rounds // 2))))
    sleeps = [float(x) for x in os.environ.get("BENCH_PAIRED_SLEEPS", "2,0").split(",")]
    modes = os.environ.get("BENCH_PAIRED_MODES", "default,torch").split(",")
    if os.environ.get("BENCH_MEMLEAK_BPFTOOLS") and "bpftools" not in modes:
        modes.append("bpftools")  # the reference row: libbpf-tools memleak
    want = (os.path.join(wl_dir, "losses.py"), next(i for i, l in enumerate(open(os.path.join(wl_dir, "losses.py")), 1)
                                                    if "# LEAK" in l))
    for sleep_ms in sleeps:
        # the null rounds spread among the tool's: each kind at even steps over the run, the modes by turns
        order = sorted([((i + 0.5) / rounds, m, i % 2) for i in range(rounds) for m in modes] +
                       [((i + 0.5) / nulls, None, i % 2) for i in range(nulls)], key=lambda o: (o[0], o[1] or ""))
        res = {m: [] for m in modes + [None]}
        for _, mode, which in order:
            for _attempt in range(3):
                ratio, reps, cpus = paired_round(py, wl_dir, secs, sleep_ms,
                                                 None if mode is None else PAIRED_MODES[mode], which)
                if cpus <= Others.MAX:
                    break
            res[mode].append((ratio, reps, cpus))
        print(f"PyTorch loop keeping its losses, {sleep_ms:g} ms asleep a step, two at once, one traced (-f json -p "
              f"PID 2; {secs:.0f} s a round, {rounds} rounds a mode, {nulls} without, interleaved; load "
              f"{os.getloadavg()[0]:.2f}):")
        for mode in modes:
            rows = res[mode]
            ratios = [r for r, _, _ in rows]
            named = [any(peer_verdict(memleak_ai_entries(rep), want)[0] == "yes" for rep in reps[:6])
                     for _, reps, _ in rows]
            last = [reps[-1]["overhead"] for _, reps, _ in rows if reps]
            print(f"  {mode:8s} traced/untraced, each round: {' '.join(f'{r:.3f}' for r in ratios)}; median "
                  f"x{statistics.median(ratios):.3f}, highest x{max(ratios):.3f}")
            if not last:  # libbpf-tools memleak: no JSON to read
                print(f"  {'':8s} others' CPU {med_range([c for _, _, c in rows], '{:.2f}')}")
                continue
            # each run's median over its periodic reports: the final one's interval is short and does the most
            own = [statistics.median(r["overhead"]["tool_cpu_pct"] for r in reps[1:-1] if not r.get("final"))
                   for _, reps, _ in rows if len(reps) > 2]
            print(f"  {'':8s} share reported since attach {med_range([o['pct_since_attach'] for o in last], '{:.1f}')}%; "
                  f"tool's own CPU {med_range(own, '{:.2f}')}% of a CPU; "
                  f"{med_range([o['hits_per_s'] for o in last])} hits/s at "
                  f"{med_range([o['hit_ns'] / 1e3 for o in last], '{:.2f}')} us calibrated; loss line a top-3 "
                  f"candidate within 6 reports: {sum(named)} of {len(named)}; others' CPU "
                  f"{med_range([c for _, _, c in rows], '{:.2f}')}")
        print(f"  null rounds (neither traced), one over the other: {' '.join(f'{r:.3f}' for r, _, _ in res[None])}; "
              f"others' CPU {med_range([c for _, _, c in res[None]], '{:.2f}')}")


def start_bench():
    """
    What the start costs the job: the losses loop is told to go when memleak-ai says it is attached (default
    settings, -p, text every 2 s), and its first BENCH_START_STEPS steps (200: about 1.6 s) are timed; the
    excess over the same steps without the tool is the time the job lost to the full-cost probes before the
    budget's first decision and switch, plus whatever the rest of the start costs. Each line of the loop is
    the mean of 5 steps; the first half second is also given on its own. With BENCH_TOOL_OLD, that binary too,
    interleaved.
    """
    settings = losses_settings("start")
    if not settings:
        return
    py, _, _, wl_dir = settings
    n = int(os.environ.get("BENCH_START_STEPS", "200")) // 5
    rounds = int(os.environ.get("BENCH_START_ROUNDS", str(ROUNDS)))
    modes = [("none", None), ("memleak-ai", TOOL)] + ([("old", TOOL_OLD)] if TOOL_OLD else [])
    total = {m: [] for m, _ in modes}
    half = {m: [] for m, _ in modes}
    for _ in range(rounds):
        for mode, tool_path in modes:
            wl = subprocess.Popen([py, os.path.join(wl_dir, "losses.py"), "wait", "5"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, cwd=wl_dir)
            tool = None
            try:
                read_line(wl.stdout, 120, "losses.py ready")
                if tool_path:
                    tool = attach_default(wl.pid, tool_path, subprocess.DEVNULL)
                    threading.Thread(target=lambda: [None for _ in tool.stderr], daemon=True).start()
                wl.stdin.write(b"g")
                wl.stdin.flush()
                ms = [float(read_line(wl.stdout, 60, "losses.py step times")) * 5 for _ in range(n)]  # 5 steps a line
                total[mode].append(sum(ms))
                acc, t = 0, 0.0
                for x in ms:
                    if t >= 500:
                        break
                    t += x
                    acc += 1
                half[mode].append((t, acc))
            finally:
                if tool:
                    tool.send_signal(signal.SIGINT)
                    tool.wait(timeout=60)
                wl.kill()
                wl.wait()
    base = statistics.median(total["none"])
    print(f"Start on the losses loop ({n * 5} steps from 'attached', default settings, -p, {rounds} rounds interleaved):")
    for mode, _ in modes:
        ex = [t - base for t in total[mode]]
        print(f"  {mode:10s} {statistics.median(total[mode]):7.0f} ms for the steps, lost to the tool "
              f"{med_range(ex, '{:+.0f}')} ms; first half second: {med_range([t / a / 5 for t, a in half[mode]], '{:.2f}')} "
              f"ms/step")


def findings_bench():
    """
    What a run's findings cost on a script that ends by itself: `-c` at default settings on the losses loop
    (BENCH_FINDINGS_STEPS steps, 1,500: about 12 s, after import torch) under PyPI's torch, against the same
    command without the tool, interleaved. From the final report, written after the exit: the code objects
    decoded as their stacks came and that time, the time keeping the findings took, the frames left unresolved,
    and whether the leak's line is still a top-three candidate. The load average is printed with each round.
    """
    py = os.environ.get("BENCH_FINDINGS_PYTHON", VENV_PY)
    if not os.path.exists(py):
        print(f"  (findings benchmark skipped: {py} not found; make venv)")
        return
    steps = os.environ.get("BENCH_FINDINGS_STEPS", "1500")
    rounds = int(os.environ.get("BENCH_FINDINGS_ROUNDS", "3"))
    wl = os.path.join(ROOT, "tests", "workloads")
    cmd = [py, os.path.join(wl, "losses.py"), "run", "0", steps]
    leak = next(i for i, l in enumerate(open(cmd[1]), 1) if "# LEAK" in l)
    bare, traced, rows = [], [], []
    for _ in range(rounds):
        t0 = time.monotonic()
        subprocess.run(cmd, cwd=wl, stdout=subprocess.DEVNULL, check=True)
        bare.append(time.monotonic() - t0)
        out = os.path.join(B, "findings.json")
        t0 = time.monotonic()
        subprocess.run([TOOL, "--json", out, "-c", " ".join(cmd), "2"], cwd=wl, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        traced.append(time.monotonic() - t0)
        final = [json.loads(l) for l in open(out) if l.strip()][-1]
        py_st, peak = final["stats"]["python"], final.get("peak", {})
        named = any(s["verdict"] == "growing" and any((f.get("file") or "").endswith("losses.py") and f.get("line") == leak
                                                       for f in s["frames"]) for s in
                    [s for s in final["stacks"] if s["verdict"] == "growing"][:3])
        rows.append((py_st["code_objects_learned"], py_st["learn_ms"], peak.get("keep_ms", 0),
                     py_st["unresolved_frames"], "exited" in final, named, os.getloadavg()[0]))
    print(f"Findings on the losses loop ending by itself ({steps} steps, -c, default settings, {rounds} rounds):")
    print(f"  none {statistics.median(bare):.1f} s, memleak-ai {statistics.median(traced):.1f} s (import torch and "
          f"the loop, with the tool's start and its end)")
    for learned, learn_ms, keep_ms, unresolved, exited, named, load in rows:
        print(f"  code objects decoded as stacks came {learned} in {learn_ms:.1f} ms; findings kept in {keep_ms:.1f} ms; "
              f"unresolved frames shown {unresolved}; final after the exit: {exited}, leak line a top-3 candidate: "
              f"{named}; load {load:.2f}")


# --- peers: the same workloads under Memray, heaptrack and (given a binary) libbpf-tools memleak -------------------
C_LEAKS = ("leak_session", "leak_token", "leak_frame")  # tests/bench/three_leaks.c


def peer_verdict(entries, want):
    """Whether the top 3 entries (each a list of (function, file, line) frames, innermost first) name the leak:
    want is (script path, line) for a Python workload, the leaking functions for the C program. Returns
    (named, what the first entry shows)."""
    def shows(frames):
        if isinstance(want, tuple):
            own = next((f for f in frames if f[1] == want[0]), None)
            if own:
                return f"{os.path.basename(own[1])}:{own[2]}"
        skip = ("malloc", "calloc", "realloc", "operator new", "c10::alloc_cpu", "__libc_")
        f = next((f for f in frames if f[0] and not f[0].startswith(skip)), frames[0] if frames else None)
        return (f[0] or "?")[:60] if f else "?"
    if isinstance(want, tuple):
        named = any(next((f for f in e if f[1] == want[0]), (0, 0, None))[2] == want[1] for e in entries[:3])
        named = "yes" if named else "no"
    else:
        found = {w for w in want for e in entries[:3] for f in e if f[0] and f[0].split("(")[0].endswith(w)}
        named = f"{len(found)}/{len(want)}"
    return named, " | ".join(shows(e) for e in entries[:3]) or "(no entry)"


def memleak_ai_entries(rep):
    """The final JSON report's first three leak candidates (verdict growing, the default sort), else its top
    three stacks."""
    cands = [s for s in rep["stacks"] if s["verdict"] == "growing"] or rep["stacks"]
    return [[(f.get("func"), f.get("file"), f.get("line")) for f in s["frames"]] for s in cands[:3]]


def heaptrack_entries(path):
    """heaptrack_print's MEMORY LEAKS section, largest first: each entry's text (the allocating function, and the
    backtraces merged under it) as frames of (line, None, None)."""
    r = subprocess.run(["heaptrack_print", "-f", path, "-l", "1", "-p", "0", "-a", "0", "-T", "0", "-n", "3",
                        "-s", "5"], capture_output=True, text=True, timeout=300)
    sec = r.stdout.split("MEMORY LEAKS", 1)[1] if "MEMORY LEAKS" in r.stdout else ""
    entries = []
    for line in sec.splitlines():
        if re.match(r"^\S.* leaked over \d+ calls from$", line):
            entries.append([])
        elif entries and line.strip() and "leaked over" not in line and not line.startswith(("total runtime", "calls to", "temporary", "peak", "MOST")):
            name = line.strip()
            if not name.startswith(("in /", "at ")):
                entries[-1].append((name, None, None))
        elif line.startswith(("total runtime", "MOST")):
            break
    return entries


def bpftools_entries(text):
    """libbpf-tools memleak's last report: its first three stacks ('N bytes in M allocations from stack', then
    one frame a line, '#k [<addr>] function+off' or similar)."""
    blocks = re.split(r"\n(?=\[\d\d:\d\d:\d\d\])", text)
    last = next((b for b in reversed(blocks) if "allocations from stack" in b), "")
    entries = []
    for line in last.splitlines():
        if "allocations from stack" in line:
            entries.append([])
        elif entries and line.strip():
            m = re.search(r"\]\s+(\S+?)(\+0x[0-9a-f]+)?(\s|$)", line) or re.search(r"^\s*\d+\s+(\S+)", line)
            if m:
                entries[-1].append((m.group(1), None, None))
    return entries


def peers_bench():
    """
    The same three workloads under each peer, one fresh process a run, every mode once a round, the modes
    interleaved (BENCH_PEERS_ROUNDS rounds, 3): losses.py and dataset_cache.py (PyPI's torch in
    build/venv/3.12) and tests/bench/three_leaks.c (three named functions leaking at steady rates). Modes: no
    tool; memleak-ai -p at default settings (JSON every 2 s); memray attach (Python frames); memray run --native
    (launches the script); heaptrack -p; libbpf-tools memleak -p given BENCH_MEMLEAK_BPFTOOLS. Memray is Python's
    only: not run on the C program. Each run: the target is started and idle ('ready'), the tool attached
    (start-up: from the command to the tool saying it is attached, or to its command returning for memray
    attach; for memray run, from the command to the script's 'ready', against the bare one's), then
    BENCH_PEERS_SECONDS (10) of steps timed inside the target; the ratio is the run's mean step over the bare
    run's of the same round. Beside every run a bare twin of the same workload is started, let go and timed
    over the same seconds (the paired design): the load both saw cancels out of that ratio, and the bare
    mode's twin ratio is the instrument's own noise. Then the tool is stopped its own way and its report read: whether the workload's
    '# LEAK' line (Python: the innermost frame in the script's own file) or the leaking functions (C) are in
    its top three leak entries.
    """
    py = os.environ.get("BENCH_PEERS_PYTHON", VENV_PY)
    if not os.path.exists(py):
        print(f"  (peers benchmark skipped: {py} not found: scripts/make-venv.sh)")
        return
    memray = os.path.join(os.path.dirname(py), "memray")
    bpftools = os.environ.get("BENCH_MEMLEAK_BPFTOOLS")
    secs = float(os.environ.get("BENCH_PEERS_SECONDS", "10"))
    rounds = int(os.environ.get("BENCH_PEERS_ROUNDS", "3"))
    wl_dir = os.path.join(ROOT, "tests", "workloads")
    tmp = os.path.join(B, "peers")
    os.makedirs(tmp, exist_ok=True)

    def leak_line(script):
        with open(os.path.join(wl_dir, script)) as f:
            return next(i for i, l in enumerate(f, 1) if "# LEAK" in l)

    workloads = [("losses loop", [os.path.join(wl_dir, "losses.py")], "10", "py"),
                 ("Dataset cache", [os.path.join(wl_dir, "dataset_cache.py")], "10", "py"),
                 ("C, three leaks", [os.path.join(B, "three_leaks")], "250", "c")]
    modes = ["none", "memleak-ai", "memray attach", "memray run --native", "heaptrack -p"] + \
        (["memleak (libbpf-tools)"] if bpftools else [])
    if not os.path.exists(memray):
        print(f"  (memray not installed in {os.path.dirname(py)}: scripts/bench.sh installs it)")
        modes = [m for m in modes if not m.startswith("memray")]
    res = {(w[0], m): {"ms": [], "ratio": [], "pair": [], "start": [], "named": [], "shows": [], "err": []}
           for w in workloads for m in modes}
    t_begin = time.time()

    for rnd in range(rounds):
        for name, argv, every, lang in workloads:
            want = ((argv[0], leak_line(os.path.basename(argv[0]))) if lang == "py" else set(C_LEAKS))
            base = None
            for mode in modes:
                if lang == "c" and mode.startswith("memray"):
                    continue
                r = res[(name, mode)]
                cap = os.path.join(tmp, f"{mode.split()[0]}-{lang}.bin")
                for p in (cap,):
                    if os.path.exists(p):
                        os.unlink(p)
                cmd = ([py] if lang == "py" else []) + argv + ["wait", every]
                if mode == "memray run --native":
                    cmd = [memray, "run", "--native", "-q", "-f", "-o", cap] + cmd[1:]
                tool = wl = twin = None
                tool_out = []
                try:
                    # the twin: the same workload, bare, started and timed with it: the load both saw cancels
                    twin = subprocess.Popen(([py] if lang == "py" else []) + argv + ["wait", every],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=wl_dir)
                    read_line(twin.stdout, 300, f"{name} twin ready")
                    t0 = time.time()
                    wl = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=wl_dir)
                    while not read_line(wl.stdout, 300, f"{name} ready").startswith("ready"):
                        pass
                    t_ready = time.time() - t0
                    lines, twin_lines = [], []

                    def go():
                        if not lines:
                            for p, ls in ((wl, lines), (twin, twin_lines)):
                                p.stdin.write(b"g")
                                p.stdin.flush()
                                ls.append((0, b""))
                                threading.Thread(target=lambda p=p, ls=ls: ls.extend((time.time(), l) for l in p.stdout),
                                                 daemon=True).start()
                    t0 = time.time()
                    if mode == "none":
                        r["start"].append(t_ready)
                    elif mode == "memray run --native":
                        r["start"].append(t_ready)
                    elif mode == "memleak-ai":
                        tool = subprocess.Popen([TOOL, "-p", str(wl.pid), "-f", "json", "2"], stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
                        while "attached to pid" not in read_line(tool.stderr, 120, "memleak-ai attached"):
                            pass
                        r["start"].append(time.time() - t0)
                        threading.Thread(target=lambda t=tool: tool_out.extend(t.stdout), daemon=True).start()
                        threading.Thread(target=lambda t=tool: [None for _ in t.stderr], daemon=True).start()
                    elif mode == "memray attach":
                        # its injected code runs in the interpreter's loop: a target blocked in read() never
                        # lets it in, so the loop is started first and the steps are timed from 'attached'
                        go()
                        subprocess.run([memray, "attach", "-f", "-o", cap, str(wl.pid)], check=True,
                                       capture_output=True, timeout=120)
                        r["start"].append(time.time() - t0)
                    elif mode == "heaptrack -p":
                        tool = subprocess.Popen(["heaptrack", "-p", str(wl.pid)], stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, cwd=tmp)
                        while True:
                            line = read_line(tool.stdout, 120, "heaptrack injected")
                            tool_out.append(line)
                            if "injection finished" in line:
                                break
                        r["start"].append(time.time() - t0)
                        threading.Thread(target=lambda t=tool: tool_out.extend(l.decode(errors="replace")
                                                                               for l in t.stdout), daemon=True).start()
                    else:  # libbpf-tools memleak: a report every 2 s
                        tool = bpftools_start(bpftools, wl.pid)
                        r["start"].append(time.time() - t0)
                        threading.Thread(target=lambda t=tool: tool_out.extend(l.decode(errors="replace")
                                                                               for l in t.stdout), daemon=True).start()
                    go()
                    t0 = time.time()
                    time.sleep(secs)
                    # the lines printed over the timed seconds, the first left out (steps from before t0)
                    def timed(ls):
                        return [float(l) for t, l in ls if t0 < t <= t0 + secs and re.fullmatch(rb"[0-9.]+\s*", l)][1:]
                    times = timed(lines)
                    r["pair"].append(statistics.mean(times) / statistics.mean(timed(twin_lines)))
                    twin.kill()
                    ms = statistics.mean(times)
                    r["ms"].append(ms)
                    if mode == "none":
                        base = ms
                    elif base:
                        r["ratio"].append(ms / base)
                    # stop the tool its own way, and read its report
                    entries = None
                    if mode == "memleak-ai":
                        tool.send_signal(signal.SIGINT)
                        tool.wait(timeout=60)
                        time.sleep(0.2)
                        entries = memleak_ai_entries(json.loads(tool_out[-1]))
                    elif mode.startswith("memray"):
                        if mode == "memray attach":
                            subprocess.run([memray, "detach", str(wl.pid)], capture_output=True, timeout=60)
                        wl.send_signal(signal.SIGINT)  # memray run: KeyboardInterrupt, and the capture is closed
                        wl.wait(timeout=120)
                        out = subprocess.run([py, os.path.join(ROOT, "tests", "bench", "memray_leaks.py"), cap],
                                             capture_output=True, text=True, timeout=300)
                        entries = [[tuple(f) for f in e["frames"]] for e in json.loads(out.stdout)["leaks"]]
                    elif mode == "heaptrack -p":
                        wl.terminate()  # heaptrack ends with its target: what is still allocated is leaked
                        wl.wait(timeout=60)
                        tool.wait(timeout=300)
                        path = next(m.group(1) for m in (re.search(r'output will be written to "(.*)"', l)
                                                          for l in tool_out) if m)
                        entries = heaptrack_entries(path)
                        os.unlink(path)
                    elif tool:
                        tool.send_signal(signal.SIGINT)
                        tool.wait(timeout=60)
                        time.sleep(0.2)
                        entries = bpftools_entries("".join(tool_out))
                    tool = None
                    if entries is not None:
                        named, shows = peer_verdict(entries, want)
                        r["named"].append(named)
                        r["shows"].append(shows)
                except Exception as e:  # one tool failing on one workload is a result, not the end of the run
                    r["err"].append(f"{type(e).__name__}: {e}"[:200])
                finally:
                    for p in (tool, wl, twin):
                        if p and p.poll() is None:
                            p.kill()
                            p.wait()
                    if os.path.exists(cap):
                        os.unlink(cap)
    ver = subprocess.run([memray, "--version"], capture_output=True, text=True).stdout.strip() if \
        os.path.exists(memray) else "not installed"
    htv = subprocess.run(["heaptrack", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"Peers side by side ({rounds} rounds, modes interleaved, a fresh process a run, {secs:.0f} s of steps a run; "
          f"memray {ver}, {htv}; {time.time() - t_begin:.0f} s in all):")
    if not bpftools:
        print("  memleak (libbpf-tools): not run (no binary given: BENCH_MEMLEAK_BPFTOOLS)")
    for name, _, _, lang in workloads:
        print(f"  {name}:")
        for mode in modes:
            r = res[(name, mode)]
            if lang == "c" and mode.startswith("memray"):
                print(f"    {mode:24s} n/a (Python only)")
                continue
            if not r["ms"]:
                print(f"    {mode:24s} failed: {r['err'][:1]}")
                continue
            ratio = f"x{med_range(r['ratio'], '{:.3f}')}" if r["ratio"] else "-"
            pair = f"x{med_range(r['pair'], '{:.3f}')}"
            start = med_range(r["start"], "{:.2f}")
            what = ("ready" if mode in ("none", "memray run --native") else "attached")
            named = " ".join(r["named"]) if r["named"] else "-"
            print(f"    {mode:24s} {statistics.median(r['ms']):8.3f} ms/step, vs none {ratio}, vs its bare twin {pair}; "
                  f"to {what} {start} s; names the leak: {named}")
            if r["shows"]:
                print(f"    {'':24s} top 3 (last run): {r['shows'][-1]}")
            if r["err"]:
                print(f"    {'':24s} errors: {r['err']}")


def smaps_by_kind(pid):
    """RSS in KiB of a process's mappings, by kind: BPF maps, the heap, other anonymous memory, files."""
    kinds, kind = {"bpf maps": 0, "heap": 0, "anonymous": 0, "files": 0}, "files"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                name = parts[5] if len(parts) > 5 else ""
                kind = ("bpf maps" if "bpf-map" in name else "heap" if name == "[heap]" else
                        "anonymous" if not name or name.startswith("[") else "files")
            elif parts and parts[0] == "Rss:":
                kinds[kind] += int(parts[1])
    return kinds


def vm_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))


def memory_run(targets, argv, secs):
    """memleak-ai with argv (its targets already running) for secs: its VmHWM and RSS by kind at the end (KiB)."""
    tool = subprocess.Popen([TOOL] + argv + ["-o", "/dev/null", "2"], stderr=subprocess.DEVNULL)
    try:
        time.sleep(secs)
        if tool.poll() is not None:
            sys.exit(f"memory: memleak-ai {' '.join(argv)} exited early ({tool.returncode})")
        return vm_kib(tool.pid, "VmHWM"), smaps_by_kind(tool.pid)
    finally:
        tool.send_signal(signal.SIGINT)
        tool.wait(60)


def memory_bench():
    """The tool's own memory at default settings: VmHWM (its peak RSS) and RSS by kind after BENCH_MEMORY_SECONDS,
    attached with -p to a small C program (three_leaks), to one steady PyTorch rank, and with --match beside eight
    ranks, as a node agent. The BPF maps it maps (allocation table, stack ring, unwinding chunks) count in its RSS."""
    secs = float(os.environ.get("BENCH_MEMORY_SECONDS", "15"))
    py = os.environ.get("BENCH_PEERS_PYTHON", VENV_PY)
    tag = f"memory{os.getpid()}"
    print(f"Memory: memleak-ai's VmHWM and RSS by kind, default settings, after {secs:.0f} s (load "
          f"{os.getloadavg()[0]:.2f}):")

    def show(what, hwm, kinds):
        print(f"  {what:34s} VmHWM {hwm / 1024:6.1f} MiB; RSS " +
              ", ".join(f"{k} {v / 1024:.1f}" for k, v in kinds.items()) + " MiB")
    c = subprocess.Popen([os.path.join(B, "three_leaks"), "run"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        show("-p a small C program", *memory_run([c], ["-p", str(c.pid)], secs))
    finally:
        c.kill()
        c.wait()
    ranks = []
    try:
        for r in range(8):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="8")
            ranks.append(subprocess.Popen([py, os.path.join(ROOT, "tests", "bench", "fleet_rank.py"), tag],
                                          stdout=subprocess.PIPE, env=env))
        for p in ranks:
            read_line(p.stdout, 300, "rank ready")
        show(f"-p one PyTorch rank (torch, {os.path.basename(py)})", *memory_run(ranks[:1], ["-p", str(ranks[0].pid)],
                                                                              secs))
        show("--match beside eight ranks", *memory_run(ranks, ["--match", f"fleet_rank\\.py {tag}$"], secs))
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def import_bench():
    """Start-up: `import torch` timed inside the target (tests/bench/import_torch.py on BENCH_PEERS_PYTHON, PyPI's
    torch), bare and under `memleak-ai -c` at default settings, BENCH_IMPORT_ROUNDS (5) pairs interleaved: the
    median of the pairs' ratios, each pair's, and the load average."""
    py = os.environ.get("BENCH_PEERS_PYTHON", VENV_PY)
    rounds = int(os.environ.get("BENCH_IMPORT_ROUNDS", "5"))
    script = os.path.join(ROOT, "tests", "bench", "import_torch.py")

    def timed(argv):
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        held = re.search(r"was held (\d+) ms at (\d+) reports of its dynamic loader", run.stderr)
        return next(float(l.split()[1]) for l in run.stdout.splitlines() if l.startswith("import ")), held
    pairs = []
    for _ in range(rounds):
        bare, _ = timed([py, script])
        traced, held = timed([TOOL, "-v", "-o", "/dev/null", "-c", f"{py} {script}", "5"])
        pairs.append((bare, traced, held, os.getloadavg()[0]))
    ratios = [t / b for b, t, _, _ in pairs]
    print(f"Import: `import torch` under -c at default settings against bare ({os.path.basename(py)}), "
          f"{rounds} pairs: x{statistics.median(ratios):.2f} (median of the pairs)")
    for b, t, held, load in pairs:
        stops = f"held {held[1]} ms at {held[2]} loader stops" if held else "no loader stops reported"
        print(f"  bare {b:.2f} s, memleak-ai -c {t:.2f} s: x{t / b:.2f} ({stops}); load {load:.2f}")


def attach_bench():
    """Attach to a running PyTorch job (tests/bench/tagged_job.py on BENCH_PEERS_PYTHON, torch 2.15 by default):
    from the `memleak-ai -p` command to `attached to pid`, and to the first tagged block recorded with its stack
    (the report's time less its row's oldest record's age), then when every unwinding table was loaded, at
    default settings, BENCH_ATTACH_ROUNDS fresh tool runs on one job. Also the first tagged row's native and
    Python frames."""
    py = os.environ.get("BENCH_PEERS_PYTHON", VENV_PY)
    rounds = int(os.environ.get("BENCH_ATTACH_ROUNDS", "3"))
    script = os.path.join(ROOT, "tests", "bench", "tagged_job.py")
    line = next(i for i, l in enumerate(open(script), 1) if "# at: tagged" in l)
    job = subprocess.Popen([py, script], stdout=subprocess.PIPE)
    print(f"Attach: -p on a running torch job ({os.path.basename(py)}), a tagged block every 10 ms, default "
          f"settings, 1 s reports (load {os.getloadavg()[0]:.2f}):")
    try:
        read_line(job.stdout, 300, "tagged job ready")
        time.sleep(2)
        for r in range(rounds):
            print("  " + attach_round(job.pid, script, line))
    finally:
        job.kill()
        job.wait()


def attach_round(pid, script, line):
    """One fresh memleak-ai on the job: its attach figures as one line."""
    out = tempfile.NamedTemporaryFile(prefix="attach", suffix=".json", delete=False).name
    t0 = time.time()
    tool = subprocess.Popen([TOOL, "-p", str(pid), "-f", "json", "-o", out, "1"], stderr=subprocess.PIPE, text=True)
    attached, first, frames, loaded, tables = None, None, None, None, {}
    try:
        while "attached to pid" not in read_line(tool.stderr, 60, "memleak-ai attached"):
            pass
        attached = time.time() - t0
        threading.Thread(target=tool.stderr.read, daemon=True).start()
        while time.time() - t0 < 30 and (first is None or loaded is None):
            time.sleep(0.2)
            for rep in (json.loads(l) for l in open(out) if l.startswith("{") and l.endswith("\n")):
                tables = rep["stats"].get("unwind_tables") or {}
                if loaded is None and tables.get("queued") and not tables.get("pending"):
                    loaded = rep["time_unix"] - t0
                if "unwind_tables" not in rep["stats"]:  # a tool that builds them all before it attaches
                    loaded = attached
                for s in rep["stacks"]:
                    py = [f for f in s["frames"] if f.get("kind") == "python" and (f.get("file") or "").endswith(
                        os.path.basename(script)) and f.get("line") == line]
                    if first is None and py and s["layer"] == "torch_cpu":
                        first = rep["time_unix"] - s["oldest_age_s"] - t0
                        frames = (sum(f.get("kind") == "native" for f in s["frames"]),
                                  sum(f.get("kind") == "python" for f in s["frames"]))
    finally:
        tool.send_signal(signal.SIGINT)
        tool.wait(60)
        os.unlink(out)
    fmt = (lambda v: f"{v:.2f} s" if v is not None else "never")
    return (f"attached {fmt(attached)}; first tagged block recorded {fmt(first)} after the command "
            f"(frames native/python {frames}); every table loaded {fmt(loaded)} "
            f"({tables.get('queued', 0)} files, {tables.get('background', 0)} in the background, "
            f"{tables.get('all_loaded_s', 0) or 0:.2f} s from the first queued)")


def main(argv):
    benches = {"estimate": estimate_bench, "default": default_bench, "paired": paired_bench, "start": start_bench, "rss": rss_bench, "overhead": overhead_bench, "cost": cost_bench, "startup": startup_bench, "pyframes": pyframes_bench, "unwind": unwind_bench, "torch": torch_bench,
               "budget": budget_bench, "report": report_bench, "fleet": fleet_bench, "findings": findings_bench,
               "memory": memory_bench, "attach": attach_bench,
               "import": import_bench, "steps": steps_bench, "owncpu": owncpu_bench,
               "fullcost": fullcost_bench}
    peers = {"peers": peers_bench}  # not part of the default run (about 10 minutes): `make bench BENCH=peers`
    names = argv or list(benches)
    benches.update(peers)
    for n in names:
        if n not in benches:
            sys.exit(f"usage: bench.py [{'|'.join(benches)} ...]")
    for n in names:
        benches[n]()


if __name__ == "__main__":
    main(sys.argv[1:])
