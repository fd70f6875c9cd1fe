"""Real PyTorch workloads, run as a user runs them: the whole tool, every layer, full fidelity and default
settings, attached with -p and started with -c. Each run writes text, JSON, pprof and HTML at once; each output
must be valid and show the leak (or, for the control, that nothing grows)."""
import ast
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402
from harness import ROOT, TOOL, Fail, alone, beside, check, flaky, descendants, eq, html_check, main, read_line, takes, test  # noqa: E402

# The interpreter: MEMLEAK_AI_WL_PY, else PyPI's torch in build/venv/3.12 (scripts/make-venv.sh), the GPU
# machine's version. MEMLEAK_AI_WL_SMOKE=1 runs the @smoke subset only (the other versions, Debian's torch 1.13).
PY = os.path.abspath(os.environ.get("MEMLEAK_AI_WL_PY") or os.path.join(ROOT, "build", "venv", "3.12", "bin", "python"))
SMOKE = os.environ.get("MEMLEAK_AI_WL_SMOKE") == "1"
SMOKE_TESTS = []


def smoke(fn):
    """The subset run on the other interpreters: -p at full fidelity, -c at default settings."""
    SMOKE_TESTS.append(fn.__name__)
    return fn


DEBIAN_TOO = []
DEBIAN_ONLY = []


def debian_too(fn):
    """Run in the smoke pass on Debian's torch 1.13 as well (its autograd differs: the census test)."""
    DEBIAN_TOO.append(fn.__name__)
    return fn


def debian_only(fn):
    """Run in the smoke pass on Debian's torch 1.13 instead of the main pass: what the main pass's torch makes
    too long for the suite. Named on the command line, it runs on any interpreter."""
    DEBIAN_ONLY.append(fn.__name__)
    return fn


FULL = ("--max-overhead", "100")


def fmt_bytes(b, sign=False):
    """Bytes as the text report writes them ("1.0 MiB", "-512 B"), with a "+" when sign and not negative."""
    units, v, u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], abs(b), 0
    while v >= 1024 and u + 1 < len(units):
        v, u = v / 1024, u + 1
    s = ("-" if b < 0 else "") + (f"{v:.0f} B" if u == 0 else f"{v:.1f} {units[u]}")
    return ("+" if sign and b >= 0 else "") + s


def leak_line(script):
    """The line of the workload marked '# LEAK': where the memory that stays is allocated."""
    for i, line in enumerate(open(os.path.join(HERE, script)), 1):
        if "# LEAK" in line:
            return i
    raise Fail(f"{script} marks no line")


def user_frame(stack, script):
    """The stack's innermost frame in the workload's own file, or None."""
    path = os.path.join(HERE, script)
    for f in stack["frames"]:
        if f.get("file") == path:
            return f
    return None


def growing_top3(rep, script):
    """The first three leak candidates of a report, and whether one names the leak's line."""
    top = [s for s in rep["stacks"] if s["verdict"] == "growing"][:3]
    want = leak_line(script)
    return top, any((user_frame(s, script) or {}).get("line") == want for s in top)


def candidates_at(reps, script, line, layers=None):
    """The leak candidates (growing rows) at the script's line, in any report: (report, layer, bytes); only
    those of layers, when given."""
    return [(r["seq"], s["layer"], s["bytes"]) for r in reps for s in r["stacks"] if s["verdict"] == "growing" and
            (layers is None or s["layer"] in layers) and (user_frame(s, script) or {}).get("line") == line]


class Run:
    """memleak-ai on a workload, writing text to stdout and JSON, pprof and HTML to files. mode "p" attaches
    to the workload once it has imported torch and built its model; "c" starts it."""

    def __init__(self, script, mode, *tool_args, interval="1", wl_args=(), wl_env=None, wl_pre=(), tool_env=None):
        self.script, self.dir = script, tempfile.mkdtemp(prefix="workload-")
        self.wl_lines = []
        self.json, self.pprof, self.html = (os.path.join(self.dir, n) for n in ("r.json", "r.pb.gz", "r.html"))
        self._reps, self._read_at = [], 0
        outs = ["--json", self.json, "--pprof", self.pprof, "--html", self.html]
        self.wl, self.ended = None, True
        if mode == "p":
            self.wl = subprocess.Popen([*wl_pre, PY, os.path.join(HERE, script), "wait", *wl_args], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, cwd=HERE, env={**os.environ, **(wl_env or {})})
            line = read_line(self.wl.stdout, 120, f"{script} ready")
            check(line.startswith("ready"), f"{script} said {line!r}")
            target = ["-p", str(self.wl.pid)]
        else:
            target = ["-c", " ".join([*wl_pre, PY, os.path.join(HERE, script), "run", *wl_args])]
        self.tool = subprocess.Popen([TOOL, *tool_args, *outs, *target, interval], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=HERE, env={**os.environ, **(tool_env or {})})
        self.stderr = []
        end = time.time() + 120
        while True:
            line = read_line(self.tool.stderr, max(1, end - time.time()), "memleak-ai attached")
            self.stderr.append(line)
            m = re.search(r"attached to pid (\d+)", line)
            if m:
                self.pid = int(m.group(1))
                break
        self._err = threading.Thread(target=lambda: self.stderr.extend(
            self.tool.stderr.read().decode(errors="replace").splitlines()), daemon=True)
        self._err.start()
        self._out = []
        self._reader = threading.Thread(target=lambda: self._out.append(self.tool.stdout.read()), daemon=True)
        self._reader.start()
        if self.wl:
            self.wl.stdin.write(b"g")
            self.wl.stdin.flush()

    def reports(self):
        """The JSON reports so far. Each line is parsed once: wait_for() polls twice a second, and parsing the
        whole file each time took most of the harness's 65 CPU-s in a suite run (full-fidelity reports are MBs)."""
        try:
            with open(self.json, "rb") as f:
                f.seek(self._read_at)
                more = f.read()
        except OSError:
            return list(self._reps)
        end = more.rfind(b"\n") + 1  # a line still being written waits for its newline
        try:
            self._reps += [json.loads(l) for l in more[:end].splitlines() if l.strip()]
        except ValueError:
            return list(self._reps)
        self._read_at += end
        return list(self._reps)

    def wait_for(self, pred, timeout):
        """Poll the JSON reports until pred(reports) holds or timeout; returns the reports."""
        end = time.time() + timeout
        while time.time() < end:
            reps = self.reports()
            if reps and pred(reps):
                return reps
            time.sleep(0.5)
        return self.reports()

    def stop(self, timeout=60):
        """SIGINT: the final report (and the pprof and HTML) while the workload still runs; then end it."""
        self.tool.send_signal(signal.SIGINT)
        return self._end(timeout)

    def finish(self, timeout=240):
        """-c on a workload that ends by itself: the run ends with it. Its reports (an overdue run is stopped)."""
        try:
            self.tool.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.tool.send_signal(signal.SIGINT)
            self.ended = False
        return self._end(60)

    def _end(self, timeout):
        try:
            rc = self.tool.wait(timeout=timeout)
            if self.wl:  # what the workload printed meanwhile (losses.py's step times, when asked)
                os.set_blocking(self.wl.stdout.fileno(), False)
                self.wl_lines = (self.wl.stdout.read() or b"").decode().split()
        finally:
            pids = {self.pid, self.wl.pid if self.wl else self.pid}
            for pid in list(pids):
                pids |= descendants(pid)  # DataLoader workers: else they linger until they notice
            for pid in pids:
                try:
                    os.killpg(os.getpgid(pid), 0)
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if self.wl:
                self.wl.wait()
        self._reader.join(30)
        self._err.join(30)
        self.text = b"".join(self._out).decode(errors="replace")
        eq(rc, 0, f"{self.script}: memleak-ai exit status ({self.stderr[-3:]})")
        reps = self.reports()
        # Every run of every workload: no output ever carries a null Python frame (an undecoded one says why).
        eq([x for x in python_frames(reps) if x[3]["func"] is None or x[3]["file"] is None], [],
           f"{self.script}: no null Python frame in any report")
        return reps


def text_blocks(text):
    """The stack blocks of the text's last full report: (header line, lines under it)."""
    last = text.split("=== memleak-ai final report")[-1]
    blocks, cur = [], None
    for line in last.splitlines():
        if re.match(r"\[\d+\] ", line):
            cur = (line, [])
            blocks.append(cur)
        elif cur and line.startswith("    "):
            cur[1].append(line)
    return blocks


def check_text(run, final, expect_leak):
    path = os.path.join(HERE, run.script)
    check("=== memleak-ai final report" in run.text, f"{run.script}: text has its final report")
    blocks = text_blocks(run.text)
    check(blocks, f"{run.script}: text shows stacks")
    if expect_leak:
        cands = [b for b in blocks if any("LEAK CANDIDATE" in l for l in b[1])]
        check(cands, f"{run.script}: text has a leak candidate")
        head = [cands[0][0]] + cands[0][1][:11]
        check(any(l.startswith(f"    at {path}:") for l in head),
              f"{run.script}: the script's own line within the first 12 lines of the first candidate: {head}")
        want = f"    at {path}:{leak_line(run.script)} in "
        check(any(l.startswith(want) for b in cands[:3] for l in [b[0]] + b[1][:11]),
              f"{run.script}: the leak's line leads one of the first three candidates: {[c[0] for c in cands[:3]]}")


def check_pprof(run, expect_leak):
    raw = gzip.open(run.pprof).read()
    r = subprocess.run(["protoc", f"--proto_path={ROOT}/proto", "--decode=perftools.profiles.Profile",
                        "profile.proto"], input=raw, capture_output=True, timeout=60)
    eq(r.returncode, 0, f"{run.script}: protoc decodes the pprof profile ({r.stderr[:200]})")
    out = r.stdout.decode(errors="replace")
    check(out.count("sample {") >= 1, f"{run.script}: pprof has samples")
    if expect_leak:
        check(os.path.join(HERE, run.script) in out, f"{run.script}: pprof names the script's file")


def check_html(run, expect_leak):
    if os.environ.get("MEMLEAK_AI_NO_BROWSER"):  # scripts/gpu-validate.sh: the GPU machine has no Selenium
        print(f"# {run.script}: the HTML report is not loaded in a browser (MEMLEAK_AI_NO_BROWSER)")
        return
    res, err = html_check(run.html, os.path.join(run.dir, "r.png"))
    check("fatal" not in res, f"{run.script}: browser ran: {res.get('fatal')} {err[-300:]}")
    eq(res["errors"], [], f"{run.script}: no page errors")
    check(res["rendered"], f"{run.script}: the page's script finished")
    eq(res["plots"], 2, f"{run.script}: both timeline plots drawn")
    check(res["flameRects"] >= 3, f"{run.script}: flame graph drawn")
    check(res["rows"], f"{run.script}: leak table drawn")
    html = open(run.html).read()
    m = re.search(r"<title>([^<]*)</title>", html)
    check(m and m.group(1).strip(), f"{run.script}: the page has its title")
    eq(res["flameBad"], [], f"{run.script}: flame tree of {res['flameNodes']} nodes, siblings unique, each within "
       "its parent")
    if expect_leak:
        eq(res["rows"][0][2], "growing", f"{run.script}: the table leads with a leak candidate")


def check_outputs(run, final, expect_leak):
    # libbpf's warnings are shown by default: a run on a workload has none to show.
    eq([l for l in run.stderr if l.startswith("libbpf:")], [], f"{run.script}: libbpf's warnings on stderr")
    check_text(run, final, expect_leak)
    check_pprof(run, expect_leak)
    check_html(run, expect_leak)


def pprof_samples(run):
    """The pprof profile through protoc's text format: sample types, and each sample's values, string labels
    and (file, line) of its frames."""
    r = subprocess.run(["protoc", f"--proto_path={ROOT}/proto", "--decode=perftools.profiles.Profile",
                        "profile.proto"], input=gzip.open(run.pprof).read(), capture_output=True, timeout=60)
    text = r.stdout.decode(errors="replace")
    # protoc writes C escapes (a quote as \', other bytes in octal), which JSON refuses: Python bytes literals
    strings = [ast.literal_eval("b" + m).decode(errors="replace")
               for m in re.findall(r'^string_table: (".*")$', text, re.M)]
    funcs = {int(i): int(f) for i, f in re.findall(r"^function \{\s*id: (\d+)(?:\s*\w+: \d+)*?\s*filename: (\d+)", text, re.M)}
    locs = {}
    for body in re.findall(r"^location \{(.*?)^\}", text, re.M | re.S):
        lid = int(re.search(r"^\s*id: (\d+)", body, re.M).group(1))
        locs[lid] = [(strings[funcs.get(int(f), 0)], int(n)) for f, n in
                     re.findall(r"function_id: (\d+)\s*line: (\d+)", body)]
    samples = []
    for body in re.findall(r"^sample \{(.*?)^\}", text, re.M | re.S):
        labels = {strings[int(k)]: strings[int(v)] for k, v in re.findall(r"key: (\d+)\s*str: (\d+)", body)}
        lines = [x for l in re.findall(r"location_id: (\d+)", body) for x in locs.get(int(l), [])]
        samples.append({"values": [int(v) for v in re.findall(r"^\s*value: (-?\d+)", body, re.M)],
                        "labels": labels, "lines": lines})
    types = [strings[int(t)] for t in re.findall(r"^sample_type \{\s*type: (\d+)", text, re.M)]
    return {"types": types, "samples": samples}


def python_frames(reps, pred=lambda s: True):
    """(report, layer, verdict, frame) of each Python frame of the rows pred keeps, and of the peak's rows."""
    return [(r["seq"], s["layer"], s.get("verdict"), f) for r in reps
            for s in r["stacks"] + r.get("peak", {}).get("stacks", []) if pred(s)
            for f in s["frames"] if f["kind"] == "python"]


def check_exited(run, reps, script, named=None):
    """A -c run whose workload ended by itself: the final report, written after the exit, keeps what the run
    found while it lived (the leak's line a top-three candidate, in every output; or what named(report) asks),
    says so, and every Python frame of it names its line; no report has a null Python frame."""
    check(run.ended, f"{script}: ended by itself within the time given")
    final = reps[-1]
    eq(final["final"], True, f"{script}: last JSON report is the final one")
    check("exited" in final, f"{script}: the final report says the target exited: {sorted(final)}")
    live = [r for r in reps if r["seq"] == final["exited"]["live_report"]]
    check(live and not live[0]["final"], f"{script}: its rows are a live report's: {final['exited']}")
    # With -c the report at the interpreter's teardown; torch's teardown may take a report interval or more.
    eq([s["bytes"] for s in final["stacks"]], [s["bytes"] for s in live[0]["stacks"]], f"{script}: that report's rows")
    check((named or (lambda r: growing_top3(r, script)[1]))(final), f"{script}: after the exit, the leak's line among the first three "
          f"candidates: {[(s['layer'], s['verdict'], s['bytes'], (user_frame(s, script) or {}).get('line')) for s in final['stacks'][:5]]}")
    eq([x for x in python_frames(reps) if x[3]["func"] is None or x[3]["file"] is None], [],
       f"{script}: no null Python frame in any report")
    bad = [x for x in python_frames([final], lambda s: s.get("verdict") == "growing")
           if x[3].get("unresolved") or not x[3].get("line")]
    eq(bad, [], f"{script}: every Python frame of the final report's candidates has its file, line and function")
    shown = [x for x in python_frames([dict(final, peak={})]) if x[3].get("unresolved")]
    eq(final["stats"]["python"]["unresolved_frames"], len(shown), f"{script}: stats.python counts the unresolved")
    eq([x for x in shown if x[2] != "import"], [], f"{script}: frames unresolved only in import-time rows")
    check(final.get("peak", {}).get("rss_hwm_bytes", 0) > 0, f"{script}: the peak's resident high-water mark")
    check("the target exited: rows and verdicts as of report" in run.text, f"{script}: the text says so")
    if named is None:
        check_outputs(run, final, True)
    else:  # the text's check asks for the marked line; named may ask for another
        check_pprof(run, True)
        check_html(run, True)
    prof = pprof_samples(run)
    check("peak_space" in prof["types"], f"{script}: pprof has the peak_space sample type: {prof['types']}")
    if named is None:
        top = sorted((s for s in prof["samples"] if s["labels"].get("verdict") == "growing"),
                     key=lambda s: -s["values"][0])
        check(any((os.path.join(HERE, script), leak_line(script)) in s["lines"] for s in top),
              f"{script}: a pprof sample labelled growing at the leak's line: {[s['lines'][:3] for s in top[:3]]}")
    html = open(run.html).read()
    check('"exited":true' in html and '"peak":{' in html, f"{script}: the HTML page marks the exit and the peak")


def leak_run(script, mode, *args, timeout=40, interval="1", until=None, until_all=False):
    """Run until a report has the leak among its first three candidates (and until(report) holds, if given; or
    until(reports), with until_all), or timeout; check every output."""
    run = Run(script, mode, *args, interval=interval)
    try:
        reps = run.wait_for(lambda rs: growing_top3(rs[-1], script)[1] and
                            (until is None or until(run, rs if until_all else rs[-1])), timeout)
    finally:
        reps = run.stop()
    check(reps, f"{script}: JSON reports written")
    found = [r for r in reps if growing_top3(r, script)[1]]
    check(found, f"{script} ({mode}, {' '.join(args) or 'defaults'}): the leak's line among the first three "
                 f"candidates: {[[(s['layer'], s['pid'], s['bytes'], (user_frame(s, script) or {}).get('line'), [f.get('func') for f in s['frames'][:4]]) for s in growing_top3(r, script)[0]] for r in reps[-3:]]}")
    final = reps[-1]
    eq(final["final"], True, f"{script}: last JSON report is the final one")
    check(growing_top3(final, script)[1], f"{script}: the final report still has the leak in its top three: "
          f"{[(r['seq'], round(r['interval_s'], 2), [(s['layer'], s['pid'], s['verdict'], s['bytes'], (user_frame(s, script) or {}).get('line')) for s in r['stacks'][:4]]) for r in reps[-2:]]}")
    check_outputs(run, final, True)
    return run, reps


def control_run(mode, *args, secs=10, interval="1"):
    run = Run("steady.py", mode, *args, interval=interval)
    try:
        time.sleep(secs)
    finally:
        reps = run.stop()
    check(len(reps) >= 4, f"control: reports kept coming: {len(reps)}")
    for r in reps:
        grow = [(s["layer"], s["bytes"], [f.get("func") for f in s["frames"][:4]]) for s in r["stacks"]
                if s["verdict"] == "growing"]
        eq(grow, [], f"control ({mode}, {' '.join(args) or 'defaults'}): no growing stack in report {r['seq']}")
    check_outputs(run, reps[-1], False)
    return run, reps


@test
@smoke
def losses_loop_attached_full_fidelity():
    leak_run("losses.py", "p", *FULL)


@test
def losses_loop_fragmentation_full_fidelity():
    """Most of the loop's RSS growth is freed heap pinned by the few blocks a step keeps: at full fidelity the
    C heap's free-but-resident memory is charged to the retained autograd nodes (the forward and loss line),
    not to the tensors whose freed buffers it was, and counts as explained. The loop draws each batch's size
    (16 to 512 rows), as a loader of varied sequence lengths does: with one size, whether the heap fragments
    rests on its layout, which the environment's and paths' lengths decide (4 of 6 layouts had under 12 MiB
    free after 3,000 steps, and CI's failed every time); varied, every layout tried had 45 MiB free by then.
    One intra-op thread: torch 2.15's matmuls otherwise allocate in a second arena too."""
    script = "losses.py"

    def frag(rep):
        p = next((p for p in rep["processes"] if p["pid"] == run.pid), {})
        return p.get("fragmentation"), p.get("memory")

    # Blocks from before attach hold free runs too, and their share moves from report to report (3 to 15 % of
    # 11 to 35 MiB here; 10.1 % of 36.6 MiB in CI's failed report): any report past 32 MiB with 90 % charged to
    # recorded blocks will do, within the wait.
    def met(rep, charged=True):
        fr = frag(rep)[0] or {}
        return fr.get("free_resident_bytes", 0) > 32 << 20 and (
            not charged or fr["charged_bytes"] >= 0.9 * fr["free_resident_bytes"])

    run = Run(script, "p", *FULL, interval="2", wl_args=("0", "0", "512"), wl_env={"OMP_NUM_THREADS": "1"})
    try:
        run.wait_for(lambda rs: met(rs[-1]), 100)
    finally:
        reps = run.stop()
    # The report that met the wait, not the one made at exit: kept blocks filling holes shrink the free space.
    fr, mem = frag(next((r for r in reversed(reps) if met(r)),
                        next((r for r in reversed(reps) if met(r, False)), reps[-1])))
    check(fr and fr["heaps"] >= 1 and fr["broken_walks"] == 0, f"the heap walked to its end: {fr and {k: v for k, v in fr.items() if k != 'holders'}}")
    check(fr["free_resident_bytes"] > 32 << 20, f"free but resident: {fr['free_resident_bytes']}")
    check(fr["charged_bytes"] >= 0.9 * fr["free_resident_bytes"],
          f"recorded blocks hold most of it: {fr['charged_bytes']} of {fr['free_resident_bytes']}")
    want = leak_line(script)
    for h in fr["holders"][:2]:
        py = [(f.get("func"), f.get("line")) for f in h["frames"] if f["kind"] == "python"]
        eq((user_frame(h, script) or {}).get("line"), want, f"a top holder carries the forward/loss line: {py}")
        check(any(f in ("forward", "Linear.forward", "mse_loss") for f, _ in py), f"... and the node's maker: {py}")
        check(not any(f == "randn" for f, _ in py), "not torch.randn")
    check(mem["explained_pct"] is not None and mem["explained_pct"] >= 80,
          f"the growth is explained: {mem}")
    lines = [l for l in run.text.splitlines() if l.startswith(f"C heap: pid {run.pid} ")]
    check(lines and f"losses.py:{want})" in lines[-1], f"the C heap line names the line: {lines[-1:]}")


def loop_running(rep, script):
    """Whether a report shows the workload's loop: a stack from the line marked '# LEAK'."""
    return any((user_frame(s, script) or {}).get("line") == leak_line(script) for s in rep["stacks"])


@test
@debian_only
def losses_loop_started_full_fidelity():
    """-c from the interpreter's first instruction: import torch's stacks are all kept, and the loop's leak
    reaches the top three within six reports at 2 s once the loop runs. On Debian's torch 1.13 in the suite
    (50 s). On torch 2.15, run by name: the import, every allocation traced, takes five minutes here (torch
    2.15 and the torch._dynamo that its optimizer imports allocate 1.5 million blocks from 4.5 million probe
    hits, ~700,000 distinct stacks), a quarter of the suite's 20 minutes."""
    script = "losses.py"
    run = Run(script, "c", *FULL, interval="2")
    try:
        reps = run.wait_for(lambda rs: loop_running(rs[-1], script), 600)
        check(reps and loop_running(reps[-1], script), f"the loop ran within 600 s: {len(reps)} reports")
        run.wait_for(lambda rs: growing_top3(rs[-1], script)[1], 40)
    finally:
        # The final report of 1.1 million stacks, with pprof and HTML: 20-40 s at rest, over 60 s when the
        # suite's other jobs share the two CPUs.
        reps = run.stop(timeout=180)
    final = reps[-1]
    eq(final["stats"]["dropped"]["stack_unavailable"], 0, "no stack lost")
    loop = next(i for i, r in enumerate(reps) if loop_running(r, script))
    found = [i for i, r in enumerate(reps) if growing_top3(r, script)[1]]
    check(found and found[0] - loop <= 6,
          f"leak in the top three within six reports of the loop's first one: loop at {loop}, found {found[:3]}")
    check(growing_top3(final, script)[1], "the final report still has the leak in its top three")
    imports = [s for r in reps[:loop + 1] for s in r["stacks"] if s["verdict"] == "import"]
    check(imports, "import-time stacks have their own verdict")
    check(loop >= 1 and all(s["verdict"] != "growing" for r in reps[:loop] for s in r["stacks"]),
          "nothing made while importing torch is a leak candidate")
    check(final["stats"]["stack_store"]["stacks"] > 100000, f"stacks kept: {final['stats']['stack_store']}")
    check_outputs(run, final, True)


def stack_key(s):
    # with the addresses: two rows can print the same lines (two calls of operator new on one line)
    return s["pid"], s["layer"], tuple((f.get("func"), f.get("file"), f.get("line"), f.get("addr")) for f in s["frames"])


def row_before(rows, s):
    """s's row in an earlier report (rows: its rows by stack_key): under its own key, or, where s's walks were
    cut short then (its file's unwinding table not built yet), the cut row it goes on from: same process and
    layer, the same Python frames, native frames that begin s's. cutmerge folds that row into the complete
    stack once one is recorded, and the verdicts keep its history; the largest such row, as they take it."""
    if stack_key(s) in rows:
        return rows[stack_key(s)]

    def split(x):
        fr = [(f.get("func"), f.get("file"), f.get("line"), f.get("addr"), f.get("kind")) for f in x["frames"]]
        return [f for f in fr if f[4] != "python"], [f for f in fr if f[4] == "python"]

    nat, py = split(s)
    cut = [r for r in rows.values() if r["pid"] == s["pid"] and r["layer"] == s["layer"] and split(r)[1] == py
           and len(split(r)[0]) < len(nat) and nat[:len(split(r)[0])] == split(r)[0]]
    check(cut, f"the row in the report before, or the cut row it goes on from: {stack_key(s)}")
    return max(cut, key=lambda r: r["count"])


def retention(stack, script):
    """Whether a stack carries the loop's forward or loss line: the workload's line marked '# LEAK' (the loss
    and the model's call), or a module's forward."""
    return ((user_frame(stack, script) or {}).get("line") == leak_line(script)
            or any(f.get("kind") == "python" and (f.get("func") or "").endswith("forward") for f in stack["frames"]))


@test
@alone
def losses_loop_default_settings_2s():
    """Default settings, -p, a report every 2 s: within six reports the first two leak candidates include the
    stack of the forward or loss line (at default settings the C heap is in heap-growth mode, so it is the
    kept loss tensors in torch_cpu, 256 bytes each, one a step); its retained count and count growth agree
    with the counts of the reports before; every output is valid."""
    script = "losses.py"
    every = 50  # the workload prints a line every 50 steps: the steps it made since the go
    run = Run(script, "p", "--top", "200", interval="2", wl_args=[str(every)])  # every stack's history in the JSON

    def top2(rep):
        return [s for s in rep["stacks"] if s["verdict"] == "growing"][:2]

    try:
        run.wait_for(lambda rs: len(rs) >= 6 or any(retention(s, script) for s in top2(rs[-1])), 60)
    finally:
        reps = run.stop()
    check(len(reps) >= 4, f"reports: {len(reps)}")
    found = [r for r in reps[:6] if any(retention(s, script) for s in top2(r))]
    check(found, f"the forward or loss line among the first two candidates within six reports: "
                 f"{[[(s['layer'], s['bytes'], s['count'], (user_frame(s, script) or {}).get('line')) for s in top2(r)] for r in reps[:6]]}")
    rep = found[0]
    leak = next(s for s in top2(rep) if retention(s, script))
    ev = leak["evidence"]
    check(ev["count"]["rising"] and ev["count"]["new_highs"] >= 3 * ev["intervals"] / 4,
          f"the count rises, a new high in three of four reports at least: {ev}")
    # The same stack in the reports before: the count growth and the retained count are differences of counts.
    hist = {r["seq"]: {stack_key(s): s for s in r["stacks"]} for r in reps}
    seq = rep["seq"]
    eq(leak["count_growth"], leak["count"] - row_before(hist[seq - 1], leak)["count"],
       "count growth since the last report")
    # The judged reports begin at from_report: ev["intervals"] back or more, where a report restated the one
    # before (it came too soon after it, or no sampling phase closed between them).
    first = next((r for r in reps if r["seq"] == ev["from_report"]), None)
    check(first and first["seq"] <= seq - ev["intervals"], f"the report the judged ones begin at, before report {seq}: {ev}")
    # Their span is the reports', but under tensor sampling a torch_cpu row's samples are timed at the phases that
    # closed before each report (up to a second before it), and in the C heap's windows a libc row's at the last
    # window's close (up to a window period before): there window_s is not measured between reports.
    phased = (leak["layer"] == "torch_cpu" and any(m["step"] == "torch_cpu sampling" for m in rep["modes"]["shed"])) \
        or (leak["layer"] == "libc" and (rep["modes"].get("libc_windows") or {}).get("windows", 0) > 0)
    print(f"# judged at report {seq} from report {first['seq']}, {ev['window_s']:.2f} s, timed at phases: {phased}", flush=True)
    check(phased or abs(rep["time_unix"] - ev["window_s"] - first["time_unix"]) < 0.5,
          f"the judged reports span window_s: {ev['window_s']} s before report {seq}: {[(r['seq'], round(rep['time_unix'] - r['time_unix'], 2), r['interval_s']) for r in reps]} {ev}")
    eq(ev["count"]["retained"], leak["count"] - row_before(hist[first["seq"]], leak)["count"],
       f"retained count over the {ev['intervals']} judged reports, from report {first['seq']}")
    check(leak["count_growth"] > 0 and leak["leak_score"] > 0, f"growing and scored: {leak['leak_score']}")
    # The backward pass only reaches the fresh heap the kept graphs push it into: never a candidate.
    back = line_with(script, "loss.backward()")
    eq(candidates_at(reps, script, back), [], f"no leak candidate at loss.backward() (line {back})")
    # In text: the candidate's line says how many objects the window retained.
    block = [b for b in text_blocks(run.text) if any("LEAK CANDIDATE" in l for l in b[1])]
    check(block and re.search(r"LEAK CANDIDATE: growing by (count and bytes|count|bytes): \+[\d,]+ (objects|pages), ",
                              block[0][1][0]), f"the candidate line: {block[:1]}")
    # The resident memory it grew by is explained (the rss layer's pages, each counted once).
    mem = next(p["memory"] for p in reps[-1]["processes"] if p["pid"] == run.pid)
    check(mem["explained_pct"] is not None and mem["explained_pct"] >= 80, f"explained: {mem}")
    # The loss tensors kept: one a step. Sampled in time (tensor sampling, when the budget took it) each
    # record stands for N, so the count is an estimate of the steps made since attach.
    steps = every * len(run.wl_lines)
    kept = sum(s["count"] for s in reps[-1]["stacks"]
               if s["layer"] == "torch_cpu" and (user_frame(s, script) or {}).get("line") == leak_line(script))
    sampled = [s for s in reps[-1]["modes"]["shed"] if s["step"] == "torch_cpu sampling"]
    # Sampled tensor records weigh all tensor releases over those the on phases spanned (the C heap's windows
    # slow the steps unevenly, so the time share alone gave up to 1.39). Counted by the toggles' times instead,
    # a slow close gave 1.51 on CI (1.57 with 60 ms added to each close here; 0.81 to 0.85 as spanned). Over
    # three to five reports the count reads low, 0.64 to 0.77, and so does every probe on: 0.80 and 0.84 in
    # 10 s, 0.91 in 20 s (a loss taken elsewhere than its line); hence 0.5. Sampled at 1 in N, the count comes
    # in records of about N each, about 18 of them at N = 16 (a proof read 0.48): three records short is noise.
    one_in = max([1] + [m.get("one_in", 1) for m in sampled])
    print(f"# kept loss tensors counted {kept} for {steps} steps: {kept / max(steps, 1):.2f} (1 in {one_in})", flush=True)
    check(steps >= 500 and 0.5 * steps - 3 * one_in <= kept <= 1.3 * steps,
          f"kept loss tensors counted {kept} for {steps} steps (sampling: {sampled})")
    # One row: a tensor whose allocation began just before a sampling window opened is not taken with a stack
    # a frame deeper (c10::alloc_cpu's own frame on top), which would split the leak in two rows.
    rows = [[f.get("func") for f in s["frames"][:2]] for s in reps[-1]["stacks"] if s["layer"] == "torch_cpu" and
            s["count"] >= 16 and (user_frame(s, script) or {}).get("line") == leak_line(script)]
    eq(len(rows), 1, f"torch_cpu rows at the loss line: {rows}")
    check_outputs(run, reps[-1], False)


@test
@alone
def steady_control_attached_default_settings_2s():
    """The control at default settings, -p, a report every 2 s: no growing stack in any layer, in any report
    (the goal: none after the first three)."""
    run, reps = control_run("p", secs=14, interval="2")
    check(len(reps) >= 6, f"six reports at least: {len(reps)}")


def epochs_run(kind):
    """epochs.py at default settings, -p, the default interval: 300 steps an epoch (about 25 s), a 30-s pause."""
    return Run("epochs.py", "p", "--top", "50", interval="5", wl_args=[kind, "300", "30", "2"])


@test
@flaky("issue 37: on a loaded machine the sampled row read 'new' through the whole pause (proof Q, load 6: five "
       "reports), and, beside stress-ng with a second copy, the final report's first three candidates left out "
       "the line (1 run of 3); in a suite run (proof X, load 4) the row read 1.17 MiB a step over 7 sampled steps. "
       "Each failure now prints every report's row and the candidates")
def epochs_pause_keeps_the_leak_read_per_step_default_settings():
    """Issue 39's steps, at default settings with -p and a report every 5 s: the step clock counts the script's
    300 steps of an epoch; the row that keeps a 1 MiB tensor a step reads 1 MiB a step; through the 30-s pause
    after the epoch it stays a leak candidate in every report; the steady twin, with the same pauses, has none."""
    script = "epochs.py"
    # The twin starts as the leaking loop pauses, not beside its first epoch: two torch loops and the tool on two
    # cores made the sampled row's rates uneven (CV 0.56 at report 4), and it read stable through the pause in 7
    # runs of 8 (2026-11-30, issue 39's note). Its loop overlaps the leaking one's second epoch only.
    leak, control, reps, creps = epochs_run("keep"), None, None, []
    try:
        said = read_line(leak.wl.stdout, 180, "the first epoch's end").split()
        eq(said[:2], ["steps", "300"], "the script's count")
        paused_at = float(said[3])  # when it began the pause: the line may be read much later on a busy machine
        control = epochs_run("steady")
        # The pause, and a report into the next epoch: 40 s.
        leak.wait_for(lambda rs: rs[-1]["time_unix"] > paused_at + 40, 60)
        reps = leak.stop()
        control.wait_for(lambda rs: len(rs) >= 10, 90)
    finally:
        reps = leak.stop() if reps is None else reps
        creps = control.stop() if control else []
    line = leak_line(script)
    at_line = [(r, next((s for s in r["stacks"] if s["layer"] == "torch_cpu" and
                         (user_frame(s, script) or {}).get("line") == line), None)) for r in reps]
    pause = [(r, s) for r, s in at_line if paused_at + 4 < r["time_unix"] < paused_at + 29]
    check(len(pause) >= 4, f"four reports or more inside the pause: {[r['time_unix'] - paused_at for r in reps]}")
    steps = [next(p["steps"] for p in r["processes"] if p["pid"] == leak.pid) for r, _ in pause]
    eq([st["count"] for st in steps], [300] * len(pause), "the steps counted in the pause: the script's 300")
    check(steps[-1]["pause_s"] >= 15 and steps[-1]["since_report"] == 0, f"the pause is seen: {steps[-1]}")
    verdicts = [(r["seq"], s and s["verdict"]) for r, s in pause]
    story = [(r["seq"], round(r["time_unix"] - paused_at, 1), s and (s["verdict"], s["count"], s["evidence"]["intervals"],
              s["evidence"]["from_report"]), [(m["step"], m["since_report"]) for m in r["modes"]["shed"]]) for r, s in at_line]
    eq([v for _, v in verdicts], ["growing"] * len(pause),
       f"a leak candidate in every report of the pause: {verdicts}; every report's row (seq, s after the pause "
       f"began, (verdict, count, intervals, from report), shed): {story}")
    # Under tensor sampling (1 in 8 to 1 in 16 here) the row's records are read over the steps tensor sampling saw
    # whole, 8 to 100 of them: a step begun in an on phase records every tensor it makes, the phase's close waiting
    # for it to end (struct ml_steps: gate), so 4 such steps are read (8 sampled in time). Sampled in time, a phase
    # that closed between a step's start and its tensor moved the reading by 3 to 7 % each (0.895 to 1.000 MiB a
    # step). The goal's 10 % holds either way.
    sampled = any(m["step"] == "torch_cpu sampling" for m in pause[0][0]["modes"]["shed"])
    ps = pause[0][1].get("per_step") or {}
    check(abs(ps.get("bytes", 0) / 1048576 - 1) <= 0.1 and ps.get("steps", 0) >= (4 if sampled else 100),
          f"1 MiB a step within 10% (sampled: {sampled}), over 100 steps or more (4 sampled): {ps}")
    # The layer's total is weighed (records that stand for the whole layer, over all steps): 25 % sampled.
    tol = 0.25 if sampled else 0.1
    tot = pause[0][0]["totals"]["torch_cpu"].get("per_step") or {}
    check(abs(tot.get("bytes", 0) / 1048576 - 1) <= tol, f"torch_cpu's total, 1 MiB a step within {tol:.0%}: {tot}")
    print(f"# per step: the row {ps.get('bytes', 0) / 1048576:.3f} MiB over {ps.get('steps')} steps, torch_cpu "
          f"{tot.get('bytes', 0) / 1048576:.3f} MiB; the pause's reports {[v[0] for v in verdicts]}", flush=True)
    # The row's text reads the same figure as its JSON (0.997 MiB a step prints as 1021.0 KiB: not "1.0 MiB").
    row_want = f"    per step: {fmt_bytes(ps.get('bytes', 0), True)}/step, "
    check(row_want in leak.text, f"text: the candidate's per-step line as in JSON ({row_want.strip()!r})")
    # The layer's line reads the same figure as JSON's totals (a report in the pause: text and JSON alike).
    want = f"; {fmt_bytes(tot.get('bytes', 0), True)}/step ({tot.get('steps', 0):,} steps)"
    lines = [l for l in leak.text.splitlines() if l.startswith("torch_cpu outstanding ")]
    check(any(l.endswith(want) for l in lines), f"text: torch_cpu's line ends {want!r} as in JSON: {lines[-3:]}")
    check(re.search(r"^steps  300 in 1 process, counted at the autograd engine's backward passes$", leak.text,
                    re.M), "text: the step clock's line in the pause")
    check_outputs(leak, reps[-1], True)
    # The steady twin: the same epochs and pauses, nothing kept: no candidate after its first three reports.
    check(len(creps) >= 10, f"control: reports kept coming: {len(creps)}")
    for r in creps[3:]:
        grow = [(s["layer"], s["bytes"], [f.get("func") for f in s["frames"][:4]]) for s in r["stacks"]
                if s["verdict"] == "growing"]
        eq(grow, [], f"control: no growing stack in report {r['seq']}")
    check_outputs(control, creps[-1], False)


def start_ranks(tag, job, odd, after, n=4, dev="cpu"):
    """n ranks.py processes, RANK 0 to n-1 of job `job`, waiting for the go; rank `odd` keeps 1 MiB more a step from
    step `after` on, on device dev (cuda: the stand-in's)."""
    procs = []
    for k in range(n):
        env = dict(os.environ, RANK=str(k), LOCAL_RANK=str(k), WORLD_SIZE=str(n), TORCHELASTIC_RUN_ID=job,
                   OMP_NUM_THREADS="1")
        pre = STANDIN if dev == "cuda" else ()
        procs.append(subprocess.Popen([*pre, PY, os.path.join(HERE, "ranks.py"), "wait", odd, str(after), tag, dev],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=HERE, env=env))
    return procs


def ranks_run(dev, tool_args):
    """Four ranks of a job under --match, a report every 2 s, rank 3 diverging after 200 steps: the reports, the
    time rank 3 diverged, the text and the job's name."""
    tag = "ranks-" + uuid.uuid4().hex[:8]
    job = "job-" + tag
    procs = start_ranks(tag, job, "3", 200, dev=dev)
    d = tempfile.mkdtemp(prefix="workload-")
    out = os.path.join(d, "r.json")
    tool, text, diverged = None, [], None
    try:
        for p in procs:
            check(read_line(p.stdout, 180, "ranks.py ready").startswith("ready"), "ranks.py ready")
        tool = subprocess.Popen([TOOL, "--match", f"ranks\\.py wait \\S+ \\S+ {tag} {dev}$", *tool_args, "--json", out,
                                 "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=HERE)
        err = []
        threading.Thread(target=lambda: err.extend(l.decode(errors="replace") for l in tool.stderr), daemon=True).start()
        threading.Thread(target=lambda: text.append(tool.stdout.read()), daemon=True).start()
        end = time.time() + 120
        while time.time() < end and sum(any(f"pid {p.pid} " in l and "tracing" in l for l in err) for p in procs) < 4:
            time.sleep(0.2)
        # and its first report written: on a busy machine the reports began late, one before rank 3 diverged
        while time.time() < end and not (os.path.exists(out) and os.path.getsize(out)):
            time.sleep(0.2)
        for p in procs:
            p.stdin.write(b"g")
            p.stdin.flush()
        said = read_line(procs[3].stdout, 180, "rank 3 diverging").split()
        eq(said[0], "diverging", "rank 3 says when it diverges")
        diverged = float(said[2])
        end = time.time() + 60
        while time.time() < end:  # a line without its newline is a report still being written
            reps = [json.loads(l) for l in open(out) if l.endswith("\n")] if os.path.exists(out) else []
            if len([r for r in reps if r["time_unix"] > diverged]) >= 7:
                break
            time.sleep(0.5)
    finally:
        if tool:
            tool.send_signal(signal.SIGINT)
            tool.wait(timeout=60)
        for p in procs:
            p.kill()
            p.wait()
    return [json.loads(l) for l in open(out) if l.strip()], diverged, b"".join(text).decode(errors="replace"), job


def ranks_check(reps, diverged, txt, job, layer):
    """Before rank 3 diverged no rank is named; within six reports after, rank 3 is, at its line, in `layer` too,
    and no other rank ever is."""
    same = [r for r in reps if r["time_unix"] < diverged]
    after = [r for r in reps if r["time_unix"] > diverged]
    check(len(after) >= 6 and len(same) >= 3, f"three reports before rank 3 diverged, six after: {len(same)}, {len(after)}")
    eq(reps[-1]["ranks"]["compared"], 4, "four ranks compared")
    eq([(r["seq"], r["ranks"]["apart"]) for r in same if r["ranks"]["apart"]], [], "the four the same: none named")
    line = leak_line("ranks.py")
    named = [(r["seq"], a) for r in after[:6] for a in r["ranks"]["apart"]]
    check(named, f"rank 3 named within six reports of its diverging: {[r['ranks'] for r in after[:6]]}")
    seq, a = named[0]
    eq((a["rank"], (a["at"] or {}).get("line")), ("3", line), f"rank 3, at the line that keeps the tensors (report {seq}): {a}")
    tensors = [a for _, a in named if a["layer"] == layer]

    def apart(t):  # the rule (docs/DESIGN.md): 16 MiB over the median, or 4 MiB and 64 KiB a step (256 KiB a s) faster
        faster = t["growth"] - t["median_growth"] >= (64 << 10 if t["per"] == "step" else 256 << 10)
        return t["over_bytes"] >= 16 << 20 or (t["over_bytes"] >= 4 << 20 and faster)
    check(tensors and all(t["others"] == 3 and apart(t) and (t["at"] or {}).get("line") == line for t in tensors),
          f"{layer} too, apart by the rule from the other three's median: {named}")
    others = [(r["seq"], a["rank"], a["layer"]) for r in reps for a in r["ranks"]["apart"] if a["rank"] != "3"]
    eq(others, [], "no other rank named in any report")
    t = tensors[-1]
    print(f"# rank 3 named at report {seq} in {a['layer']} ({len(same)} reports before it diverged); {layer}: "
          f"+{t['over_bytes'] / 2**20:.1f} MiB, {t['growth'] / 2**20:.2f} MiB/{t['per']} against "
          f"{t['median_growth'] / 2**20:.2f}", flush=True)
    check(re.search(rf"^rank 3 of job {job}: \+[\d.]+ MiB {layer} over the other 3 ranks' median \(pid \d+\), "
                    rf"growing .* at .*ranks\.py:{line} in <module>$", txt, re.M), "text: the rank's line")


@test
def ranks_one_of_four_diverges_named_at_its_line():
    """Issue 39's ranks: a job of four CPU ranks under --match, at default settings with a report every 2 s. For
    their first 200 steps (10 s or more) the four are the same: no rank is named. Then rank 3 keeps an extra 1 MiB
    tensor a step: within six reports of that a report names it, at its line, and no other rank, ever. In
    heap-growth mode the tensors' 1 MiB blocks are mmapped: libc's address space names the rank too."""
    ranks_check(*ranks_run("cpu", ()), "torch_cpu")


@test
def ranks_cuda_one_of_four_diverges_on_the_standin_device():
    """Issue 39's ranks on CUDA: the same job's four ranks on the stand-in device (scripts/standin-gpu), the GPU
    layers at full fidelity: rank 3's extra 1 MiB CUDA tensor a step names it, in torch_cuda, at its line."""
    ranks_check(*ranks_run("cuda", GPU_ONLY), "torch_cuda")


# The matrix, within a few minutes: every workload once, full fidelity and default settings both covered,
# -p and -c both covered (the losses loop has all three of its own above).
@test
def dataset_class_cache_full_fidelity():
    leak_run("dataset_cache.py", "p", *FULL)


def default_goal(script, mode, within, bystander, wl_args=()):
    """Issue 24's goal at default settings, a report every 2 s: within `within` reports a top-three leak
    candidate carries the leak's line, and the line that only suffers from it (the text `bystander` finds) is
    never a candidate. With -c counted from the loop's first report, as running_total_started_sampled's: import
    torch takes 4 reports at rest under the tool, more on a loaded machine. With wl_args (-c) the workload ends
    by itself after its steps, and the final report after its exit must keep what the run found. Returns the
    reports."""
    run = Run(script, mode, "--top", "50", interval="2", wl_args=wl_args)

    def loop(rs):  # the index of the loop's first report: 0 with -p
        return next((i for i, r in enumerate(rs) if loop_running(r, script)), len(rs)) if mode == "c" else 0

    if wl_args:
        reps = run.finish()
    else:
        try:
            reps = run.wait_for(lambda rs: len(rs) >= within + loop(rs), 30 + 4 * within + 40 * (mode == "c"))
        finally:
            reps = run.stop()
    first = loop(reps)
    found = [r["seq"] for r in reps[first:first + within] if growing_top3(r, script)[1]]
    at_leak = [[(s["layer"], s["verdict"]) for s in r["stacks"] if (user_frame(s, script) or {}).get("line") ==
                leak_line(script)][:3] for r in reps[first:first + within]]
    check(found, f"the leak's line among the first three candidates within {within} reports of report "
                 f"{first + 1}: {[[(s['layer'], (user_frame(s, script) or {}).get('line')) for s in growing_top3(r, script)[0]] for r in reps[first:first + within]]}"
                 f"; the rows at its line: {at_leak}; modes at the end: {reps[-1]['modes'] if reps else None}")
    print(f"# {script} ({mode}): a top-three candidate at its line at report {found[0]}, the loop's first "
          f"report {first + 1}", flush=True)
    # Left out: rss pages of pymalloc's arenas the line's ints touch first (tens of KiB), the same victim one
    # allocator down.
    line = line_with(script, bystander)
    got = candidates_at(reps, script, line, ("libc", "torch_cpu"))
    # What the victim test saw at those reports: the row's growth and the process's heap walk then.
    seen = [(r["seq"], s["layer"], s["bytes"], s["growth_bytes"], s["possible_fragmentation"],
             {k: (next((p for p in r["processes"] if p["pid"] == s["pid"]), {}).get("fragmentation") or {}).get(k)
              for k in ("free_bytes", "free_resident_bytes", "capped", "broken_walks", "age_s")})
            for r in reps for s in r["stacks"] if r["seq"] in {g[0] for g in got} and s["verdict"] == "growing"
            and (user_frame(s, script) or {}).get("line") == line]
    eq(got, [], f"{bystander} (line {line}) is never a candidate (seen: {seen})")
    if wl_args:
        check_exited(run, reps, script)
    return reps


def dataset_cache_default(mode, within, wl_args=()):
    """The batch's memory (the C heap's growth it reached, its tensor) is never a candidate: its growth is
    filled by the cache's tensors, a victim, once judged (in its sixth report). On a loaded machine the cache's
    tensors may reach the break first (6 runs in 19 beside a busy loop): that growth is then the cache line's
    own, and the batch's comes later, or not in the run."""
    script = "dataset_cache.py"
    reps = default_goal(script, mode, within, "torch.stack", wl_args)
    batch = line_with(script, "torch.stack")

    def growth(r, line=None):  # the C heap's break growth in a report (at line): its rows
        return [s for s in r["stacks"] if s["layer"] == "libc" and any(f.get("func") == "__sbrk" for f in
                s["frames"][:4]) and (line is None or (user_frame(s, script) or {}).get("line") == line)]

    grown = {(user_frame(s, script) or {}).get("line") for r in reps for s in growth(r)}
    check(grown & {batch, leak_line(script)}, f"the break's growth at the batch's line or the cache's: {grown}")
    at_batch = [(r["seq"], s["bytes"], s["verdict"]) for r in reps for s in growth(r, batch)]
    # Judged in its sixth report, if it still grew by then: a row whose growth had stopped (26.6 MB from its
    # fourth report on, once, at the end of a -c run) is stable, no candidate and no victim.
    per = {}
    for seq, b, _ in at_batch:
        per[seq] = per.get(seq, 0) + b
    sizes = [per[seq] for seq in sorted(per)]
    still = len(sizes) >= 6 and sizes[5] > sizes[4]
    check(not still or any(v == "victim" for _, _, v in at_batch),
          f"the batch's heap growth shown as a victim: its rows {at_batch}; the last report's C heap rows over 1 "
          f"MB: {[(s['bytes'], s['verdict'], (user_frame(s, script) or {}).get('line')) for s in reps[-1]['stacks'] if s['layer'] == 'libc' and s['bytes'] > 1 << 20]}")


@test
@takes(20)
@alone
def dataset_class_cache_default_settings_2s():
    dataset_cache_default("p", 6)


@test
@alone
def dataset_class_cache_started_default_settings_2s():
    """Ending by itself after 1,500 steps (at least 15 s at 10 ms a step): the final report after the exit too."""
    dataset_cache_default("c", 10, ("0", "1500"))


@test
@takes(50)
@alone
def losses_loop_started_default_settings_2s():
    """The losses loop under -c at default settings: a top-three candidate at the loss line within ten
    reports, and loss.backward(), which only reaches the fresh heap the kept graphs push it into, never. It
    ends by itself after 3,000 steps (at least 15 s at 5 ms a step): the final report after the exit too."""
    default_goal("losses.py", "c", 10, "loss.backward()", ("0", "3000"))


@test
@takes(15)
@alone
def models_kept_in_a_list_default_settings():
    leak_run("models_list.py", "p")


def model_cache_run(maxsize, reports=6):
    """model_cache.py with the cache's maxsize, attached as `memleak-ai -p PID` is, every setting its default
    (a report every 5 s), until `reports` reports and the final one are in. Returns the run and its reports."""
    run = Run("model_cache.py", "p", interval="5", wl_args=(maxsize,))
    try:
        run.wait_for(lambda rs: len(rs) >= reports, 30 + 5 * reports + 30)
    finally:
        reps = run.stop()
    check(len(reps) > reports, f"model cache ({maxsize}): {reports} reports and the final one: {len(reps)}")
    return run, reps


@test
@takes(40)
@alone
def models_kept_by_a_cache_default_settings_5s():
    """Issue 35: an lru_cache(maxsize=None) keyed by the model keeps every round's model (1.1 MiB of parameters
    and gradients a round, many tensors and modules of one class): within six reports a top-three leak
    candidate at the line that builds the model."""
    script = "model_cache.py"
    run, reps = model_cache_run("none")
    found = [r["seq"] for r in reps[:6] if growing_top3(r, script)[1]]
    check(found, f"the model's line among the first three candidates within 6 reports: "
                 f"{[[(s['layer'], (user_frame(s, script) or {}).get('line')) for s in growing_top3(r, script)[0]] for r in reps[:6]]}"
                 f"; the rows at its line: {[[(s['layer'], s['verdict']) for s in r['stacks'] if (user_frame(s, script) or {}).get('line') == leak_line(script)][:4] for r in reps[:6]]}"
                 f"; modes at the end: {reps[-1]['modes']}")
    print(f"# {script}: a top-three candidate at its line at report {found[0]}", flush=True)
    check_outputs(run, reps[-1], True)


@test
@takes(40)
@alone
@flaky("issue 37: once in 7 runs a sampled C heap row (detach's TensorImpl, ~8 records at weight 25) rose in its "
       "first 3 intervals and read growing at score 0.5 in report 5 of the bounded cache")
def models_in_a_bounded_cache_default_settings_5s():
    """The same loop with lru_cache(maxsize=2): the cache keeps two models, nothing grows in any report."""
    run, reps = model_cache_run("2")
    for r in reps:
        grow = [(s["layer"], s["bytes"], (user_frame(s, "model_cache.py") or {}).get("line"),
                 [f.get("func") for f in s["frames"][:3]]) for s in r["stacks"] if s["verdict"] == "growing"]
        eq(grow, [], f"bounded cache: no growing stack in report {r['seq']}")
    check_outputs(run, reps[-1], False)


@test
@alone  # the main process faults in pages for its batches in flight (rss layer): growth while workers run ahead
def dataloader_workers_cache_full_fidelity():
    """The workers' caches are leak candidates in the workers. The main process's pages for the batches in flight
    grow while the workers run ahead (once in a suite run, at the first report with the leak): the run goes on
    while a main process's row is growing, 40 s at most. The report that ended the wait has the leak in the
    workers and no growing row in the main process; in the final report, which may come a report later and keep
    a main process's row that grew in it, the leading candidate is a worker's."""
    script = "dataloader_cache.py"

    def growing_pids(rep):
        return {s["pid"] for s in rep["stacks"] if s["verdict"] == "growing" and user_frame(s, script)}

    run, reps = leak_run(script, "p", *FULL, until=lambda run, rep: run.pid not in growing_pids(rep))
    met = [r for r in reps if growing_top3(r, script)[1] and growing_pids(r) and run.pid not in growing_pids(r)]
    main = [(r["seq"], s["layer"], s["bytes"], s["growth_bytes"], user_frame(s, script),
             [f.get("func") for f in s["frames"][:3]]) for r in reps[-3:] for s in r["stacks"]
            if s["pid"] == run.pid and s["verdict"] == "growing"]
    check(met, f"a report with the leak in the workers and no main process's growing row: the main "
               f"process's growing rows in the last reports: {main[:6]}")
    lead = growing_top3(reps[-1], script)[0][:1]
    check(lead and lead[0]["pid"] != run.pid, f"the final report's leading candidate is a worker's: "
          f"{[(s['pid'], s['layer'], s['bytes']) for s in lead]}, main {run.pid}")


@test
@alone
@flaky("issue 37: beside stress-ng --cpu 1, one worker's copy-on-write row at the line read stable at 5 MiB "
       "(the other growing) in the final report, in 1 of the 2 fresh-clone runs of this stop that reached it")
def dataloader_copy_on_write_default_settings():
    """Workers forked over a Dataset holding a large Python list copy its pages as they read it (reference
    counts): at default settings each worker has a growing rss stack at the __getitem__ line whose pages are
    copies (cow_bytes), and the workers' Private_Dirty growth is explained."""
    script = "dataloader_cow.py"
    line = leak_line(script)

    def growing_copies(run, rep):
        workers = {}
        for s in rep["stacks"]:
            if (s["layer"] == "rss" and s["verdict"] == "growing" and s["pid"] != run.pid and s["cow_bytes"] > 0
                    and (user_frame(s, script) or {}).get("line") == line):
                workers.setdefault(s["pid"], []).append(s)
        return workers

    def copied_enough(run, reps):
        """The workers' copies take a while (4 MiB of Private_Dirty growth each), and under the budget their
        rows move in steps of a sampled page's weight (0.5 to 2 MiB): the run goes on, 40 s at most, until two
        reports in a row have both workers' rows growing (the final one restates the last)."""
        ws = [p for p in reps[-1]["processes"] if p["pid"] != run.pid]
        return (len(ws) >= 2 and all(p.get("memory", {}).get("private_dirty_growth_bytes", 0) > 4 << 20 for p in ws)
                and len(reps) >= 2 and all(len(growing_copies(run, r)) == 2 for r in reps[-2:]))

    run, reps = leak_run(script, "p", until=copied_enough, until_all=True)
    final = reps[-1]
    workers = growing_copies(run, final)
    seen = [(s["pid"], s["verdict"], s["bytes"], s["cow_bytes"], (user_frame(s, script) or {}).get("line"))
            for s in final["stacks"] if s["layer"] == "rss" and s["pid"] != run.pid]
    eq(len(workers), 2, f"workers with a growing copy-on-write stack at line {line} (rss rows of the workers: "
                        f"pid, verdict, bytes, cow_bytes, line: {seen[:12]})")
    for pid, ss in workers.items():
        top = max(ss, key=lambda s: s["cow_bytes"])
        eq(top["cow_bytes"], top["bytes"], f"worker {pid}: its pages there are all copies")
        check(user_frame(top, script)["func"].endswith("__getitem__"), f"worker {pid}: {user_frame(top, script)}")
        mem = next(p["memory"] for p in final["processes"] if p["pid"] == pid)
        check(mem["private_dirty_growth_bytes"] > 4 << 20 and mem["private_dirty_explained_pct"] >= 80,
              f"worker {pid}: Private_Dirty growth explained: {mem}")
        check(mem["cow_bytes"] >= top["cow_bytes"], f"worker {pid}: cow_bytes in memory {mem}")


@test
@alone
def dataloader_copy_on_write_found_in_page_tables():
    """The same workers, started with -c, once the budget has stopped tracing faults (its last step, forced
    from the start by a test hook): each worker's copies are found by comparing its page table with its
    parent's, and charged to the parent's line that built the list (Rows.__init__), where the parent's own
    row holds the arenas. Between the first report with both workers and the last, each worker's copies
    explain at least 80 % of its Private_Dirty growth (before that, the parent's own writes after the fork
    raise it too, and those are not the worker's copies)."""
    script = "dataloader_cow.py"
    built = line_with(script, "self.rows = [")

    def scan_rows(rep, pid=None):
        return [s for s in rep["stacks"] if s["layer"] == "rss" and s.get("cow_found_by") == "page_tables"
                and (pid is None or s["pid"] == pid)]

    def copied(rep, pid):
        return sum(s["cow_bytes"] for s in scan_rows(rep, pid))

    def workers(run, rep):
        return [p["pid"] for p in rep["processes"] if p["pid"] != run.pid and p.get("memory", {}).get("pss_bytes")
                and scan_rows(rep, p["pid"])]

    def dirty_growth(reps, ws, w):  # since the first report with copies of every worker in ws
        first = next(r for r in reps if all(scan_rows(r, x) for x in ws))
        mem = [next(p["memory"] for p in r["processes"] if p["pid"] == w) for r in (first, reps[-1])]
        return mem[1]["private_dirty_bytes"] - mem[0]["private_dirty_bytes"]

    def ready(reps):  # copies found, growing, and enough Private_Dirty growth since to compare them with
        ws = workers(run, reps[-1])
        return len(ws) >= 2 and all(copied(reps[-1], w) > 8 << 20 and dirty_growth(reps, ws, w) > 4 << 20 and
                                    any(s["verdict"] == "growing" for s in scan_rows(reps[-1], w)) for w in ws)

    run = Run(script, "c", interval="2", tool_env={"MEMLEAK_AI_TEST_RSS_NO_FAULTS": "1"})
    try:
        reps = run.wait_for(ready, 90)
    finally:
        reps = run.stop()
    final = reps[-1]
    ws = workers(run, final)
    eq(len(ws), 2, f"two workers with copies found in the page tables: {[(s['pid'], s['bytes']) for s in scan_rows(final)]}")
    first = next(i for i, r in enumerate(reps) if all(scan_rows(r, w) for w in ws))
    parent = [s for s in final["stacks"] if s["pid"] == run.pid and s["layer"] == "libc" and
              (user_frame(s, script) or {}).get("line") == built]
    check(parent and sum(s["bytes"] for s in parent) > 100 << 20,
          f"the parent's rows at line {built} hold the list's arenas: {[(s['bytes'], s['verdict']) for s in parent]}")
    for w in ws:
        top = max(scan_rows(final, w), key=lambda s: s["bytes"])
        eq((user_frame(top, script) or {}).get("line"), built, f"worker {w}: its copies at the list's line")
        check(top["verdict"] == "growing" and top["cow_bytes"] == top["bytes"],
              f"worker {w}: growing, all copies: {top['verdict']} {top['cow_bytes']} of {top['bytes']}")
        dirty = dirty_growth(reps, ws, w)
        cow = copied(final, w) - copied(reps[first], w)
        check(dirty > 4 << 20 and cow >= 0.8 * dirty,
              f"worker {w}: copies found {cow} of its Private_Dirty growth {dirty} (reports {reps[first]['seq']}..{final['seq']})")
    check(any("page tables" in l for l in run.text.splitlines()), "the text says where the copies were found")


@test
def dataloader_copies_of_memory_from_before_attach():
    """The same workers, attached with -p once the parent has built its list, fault tracing stopped from the
    start: no row of the parent's holds the list (built before attach), so the workers' copies found in the
    page tables make rows with no frames, and the text says why rather than that no frames were captured."""
    script = "dataloader_cow.py"
    run = Run(script, "p", interval="2", tool_env={"MEMLEAK_AI_TEST_RSS_NO_FAULTS": "1"})

    def unowned(rep):
        return {s["pid"]: s for s in rep["stacks"] if s["layer"] == "rss" and s.get("cow_found_by") == "page_tables"
                and s["pid"] != run.pid and s["cow_bytes"] > 4 << 20}

    try:
        reps = run.wait_for(lambda rs: len(unowned(rs[-1])) >= 2, 90)
    finally:
        reps = run.stop()
    rows = unowned(reps[-1])
    eq(len(rows), 2, f"two workers' copies found in the page tables: {[(s['pid'], s['bytes'], s['frames'][:1]) for s in reps[-1]['stacks'] if s.get('cow_found_by')]}")
    for pid, s in rows.items():
        eq(s["frames"], [], f"worker {pid}: no parent's row holds the list, so no frames")
        eq(s["cow_bytes"], s["bytes"], f"worker {pid}: all its pages there are copies")
    text = run.text.split("=== memleak-ai final report")[-1]
    check("no row of the parent's holds these pages: it built them before memleak-ai attached" in text,
          "the text says why the copies have no frames")


@test
@alone
@smoke
def steady_control_started_default_settings_grows_nothing():
    """The control from its first instruction: import torch's memory is start-up (verdict import), nothing grows."""
    run, reps = control_run("c")
    check(any(s["verdict"] == "import" for r in reps for s in r["stacks"]), "import-time stacks have their own verdict")


@test
@debian_too
def running_total_census_default_settings():
    """total += loss, attached at default settings: with no probe and no stack, the heap census names the
    autograd node types the total keeps, growing at the third walk (the third report, on a quiet machine); per step two Linear layers
    (AddmmBackward0 and TBackward0 each), one ReLU, one mse_loss and one add, so their counts keep those
    ratios, and the text says so."""
    run = Run("running_total.py", "p", interval="2")
    nodes = "torch::autograd::generated::"

    def census(rep):
        p = next((p for p in rep["processes"] if p["pid"] == run.pid), {})
        return {t["name"]: t for t in (p.get("census") or {}).get("types", [])}

    try:
        reps = run.wait_for(lambda rs: census(rs[-1]).get(nodes + "AddmmBackward0", {}).get("growing"), 60)
    finally:
        run.stop()
    types = census(reps[-1])
    addmm = types.get(nodes + "AddmmBackward0")
    check(addmm and addmm["growing"] and addmm["per_s"] > 0,
          f"AddmmBackward0 growing within {len(reps)} reports: {list(types.items())[:4]}")
    # The third walk: on a quiet machine the first three come at each report; one report of a run beside
    # stress-ng came without its walk (stress run S6), and the type grew at the fourth report, the third walk.
    walks = [(next((p.get("census") or {} for p in r["processes"] if p["pid"] == run.pid), {})).get("walks")
             for r in reps]
    eq(walks[-1], 3, f"growing at the third walk (walks at each report: {walks})")
    check(len(reps) <= 4, f"the third walk by the fourth report: {walks}")
    grew = [n for n, t in types.items() if t["growing"]]
    check(set(grew) >= {nodes + k for k in ("AddmmBackward0", "TBackward0", "ReluBackward0")} and
          grew[0].replace("shared_ptr control block of ", "").startswith(nodes),
          f"node types lead the growing ones (torch 1.13's shared_ptr control blocks with them): {grew[:8]}")
    relu = types[nodes + "ReluBackward0"]["count"]
    # The walk reads the heap while the loop runs: a type's nodes made meanwhile may be counted or not (one run
    # counted 1,844 AddmmBackward0 against 2 x 944, the 22 steps of its 147 ms walk at 153 steps a second).
    frag = next(p for p in reps[-1]["processes"] if p["pid"] == run.pid)["fragmentation"]
    during = types[nodes + "ReluBackward0"]["per_s"] * frag["scan_ms"] / 1000
    for name, per_step in (("AddmmBackward0", 2), ("TBackward0", 2), ("MseLossBackward0", 1), ("AddBackward0", 1)):
        got = types.get(nodes + name, {}).get("count", 0)
        check(abs(got - per_step * relu) <= 0.02 * per_step * relu + 2 + per_step * during,
              f"{name}: {got}, {per_step} a step as ReluBackward0's {relu} (the walk took {frag['scan_ms']:.0f} ms)")
    cen = next(p["census"] for p in reps[-1]["processes"] if p["pid"] == run.pid)
    check(cen["typed"] >= 6 * relu and cen["chunks"] > cen["typed"] and cen["walks"] >= 3, f"census: {cen}")
    lines = [l for l in run.text.splitlines() if l.startswith(f"heap census: pid {run.pid} ")]
    check(any("growing:" in l and nodes + "AddmmBackward0" in l for l in lines),
          f"the text's census line: {lines[-1:]}")


def line_with(script, text):
    """The number of the workload's first line containing text."""
    return next(n for n, line in enumerate(open(os.path.join(HERE, script)), 1) if text in line)


@test
@alone
def running_total_sampled_default_settings():
    """total += loss, attached at default settings, a report every 2 s: the C heap's sampling windows record
    the autograd nodes the total keeps with their stacks, so a top-3 leak candidate carries the forward or
    loss line (or the total's) within six reports (or by the sixth window, where that comes later); the break's growth at loss.backward(), fresh heap taken
    because those nodes pin the freed space, is never a leak candidate; and the sampled count of the
    AddmmBackward0 nodes is within 25 % of the heap census's exact count of them."""
    script = "running_total.py"
    back, total = line_with(script, "loss.backward()"), line_with(script, "total += loss")
    run = Run(script, "p", "--top", "40", interval="2")

    def nwin(r):
        return (r["modes"].get("libc_windows") or {}).get("windows", 0)

    # Seven reports and six windows: a window comes about every 2.4 s, later on a loaded machine (proof E of
    # 2026-11-30 read 5 at the seventh report, its other half's PyTorch loop beside it).
    try:
        reps = run.wait_for(lambda rs: len(rs) >= 7 and nwin(rs[-1]) >= 6, 90)
    finally:
        reps = run.stop()
    check(len(reps) >= 7, f"reports: {len(reps)}")
    modes = reps[-1]["modes"]
    windows = modes.get("libc_windows") or {}
    check(modes["libc"] == "heap_growth" and nwin(reps[-1]) >= 6 and windows.get("checked", 0) > 0,
          f"the C heap sampled in windows, their blocks checked: {modes}")

    def lines(s):
        return (user_frame(s, script) or {}).get("line")

    # Six reports, or more where a loaded machine took the six windows later (proof M read no candidate in the
    # first six reports): the verdict needs windows, and a window's pace is the machine's.
    upto = max(6, next((k + 1 for k, r in enumerate(reps) if nwin(r) >= 6), len(reps)))
    found = [r["seq"] for r in reps[:upto] if any(lines(s) in (leak_line(script), total)
                                                  for s in growing_top3(r, script)[0])]
    check(found, f"a top-3 candidate at the forward/loss or total line within {upto} reports (seq, C heap mode, "
                 f"windows, top 3): {[(r['seq'], r['modes'].get('libc'), nwin(r), [(s['layer'], lines(s)) for s in growing_top3(r, script)[0]]) for r in reps[:upto]]}")
    eq(candidates_at(reps, script, back), [], f"no leak candidate at loss.backward() (line {back})")
    # The last report whose census lists the node type (its types are the 16 first: growing ones by rate, then
    # by count; one run's final report listed none of them by that name).
    node = "torch::autograd::generated::AddmmBackward0"

    def census_count(r):
        cen = next((p.get("census") for p in r["processes"] if p["pid"] == run.pid), None) or {}
        return next((t["count"] for t in cen.get("types", []) if t["name"] == node), None)

    final = next((r for r in reversed(reps) if census_count(r) is not None), None)
    check(final, f"a report whose census lists {node}: {[[t['name'] for t in (next((p.get('census') for p in r['processes'] if p['pid'] == run.pid), None) or {}).get('types', [])][:6] for r in reps[-2:]]}")
    exact = census_count(final)
    # The node itself: operator new called by the autograd kernel of addmm (the others it makes come deeper).
    sampled = sum(s["count"] for s in final["stacks"] if s["layer"] == "libc" and len(s["frames"]) > 1 and
                  (s["frames"][0].get("func") or "").startswith("operator new") and
                  "VariableType::(anonymous namespace)::addmm(" in (s["frames"][1].get("func") or ""))
    print(f"# sampled AddmmBackward0 nodes {sampled}, the census's {exact} ({sampled / max(exact, 1):.2f}); one in "
          f"{windows.get('one_in')}, {windows.get('windows')} windows, weight {windows.get('weight', 0):.1f}", flush=True)
    check(0.75 * exact <= sampled <= 1.25 * exact,
          f"sampled AddmmBackward0 nodes {sampled} within 25% of the census's {exact} (weight {windows})")
    text = [l for l in run.text.splitlines() if l.startswith("libc: sampled in windows")]
    check(text, "the text says the C heap is sampled in windows")


@test
@alone
@flaky("issue 37: once in 3 full runs the report kept at the exit had no growing row at the line")
def running_total_started_sampled_default_settings():
    """The same loop started with -c: the windows attach their links again in the image after exec (paths
    of the first image's mappings no longer open), and a top-3 leak candidate carries the forward or loss
    line (or the total's) within ten reports at 2 s of the loop's first; loss.backward() is never one."""
    script = "running_total.py"
    back, total = line_with(script, "loss.backward()"), line_with(script, "total += loss")

    def lines(s):
        return (user_frame(s, script) or {}).get("line")

    def named(r):
        return any(lines(s) in (leak_line(script), total) for s in growing_top3(r, script)[0])

    # The loop's first small rows are shown. It ends by itself after 3,000 steps: at least 15 s at 5 ms a step.
    run = Run(script, "c", "--top", "400", interval="2", wl_args=("3000",))
    reps = run.finish()
    # Counted from the loop's first report: import torch takes 3 reports at rest, 8 or more on a loaded machine.
    loop = next((i for i, r in enumerate(reps) if loop_running(r, script)), len(reps))
    found = [i for i, r in enumerate(reps) if named(r)]
    check(found and found[0] - loop < 10, f"a top-3 candidate at the forward/loss or total line within ten reports "
                                         f"of the loop's first (report {loop + 1}): "
                                         f"{[[(s['layer'], lines(s)) for s in growing_top3(r, script)[0]] for r in reps[-4:]]}")
    check((reps[-1]["modes"].get("libc_windows") or {}).get("windows", 0) >= 2, f"windows: {reps[-1]['modes']}")
    eq([l for l in run.stderr if "cannot attach the C heap's probes again" in l], [], "the windows attach again")
    eq(candidates_at(reps, script, back), [], f"no leak candidate at loss.backward() (line {back})")
    check_exited(run, reps, script, named)


# The stand-in device (scripts/standin-gpu); on a GPU machine (scripts/gpu-validate.sh) the real one instead.
REAL_GPU = bool(os.environ.get("MEMLEAK_AI_REAL_GPU"))
STANDIN = () if REAL_GPU else (os.path.join(ROOT, "scripts", "standin-gpu"),)


class Fifos:
    """A control FIFO the workload reads and an answer FIFO it writes (its two last arguments)."""

    def __init__(self):
        d = tempfile.mkdtemp(prefix="standin-")
        self.ctl, self.ans = os.path.join(d, "ctl"), os.path.join(d, "ans")
        os.mkfifo(self.ctl)
        os.mkfifo(self.ans)
        self.ans_fd = os.open(self.ans, os.O_RDONLY | os.O_NONBLOCK)  # so that the workload's open goes on
        self.w = None

    def ask(self, cmd, timeout=30):
        """Send cmd; the answer's words (empty for a command with no answer, or none in time)."""
        if self.w is None:
            self.w = os.open(self.ctl, os.O_WRONLY)
        os.write(self.w, cmd)
        if cmd != b"p":
            return []
        line, end = b"", time.time() + timeout
        while not line.endswith(b"\n") and time.time() < end:
            try:
                line += os.read(self.ans_fd, 256)
            except BlockingIOError:
                time.sleep(0.05)
        return line.decode().split()

    def close(self):
        for fd in (self.w, self.ans_fd):
            if fd is not None:
                os.close(fd)


# The GPU layers alone, every probe kept: what a stand-in test checks does not rest on the budget (so it can run
# beside other tests), and the C heap's probes do not slow torch's import under -c.
GPU_ONLY = ("--layers", "cuda,cuda_host,torch_cuda,torch_host", *FULL)


def standin_accounting(expandable, mode="c", raw=None, default=False):
    """PyTorch's real CUDA caching allocator on the stand-in device (scripts/standin-gpu), started with -c:
    at three reports taken while the loop is paused, torch_cuda's outstanding bytes equal PyTorch's
    requested_bytes.all.current and the cuda layer's equal memory_reserved(); the kept tensor's line is a
    growing torch_cuda row, and the scratch tensor's is not. raw "usdt": raw_alloc blocks too, probed by symbol
    (--torch-raw-alloc) beside the USDT probes; raw "symbols": the USDT probes never attached (test hook), so
    their semaphores stay off and torch_cuda is the raw_alloc blocks alone, the tensors unseen by it. default:
    at default settings (every layer, the budget), else GPU_ONLY."""
    script = "cuda_kept.py"
    io = Fifos()
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if expandable else {}
    wl_env = {**env, **({"CUDA_KEPT_RAW": "1"} if raw else {}), **({"CUDA_KEPT_PIN": "1"} if raw == "usdt" else {})}  # -c: the workload has the tool's environment
    tool_env = {**wl_env, **({"MEMLEAK_AI_TEST_NO_USDT": "1"} if raw == "symbols" else {})}
    args = (("--torch-raw-alloc", "--top", "300") if raw else ()) + (() if default else GPU_ONLY)
    run = Run(script, mode, *args, interval="1", wl_pre=STANDIN, wl_args=(io.ctl, io.ans), tool_env=tool_env,
              wl_env=wl_env)
    compared, pins = [], []
    try:
        reps = run.wait_for(lambda rs: any(s["layer"] == "torch_cuda" for s in rs[-1]["stacks"]), 90)
        check(reps and any(s["layer"] == "torch_cuda" for s in reps[-1]["stacks"]), "torch_cuda rows")
        for _ in range(3):
            _, req, res, alloc, raw_held, *host = io.ask(b"p")
            n = len(run.reports())
            reps = run.wait_for(lambda rs: len(rs) >= n + 2, 30)  # a report collected wholly in the pause
            tot = reps[-1]["totals"]
            if host:
                pins.append(((tot.get("torch_host", {}).get("count"), tot.get("torch_host", {}).get("bytes"),
                              tot.get("cuda_host", {}).get("bytes")), tuple(int(x) for x in host)))
            compared.append((tot.get("torch_cuda", {}).get("bytes"), int(raw_held if raw == "symbols" else req),
                             tot.get("cuda", {}).get("bytes"), int(res)))
            io.ask(b"r")
            time.sleep(1.5)
        n = len(run.reports())
        run.wait_for(lambda rs: len(rs) >= n + 6, 30)  # growing again after the pauses' flat reports
    finally:
        reps = run.stop()
        io.close()
    print(f"# (torch_cuda, {'raw_alloc held' if raw == 'symbols' else 'requested'}, cuda, reserved) at paused "
          f"reports: {compared}")
    eq(len(compared), 3, "three paused reports")
    for got_t, want_t, got_c, want_c in compared:
        eq((got_t, got_c), (want_t, want_c), "torch_cuda = requested_bytes.all.current (or the raw_alloc blocks "
           "held, with the USDT probes off), cuda = memory_reserved()")
    line = leak_line(script)
    rows = [s for s in reps[-1]["stacks"] if s["layer"] == "torch_cuda" and s["verdict"] == "growing"]
    if raw:
        check(any((user_frame(s, script) or {}).get("line") == line_with(script, "# RAW") for s in rows[:3]),
              f"the raw_alloc line in the top three growing torch_cuda rows: "
              f"{[(user_frame(s, script) or {}).get('line') for s in rows]}")
    if raw == "usdt":
        print(f"# pinned host (torch_host count, bytes, cuda_host bytes) vs (active_requests, allocated_bytes, "
              f"held bytes, held tensors): {pins}")
        eq(len(pins), 3, "three paused reports with the host allocator's figures")
        counts_held = torch_at_least(2, 15)  # a subprocess: asked once
        for (count, handed, reserved), (active, host_reserved, held, held_n) in pins:
            eq((count, handed, reserved), (held_n, held, host_reserved),
               "torch_host = the pinned tensors held (count and bytes), cuda_host = what cudaHostAlloc reserved")
            # torch 2.11 counts in active_requests every block ever handed out (143 for 96 held, on an H200)
            if counts_held:
                eq(count, active, "torch_host's count = host_memory_stats()'s active_requests.current")
        host_rows = [s for s in reps[-1]["stacks"] if s["layer"] == "torch_host" and s["verdict"] == "growing"]
        eq([(user_frame(s, script) or {}).get("line") for s in host_rows][:1], [line_with(script, "# PIN")],
           "the pinned tensors' line is the growing torch_host row")
    if raw == "symbols":
        eq([s["bytes"] for s in reps[-1]["stacks"] if s["layer"] == "torch_cuda" and
            (user_frame(s, script) or {}).get("line") == line], [], "tensors unseen with the semaphores off")
        return
    check(any((user_frame(s, script) or {}).get("line") == line for s in rows[:3]),
          f"the kept tensor's line {line} in the top three growing torch_cuda rows: "
          f"{[(user_frame(s, script) or {}).get('line') for s in rows]}")
    scratch = line_with(script, "scratch = ")
    eq([s["bytes"] for s in rows if (user_frame(s, script) or {}).get("line") == scratch], [],
       "the scratch tensor's line is not growing")


@test
@takes(45)
@alone
def standin_gpu_caching_allocator_exact():
    """At default settings, with raw_alloc blocks too, probed by symbol beside the USDT probes: counted once;
    and pinned host memory (the other stand-in tests trace the GPU layers alone, every probe kept)."""
    standin_accounting(False, raw="usdt", default=True)


@test
@beside
def standin_gpu_expandable_segments_exact():
    standin_accounting(True)


@test
@beside
def standin_gpu_raw_alloc_symbols_semaphore_off_exact():
    standin_accounting(False, raw="symbols")


@test
@beside
def standin_gpu_attached_after_cuda_init_exact():
    """The same attached with -p once torch.cuda is initialised (and before the loop's first tensor): what the
    tool saw since attach is all there is, so the figures are exact as under -c."""
    standin_accounting(False, "p")


@test  # exact figures of unsampled layers: they do not rest on the machine's share
@beside
def standin_gpu_kept_tensors_started_ending_peaks():
    """cuda_steps.py under -c at default settings on the stand-in device: it keeps a 1 MiB tensor a step for 300
    steps, writes PyTorch's own peaks and returns, and its teardown frees every tensor. The final report, after
    the exit: the top leak candidate is the torch_cuda row at the kept line, and the torch_cuda and cuda peaks
    equal requested_bytes.all.peak and reserved_bytes.all.peak within 1 %."""
    script = "cuda_steps.py"
    peaks = os.path.join(tempfile.mkdtemp(prefix="standin-"), "peaks")
    run = Run(script, "c", interval="1", wl_pre=STANDIN, wl_args=("300", peaks))
    reps = run.finish()
    check(os.path.exists(peaks), f"{script} wrote PyTorch's peaks (stderr: {run.stderr[-5:]})")
    req, res = (int(x) for x in open(peaks).read().split())
    final = reps[-1]
    cands = [(s["layer"], (user_frame(s, script) or {}).get("line")) for s in final["stacks"] if s["verdict"] == "growing"]
    eq(cands[:1], [("torch_cuda", leak_line(script))], f"the top leak candidate after the exit: {cands}")
    got = {k: final["peak"]["layers"].get(k, {}).get("bytes", 0) for k in ("torch_cuda", "cuda")}
    print(f"# peaks: torch_cuda {got['torch_cuda']} against requested_bytes.all.peak {req}, cuda {got['cuda']} "
          f"against reserved_bytes.all.peak {res}")
    check(abs(got["torch_cuda"] - req) <= req / 100, f"torch_cuda peak {got['torch_cuda']}, PyTorch's {req}")
    check(abs(got["cuda"] - res) <= res / 100, f"cuda peak {got['cuda']}, PyTorch's {res}")
    check_exited(run, reps, script)


def fragmented_cache(env):
    """cuda_frag.py under -c: device 0's figures in the report after the pause, and the snapshot's."""
    io = Fifos()
    run = Run("cuda_frag.py", "c", "--top", "300", *GPU_ONLY, interval="1", wl_pre=STANDIN,
              wl_args=(io.ctl, io.ans), tool_env=env)
    try:
        run.wait_for(lambda rs: sum(s["layer"] == "torch_cuda" for s in rs[-1]["stacks"]) >= 2, 90)
        _, pinned, reserved, allocated = (int(x) if x.isdigit() else x for x in io.ask(b"p"))
        n = len(run.reports())
        run.wait_for(lambda rs: len(rs) >= n + 1, 30)
    finally:
        reps = run.stop()
        io.close()
    dev = next(x for x in reps[-1]["devices"] if x["device"] == 0)
    print(f"# snapshot: pinned {pinned}, reserved {reserved}, allocated {allocated}; memleak-ai: {dev}")
    return dev, pinned, reserved, reps, run


@test
@beside
def standin_gpu_fragmented_expandable_segments_pinned_by_rows():
    """The same with expandable segments: each pool's segment is one range grown by cuMemMap'd 2 MiB pages, and
    the pinned bytes are counted over the mapped ranges. PyTorch 2.15 keeps the freed pages between live blocks
    mapped through empty_cache(), so memory_snapshot() says 13 MiB again, and so must the tool."""
    dev, pinned, reserved, reps, _ = fragmented_cache({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    eq((dev["pinned_bytes"], dev["reserved_bytes"]), (pinned, reserved), "pinned and reserved bytes, device 0")
    eq([p["bytes"] for p in dev["pinned_by"]], [12 << 20, 1 << 20], f"the two pinning rows: {dev['pinned_by']}")


@test
@beside
def standin_gpu_fragmented_cache_pinned_by_rows():
    """The cache fragmented on purpose (cuda_frag.py): four live 2 MiB blocks keep a 20 MiB segment, and a live
    1 MiB tensor a 2 MiB one. The device's pinned bytes equal what memory_snapshot() says the segments holding a
    live block have free, and the rows pinning them are the two lines that made those blocks, the big one
    first with its segment's 12 MiB."""
    script = "cuda_frag.py"
    dev, pinned, reserved, reps, run = fragmented_cache({})
    eq((dev["pinned_bytes"], dev["reserved_bytes"]), (pinned, reserved), "pinned and reserved bytes, device 0")
    eq(pinned, 13 * 2**20, "the snapshot's own figure: 12 MiB of the big segment, 1 MiB of the small one")
    by = dev["pinned_by"]
    rows = {i + 1: s for i, s in enumerate(reps[-1]["stacks"])}
    lines = [(user_frame(rows[p["stack"]], script) or {}).get("line") if p["stack"] in rows else None for p in by]
    eq(lines[:2], [line_with(script, "# PIN"), line_with(script, "# SMALL")], f"the pinning rows' lines: {by}")
    eq(by[0]["bytes"], 12 * 2**20, "the big blocks' row pins their segment's 12 MiB")
    check(any("cannot be released" in l for l in run.text.splitlines() if l.startswith("cuda device 0:")),
          "the text's device line says what is pinned")


# On a real GPU (about 140 GB) the out-of-memory tests take 16 GiB tensors, and the memory-fraction test allows
# 32 MiB rather than half the device: each fills what it may in a few requests.
OOM_TENSOR = (16 << 30) if REAL_GPU else (8 << 20)
OOM_SEGMENT = OOM_TENSOR if REAL_GPU else (20 << 20)  # the caching allocator's segment for one such tensor


def out_of_memory_run(*wl_args, tensor=OOM_TENSOR):
    """cuda_oom.py under -c on a 64 MiB stand-in device, taking tensors of tensor bytes, until two reports after the
    first OOM report: the run, the reports that have cuda_oom, and memory_reserved() the script printed after its
    OOM."""
    run = Run("cuda_oom.py", "c", *GPU_ONLY, interval="2", wl_args=wl_args, wl_pre=STANDIN,
              tool_env={"STANDIN_GPU_MEMORY": "64M", "OOM_TENSOR_MIB": str(tensor >> 20)})
    try:
        reps = run.wait_for(lambda rs: any(r.get("cuda_oom") for r in rs) and len(rs) >= 2 +
                            next(i for i, r in enumerate(rs) if r.get("cuda_oom")), 90)
    finally:
        reps = run.stop()
    said = [l.split() for l in run.text.splitlines() if l.startswith("oom ")]
    return run, [r for r in reps if r.get("cuda_oom")], int(said[0][2]) if said else None


def mib_text(n, digits=2):
    """A size as PyTorch's message writes it (20.00 MiB, 16.00 GiB), or the tool's text with digits=1."""
    return f"{n / 2**30:.{digits}f} GiB" if n >= 2**30 else f"{n / 2**20:.{digits}f} MiB"


@test
@beside
def standin_gpu_out_of_memory_report():
    """A 64 MiB stand-in device filled with 8 MiB tensors (cuda_oom.py) under -c: when cudaMalloc fails, one
    report is written at once (the caching allocator's retry and raise are the same burst) naming the failed
    call, its 20 MiB request, the raise's message and device, and the Python line that asked, with the device's
    reserved memory then: 60 MiB, what memory_reserved() says after the raise. On a real GPU, 16 GiB tensors."""
    script = "cuda_oom.py"
    run, ooms, reserved = out_of_memory_run()
    eq(len(ooms), 1, "one report at the failure burst")
    o = ooms[0]["cuda_oom"]
    eq((o["function"], o["bytes"], o["error"]), ("cudaMalloc", OOM_SEGMENT, 2), "the failed call")
    # the allocator's raise after its retry joins the report: its message names the device
    eq(o["device"], 0, f"the device, from the raise: {o.get('message')!r}")
    check((o["message"] or "").startswith(f"CUDA out of memory. Tried to allocate {mib_text(OOM_SEGMENT)}. GPU 0 "),
          f"PyTorch's message: {o['message']!r}")
    eq((user_frame(o, script) or {}).get("line"), line_with(script, "# OOM"), f"the request's line: {o}")
    dev = next(d for d in ooms[0]["devices"] if d["device"] == 0)
    print(f"# reserved at the OOM: {dev['reserved_bytes']}, memory_reserved() after it: {reserved}")
    eq(dev["reserved_bytes"], reserved, "reserved then, as PyTorch says")
    if not REAL_GPU:
        eq(reserved, 60 << 20, "three 20 MiB segments")
    check(any(l.startswith("CUDA out of memory: pid ") and f"cudaMalloc of {mib_text(OOM_SEGMENT, 1)} failed" in l
              for l in run.text.splitlines()), "the text's line")


@test
@beside
def standin_gpu_out_of_memory_by_memory_fraction():
    """The same loop allowed 32 MiB (set_per_process_memory_fraction: half the 64 MiB stand-in device): the
    caching allocator raises with no failed call, when a third 20 MiB segment would pass 32 MiB. The entry probe on
    c10::OutOfMemoryError's constructor writes the one report, with PyTorch's message (about 560 bytes, whole),
    the 20 MiB segment it names, device 0, the Python line, and the 20 MiB reserved then (two tensors)."""
    script = "cuda_oom.py"
    run, ooms, reserved = out_of_memory_run("32M", tensor=8 << 20)
    eq(len(ooms), 1, "one report at the raise")
    o = ooms[0]["cuda_oom"]
    eq((o["function"], o["bytes"], o["error"], o["device"]), ("c10::OutOfMemoryError", 20 << 20, None, 0),
       f"the raise: {o}")
    check(o["message"].startswith("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 ") and
          "32.00 MiB allowed" in o["message"] and o["message"].endswith(")") and not o["message_cut"],
          f"PyTorch's message, whole: {o['message']!r}")
    eq((user_frame(o, script) or {}).get("line"), line_with(script, "# OOM"), f"the request's line: {o}")
    dev = next(d for d in ooms[0]["devices"] if d["device"] == 0)
    eq((dev["reserved_bytes"], reserved), (20 << 20, 20 << 20), "reserved then and after: one 20 MiB segment")
    check(any(l.startswith("CUDA out of memory: pid ") and "device 0: c10::OutOfMemoryError raised" in l
              for l in run.text.splitlines()), f"the text's line: {run.text[:600]}")


def interpreter():
    """Which Python and torch ran, as words (the suite runs on several)."""
    try:
        # torch's version from its version.py: importing torch takes seconds, and every test file run says this
        out = subprocess.run([PY, "-c", "import sys, re, importlib.util as u; d = u.find_spec('torch')."
                              "submodule_search_locations[0]; print(sys.version.split()[0], re.search("
                              "r'__version__ = .([\\w.+-]+)', open(d + '/version.py').read())[1])"],
                             capture_output=True, text=True, timeout=120).stdout.split()
    except (OSError, subprocess.TimeoutExpired) as e:
        out = [f"unusable: {e}"]
    return out


def torch_at_least(major, minor):
    """Whether the workloads' torch is major.minor or later."""
    v = ((interpreter()[1:] or ["0.0"])[0] + ".0").split(".")
    return (int(v[0]), int(v[1])) >= (major, minor) if v[0].isdigit() and v[1].isdigit() else False


def say_interpreter():
    out = interpreter()
    print(f"# workloads on {PY}: Python {' torch '.join(out) or 'without torch'}{' (smoke subset)' if SMOKE else ''}",
          flush=True)



def diff_of(a, b, *args):
    """memleak-ai diff -f json of two files (b None: a's first report against its last): exit status, document."""
    p = subprocess.run([TOOL, "diff", "-f", "json", *args, a, *([b] if b else [])], capture_output=True, text=True,
                       timeout=120)
    check(p.stdout or p.returncode == 2, f"diff {os.path.basename(a)}: output ({p.stderr.strip()})")
    return p.returncode, json.loads(p.stdout) if p.stdout else None


def named_lines(doc, change):
    """The (file, line) frames of the rows a diff named `change`, each row as a set."""
    out = []
    for s in doc["stacks"]:
        if s["change"] == change:
            out.append({tuple(f.split(" in ")[0].rsplit(":", 1)) for f in s["frames"]})
    return out


@test
@flaky("issue 37: on a loaded machine a fixed run's torch_cpu rows and total jumped at its last reports: beside "
       "stress-ng --cpu 1 a row at torch/autograd/graph.py's _engine_run_backward was named grown (1,404 bytes a "
       "step against 0); in its own job beside the ranks tests and Debian's full-fidelity smoke (load 7 to 8), the "
       "layer read 24,631 bytes a step and failed the gate; quiet, alone, the layer swings by 60 to 140 KB")
def diff_names_the_kept_losses_and_gates_on_them():
    """Issue 39's diff: losses.py keeping its losses (twice) and keeping loss.item() (twice: same file, same lines),
    each attached with -p at full fidelity, the allocation layers (libc, torch_cpu), for 300 steps, two runs at a
    time (600 took 180 s instead of 125; at 300 a backward pass's buffers caught in one leaking run's last report
    were named grown until a row had to hold more than the other run's row ever held). The leaking run against the fixed one names the loss's line as grown and fails a per-step gate; two fixed
    runs name nothing and pass it; two leaking runs name nothing grown. Profiles and JSON Lines alike; text and HTML
    too; a run's first report against its last; a bad file.
    The gate is the issue's 10K. The loop runs with 8 hidden layers (LOSSES_DEPTH): with its default one, the leaking
    loop keeps only 4.4 to 4.5 KiB a step of C heap on torch 2.15 (its autograd nodes; backward frees their saved
    tensors), and glibc's own count (mallinfo2) reads 1.7, 15.4 and 19.6 KiB a step at 1, 6 and 8 layers. The
    layers are narrow: 256 wide, a backward pass's buffers (over 1 MiB), caught by one fixed run's last report,
    were named shrunk. Resident memory moves with the heap's layout, not a step's nodes (the rss layer, left out)."""
    runs, pdir = {}, tempfile.mkdtemp(prefix="workload-")
    for pair in ((("L1", "loss"), ("F1", "item")), (("L2", "loss"), ("F2", "item"))):
        started = []
        for name, keep in pair:
            more = ("--pprof-dir", pdir) if name == "L1" else ()
            started.append((name, Run("losses.py", "p", *FULL, "--layers", "libc,torch_cpu", "-T", "1000", *more,
                                      interval="2", wl_args=["0", "300", "0", keep], wl_env={"LOSSES_DEPTH": "8"})))
        for name, run in started:
            run.finish(240)
            runs[name] = run
    line = ("/".join((HERE, "losses.py")), str(leak_line("losses.py")))
    for kind in ("pprof", "json"):
        f = {name: getattr(run, kind) for name, run in runs.items()}
        for a, b in (("F1", "L1"), ("F2", "L2")):
            rc, doc = diff_of(f[a], f[b], "--fail-over-per-step", "10K")
            grown = named_lines(doc, "grown")
            check(any(line in g for g in grown), f"{kind} {a} -> {b}: the loss's line {line[1]} grown: {grown}")
            over = [name for name, l in doc["layers"].items() if l["over"]]
            eq((rc, doc["failed"], bool(over)), (1, True, True), f"{kind} {a} -> {b}: over the gate ({over})")
            print(f"# diff {kind} {a} -> {b}: {len(grown)} grown; over: " + ", ".join(
                f"{n} {doc['layers'][n]['b']['per_step'] / 1024:.1f} KiB/step" for n in over), flush=True)
        for a, b in (("F1", "F2"), ("F2", "F1")):
            rc, doc = diff_of(f[a], f[b], "--fail-over-per-step", "10K")
            rates = {n: [((l.get(r) or {}).get("per_step") or 0) // 1 for r in "ab"] for n, l in doc["layers"].items()}
            eq((rc, [(s["change"], s["frames"][:1]) for s in doc["stacks"]]), (0, []),
               f"{kind} {a} -> {b}: the fixed loop twice, nothing named, the gate passed (bytes a step: {rates})")
        for a, b in (("L1", "L2"), ("L2", "L1")):
            rc, doc = diff_of(f[a], f[b])
            eq([(s["frames"][:1], s["a"], s["b"]) for s in doc["stacks"] if s["change"] == "grown"], [],
               f"{kind} {a} -> {b}: the leaking loop twice, nothing grown")
    # --pprof-dir's last profile of the leaking run: made before its interpreter's teardown, it shows the leak.
    last = max(os.listdir(pdir), key=lambda n: int(n.split("-")[3]))
    rc, doc = diff_of(runs["F1"].pprof, os.path.join(pdir, last))
    check(any(line in g for g in named_lines(doc, "grown")), f"--pprof-dir's last profile ({last}): the line grown")
    text = subprocess.run([TOOL, "diff", "--fail-over-per-step", "10K", runs["F1"].pprof, runs["L1"].pprof],
                          capture_output=True, text=True, timeout=120)
    check(re.search(rf"^\[\d+\] \w+ grown at {re.escape(line[0])}:{line[1]} in <module>: growth ", text.stdout, re.M)
          and "gate: --fail-over-per-step 10.0 KiB: FAILED" in text.stdout and text.returncode == 1,
          f"text: the row at its line, the failed gate: {text.stdout[-600:]}")
    html = subprocess.run([TOOL, "diff", "-f", "html", runs["F1"].json, runs["L1"].json], capture_output=True,
                          text=True, timeout=120)
    check(html.returncode == 0 and re.search(r"<h2>grown: \d+ stacks?</h2>", html.stdout) and
          f"<b>{line[0]}:{line[1]} in &lt;module&gt;</b>" in html.stdout, "HTML: the grown table, the line in bold")
    rc, doc = diff_of(runs["L1"].json, None)
    check(rc == 0 and doc["a"]["report"] == 1 and doc["b"]["report"] > 3 and
          any(line in g for g in named_lines(doc, "grown")),
          f"one file: its first report against its last, the loss's line grown: {doc and doc['stacks'][:2]}")
    bad = subprocess.run([TOOL, "diff", runs["L1"].json, os.path.join(runs["L1"].dir, "none.pb.gz")],
                         capture_output=True, text=True, timeout=60)
    eq((bad.returncode, bad.stdout, bad.stderr.count("\n")), (2, "", 1), "a missing file: exit 2, one line")
    check("none.pb.gz" in bad.stderr, f"naming the file: {bad.stderr}")

if __name__ == "__main__":
    say_interpreter()
    if len(sys.argv) == 1:
        sys.argv += SMOKE_TESTS if SMOKE else [fn.__name__ for fn in harness._tests if fn.__name__ not in DEBIAN_ONLY]
        if SMOKE and PY == "/usr/bin/python3.11":
            sys.argv += DEBIAN_TOO + DEBIAN_ONLY
    sys.exit(main())
