"""--max-overhead: the tool measures its own cost and, over budget, follows the C heap through its system calls."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (test_no_asan, FIX, ROOT, TORCH_SCRIPT, UNDER_ASAN, alone, flaky, torch_py, attached_run, check, eq, main,  # noqa: E402
                     test, traced)

SCRIPT = os.path.join(ROOT, "tests", "fixtures", "py_hot.py")
PY = os.path.expanduser("~/.pyenv/versions/3.11.7/bin/python3.11")
if not os.access(PY, os.X_OK):
    PY = "/usr/bin/python3.11"


def line_of(mark):
    return next(n for n, text in enumerate(open(SCRIPT), 1) if f"# at: {mark}" in text)


def run(secs, *tool_args):
    tool, _ = attached_run([PY, SCRIPT, str(secs)], "-f", "json", "--top", "50", *tool_args, "1")
    return tool.reports(), tool


def py_lines(stack):
    return [(f["func"], f["line"]) for f in stack["frames"] if f["kind"] == "python"]


@test
@alone
@flaky("issue 36: the C heap windows' cost settles over seconds; a run may see no sample under 2 %")
def over_budget_switches_to_heap_growth_and_still_flags_the_leak():
    reps, tool = run(12, "--max-overhead", "2")
    check(any("heap-growth mode" in l for l in tool.stderr_lines), f"notice: {tool.stderr_lines}")
    final = reps[-1]
    eq(final["modes"]["libc"], "heap_growth", "libc's mode in the report")
    ov = final["overhead"]
    check(ov["measured"] and ov["hit_ns"] > 0 and ov["budget_pct"] == 2, f"overhead shown: {ov}")
    switched = next(r["seq"] for r in reps if r["modes"]["libc"] == "heap_growth")
    note = next(l for l in tool.stderr_lines if "heap-growth mode" in l)
    cost = float(re.search(r"tracing cost ([0-9.]+)%", note).group(1))
    check(cost > 2, f"the cost that made it switch is over the budget: {note}")
    # After the switch the probes on every malloc are off: the cost falls under the budget.
    after = [r["overhead"]["pct"] for r in reps[switched + 1:-1]]
    print(f"# cost after the switch: {[round(x, 2) for x in after]}", flush=True)
    check(after and min(after) < 2, f"cost after the switch: {after}")
    # Since attach: a weighted mean of every sample, the full-cost one that switched among them.
    since = ov["pct_since_attach"]
    check(min(after) < since < cost, f"share since attach {since} between {min(after)} and the switch's {cost}")
    plant = ("plant", line_of("plant"))
    growing = [s for r in reps[-3:] for s in r["stacks"] if s["verdict"] == "growing" and plant in py_lines(s)]
    check(growing, f"the planted leak is a leak candidate at its line: "
                   f"{[(s['verdict'], py_lines(s)[:2]) for s in final['stacks'][:5]]}")
    churn = ("scratch", line_of("churn"))
    eq([s for s in final["stacks"] if s["verdict"] == "growing" and churn in py_lines(s)], [],
       "the churn is no leak candidate")


def funcs(stack):
    return [f.get("func") for f in stack["frames"]]


def sampled_leak_run(pre=()):
    """sampled_leak (a 200-byte block kept after every 200 malloc/free pairs, 2,000 a second, for 12 s), its
    command after pre, attached at the default budget with a report every 2 s. Checked for both allocators: the C
    heap in heap-growth mode, sampled in 5 windows or more; leak_step's kept blocks one growing row; churn's
    short-lived blocks no candidate. Returns (final report, blocks kept, libc_windows, the leak_step row)."""
    tool, _ = attached_run([*pre, os.path.join(FIX, "sampled_leak"), "12", "200", "2000"], "--max-overhead", "2",
                           "-f", "json", "--top", "30", "2")  # the default budget (the harness sets 100 otherwise)
    final = tool.reports()[-1]
    leaked = int(next(l for l in tool.fixture_lines if l.startswith("leaked")).split()[1])
    windows = final["modes"].get("libc_windows") or {}
    check(final["modes"]["libc"] == "heap_growth" and windows.get("windows", 0) >= 5,
          f"heap-growth mode, sampled in windows: {final['modes']}")

    def kept_rows(report):
        return [s for s in report["stacks"] if s["layer"] == "libc" and funcs(s)[:1] == ["leak_step"]]

    blocks = kept_rows(final)
    # each report's leak_step rows (count, verdict, the share of rising intervals) and windows so far: what a
    # failure needs to be read (beside stress-ng --cpu 2 the row read stable at monotonic 0.25 while its count
    # rose at every report)
    series = [(r["seq"], [(s["count"], s["verdict"], round(s.get("evidence", {}).get("monotonic", -1), 2))
                          for s in kept_rows(r)], (r["modes"].get("libc_windows") or {}).get("windows"))
              for r in tool.reports()]
    check(len(blocks) == 1 and blocks[0]["verdict"] == "growing" and blocks[0]["count"] > 0,
          f"the blocks kept at leak_step: one growing row: {[(s['verdict'], s['count']) for s in blocks]}; by report "
          f"(seq, rows, windows): {series}")
    eq([funcs(s)[:3] for s in final["stacks"] if s["verdict"] == "growing" and "churn" in funcs(s)], [],
       "churn's blocks are no candidate")
    eq((blocks[0]["estimated"], blocks[0]["address_space"]), (True, False), "the row is the windows' estimate of blocks")
    return final, leaked, windows, blocks[0]


@test
@alone
@flaky("issue 37: under ASan in CI the leak_step row read stable (22,714 of 24,000 kept): a row whose first "
       "window fell at a report's end starts with a few records, and the rates after it vary over 0.5 CV")
def c_heap_sampled_in_windows_keeps_a_c_leak_at_its_line():
    """A C program whose heap growth is its leak (sampled_leak_run), at default settings: the blocks a window
    records at leak_step are a leak candidate there, weighted by their chunk size's growth to within 25 % of the
    count kept, and glibc's headers were read for them; the break's growth inside leak_step stays a candidate
    too, no victim (its range is in use); the short-lived blocks of churn are no candidate."""
    final, leaked, windows, block = sampled_leak_run()
    check(windows.get("checked", 0) > 0, f"glibc's chunk headers read between windows: {windows}")
    # Each record stands for its size's growth in the heap walks over its live records (no PyTorch tensor
    # releases to count the work by), bytes and count alike: the accuracy goal is +-25 %.
    check(leaked > 10000 and abs(block["bytes"] - 200 * block["count"]) <= 2 * block["count"],
          f"{block['count']} blocks of 200 bytes estimated ({block['bytes']} bytes), {leaked} kept")
    check(0.75 <= block["count"] / leaked <= 1.25,
          f"the estimate within 25 % of the truth: {block['count']} estimated, {leaked} kept")
    growth = [s for s in final["stacks"] if s["layer"] == "libc" and "__sbrk" in funcs(s) and "leak_step" in funcs(s)]
    eq({(s["address_space"], s["estimated"]) for s in growth}, {(True, False)}, "the break's growth: address space")
    check(any(s["verdict"] == "growing" for s in growth) and all(s["verdict"] != "victim" for s in growth),
          f"the break's growth in leak_step is a candidate, no victim: {[(s['verdict'], s.get('victim')) for s in growth]}")


@test
@alone
@flaky("issue 37: the leak_step row read stable (27 KB) in 2 runs of 5 before this stop's changes too")
def c_heap_sampled_in_windows_under_jemalloc_by_the_releases_they_see():
    """The same C leak under a preloaded jemalloc, which has no chunk headers to read: the C heap is still sampled
    in windows, says that their records go only by the releases the windows see (and addresses handed out again),
    reads no header, and still makes leak_step's kept blocks a leak candidate and churn's short-lived ones none.
    With no chunk sizes to count, the process weighs whole, by its anonymous memory's growth over its records'
    bytes: the estimate within 25 % of the blocks kept, as under glibc (CPU time gave 0.05 of them)."""
    jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    check(os.path.exists(jemalloc), f"{jemalloc} (make test installs libjemalloc2)")
    final, leaked, windows, block = sampled_leak_run(["env", "LD_PRELOAD=" + jemalloc])
    eq(final["heap_allocator"], "jemalloc", "the allocator probed")
    eq((windows["releases"], windows["checked"], windows["released"]), ("in_windows", 0, 0),
       "releases seen in the windows, no chunk header read")
    print(f"# jemalloc: {block['count']} blocks estimated, {leaked} kept, weight {windows['weight']}")
    check(leaked > 10000 and 0.75 <= block["count"] / leaked <= 1.25,
          f"the estimate within 25 % of the truth: {block['count']} estimated, {leaked} kept")


@test
@alone
def within_budget_every_probe_stays():
    reps, tool = run(3, "--max-overhead", "100")
    eq({r["modes"]["libc"] for r in reps}, {"full"}, "libc stays fully traced")
    check(not any("heap-growth" in l for l in tool.stderr_lines), "no switch notice")
    check(reps[-1]["overhead"]["measured"], "cost measured all the same")


def hot_loop(secs, work, *tool_args):
    """The malloc/free loop fixture traced with -p, JSON reports: (reports, tool)."""
    tool, _ = attached_run([os.path.join(FIX, "hot_loop"), str(secs), str(work)], "-f", "json", *tool_args)
    return tool.reports(), tool


@test
@alone
@flaky("issue 36: the C heap windows' share read 9.6 % of 31 % once in 3 full runs (4 of 4 pass alone)")
def busy_loop_switches_before_the_first_report():
    """The C heap's mode is decided from the first hits after attach (per-CPU counters over ~150 ms), not after
    a second at full cost: a 0.5 s interval's first report is already in heap-growth mode, and says so.
    The decision waits for the probe-cost calibration, which runs in the tool: built with ASan it was decided
    0.10-0.50 s after attach (plain: 0.05-0.12 s), so under ASan the interval and the loop are 3 times longer
    (the same 5 reports), and the decision must still come before the first of them."""
    scale = 3 if UNDER_ASAN else 1
    interval = 0.5 * scale
    # --max-overhead 2: the default budget (the harness sets 100)
    reps, tool = hot_loop(2.5 * scale, 0, "--max-overhead", "2", str(interval))
    first = reps[0]
    eq(first["seq"], 1, "the first report")
    eq(first["modes"]["libc"], "heap_growth", "libc's mode in the first report")
    eq(first["modes"]["libc_fallback"], ["heap_growth", "rss"], "what the C heap falls back to (the rss layer is on)")
    eq(first["modes"]["libc_since_report"], 1, "the mode began before the first report")
    check(first["modes"]["libc_full_pct"] > 2, f"the cost that made it switch: {first['modes']}")
    check(first["overhead"]["decided_after_s"] > 0, f"when it was decided: {first['overhead']}")
    eq(first["modes"]["shed"], [], "nothing shed: only the C heap's probes cost anything")
    note = [l for l in tool.stderr_lines if "the C heap is now followed" in l]
    eq(len(note), 1, f"one switch notice: {tool.stderr_lines}")
    check("the C heap's probes" in note[0] and "decided" in note[0], f"the notice names the cost: {note[0]}")
    # After the switch the C heap is probed only in its sampling windows: its share falls to a fraction of the
    # full cost (the windows' own adjustment to the budget takes a few seconds more than this run).
    later = [r["overhead"] for r in reps[2:] if r["overhead"]["measured"]]
    full = first["modes"]["libc_full_pct"]
    check(later and all(o["layer_pct"].get("libc", 0) < full / 4 for o in later),
          f"libc's part after the switch, against {full}% in full: {[o['layer_pct'] for o in later]}")
    check(reps[-1]["modes"].get("libc_windows", {}).get("windows", 0) >= 1, f"windows: {reps[-1]['modes']}")


# A neighbour that faults pages as fast as it can: mapped, written a byte a page, unmapped (a munmap each 4 MiB).
NEIGHBOUR = """
import mmap, sys, time
end, pages = time.time() + float(sys.argv[1]), 0
while time.time() < end:
    m = mmap.mmap(-1, 1 << 22)
    for i in range(0, 1 << 22, 4096):
        m[i] = 1
    m.close()
    pages += 1024
print(pages, flush=True)
"""


@test
@alone
def a_neighbours_faults_are_not_the_jobs_cost():
    """The kernel tracepoints' programs (faults, page allocations, system call exits) run for every process on the
    machine, memleak-ai's own included. The budget counts only their time on the traced processes' events: a
    busy loop that faults nothing, traced with the rss layer alone at the default budget, beside an untraced
    process faulting pages as fast as it can, costs under 0.1 % in every sample and sheds nothing. Counted by
    the programs' run time, the neighbour's 100,000s of faults a second read 3-6 % and shed the rss layer's
    sampling."""
    nb = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, "5"], stdout=subprocess.PIPE)
    try:
        reps, tool = hot_loop(4, 20000, "--layers", "rss", "--max-overhead", "2", "0.5")
    finally:
        pages = int(nb.communicate(timeout=30)[0] or 0)
    measured = [(r["seq"], round(r["overhead"]["other_pct"], 3)) for r in reps if r["overhead"]["measured"]]
    print(f"# the neighbour faulted {pages} pages; each sample's other programs' share: {measured}", flush=True)
    check(pages > 100000, f"the neighbour faulted pages: {pages}")
    check(len(measured) >= 3 and all(p < 0.1 for _, p in measured), f"the other programs' share: {measured}")
    eq(reps[-1]["modes"]["shed"], [], "nothing shed")


@test
@alone
def the_share_never_exceeds_all_of_the_time():
    """A loop that is almost all traps: the share is of T(with), which includes the traps, so at most 100 %."""
    reps, _ = hot_loop(3, 0, "--max-overhead", "100", "0.5")
    measured = [r["overhead"] for r in reps if r["overhead"]["measured"]]
    check(len(measured) >= 3, f"measured reports: {len(measured)}")
    for o in measured:
        check(0 < o["pct"] <= 100 and 0 < o["pct_since_attach"] <= 100, f"shares within (0, 100]: {o}")
        check(abs(sum(o["layer_pct"].values()) + o["other_pct"] - o["pct"]) < 1e-6, f"the parts add up: {o}")
        check(o["layer_pct"].get("libc", 0) > 0 and o["hits_per_s"] > 0, f"the C heap's traps counted: {o}")
    eq({r["modes"]["libc"] for r in reps}, {"full"}, "a budget of 100 keeps every probe")


@test
def every_trap_is_counted():
    """Each entry trap (free(NULL) and frees of blocks from before attach included) and each return trap."""
    rep, _ = traced("basic")
    hits = rep["stats"]["hits"]["libc"]
    # leak_malloc: 100 mallocs, churn: 20000 pairs, leak_calloc: 5, free_nulls: 7, the 10 blocks from before attach
    eq(hits, {"entry": 100 + 2 * 20000 + 5 + 7 + 10, "return": 100 + 20000 + 5}, "libc's traps")
    eq(rep["stats"]["hits"]["loader"], 0, "no dlopen, no loader trap")


@test_no_asan  # a PyTorch 2.15 import under the ASan build: its timing, not its memory, decided the steps
@alone
def over_budget_in_heap_growth_mode_samples_tensors_then_sheds():
    """PyTorch's CPU tensor probes still cost more than a tiny budget once the C heap switched. First their
    allocation side is sampled in time (on for half the time, then a quarter, ... down to 1/16), named with
    its cost; the release probe stays, so the loop's frees are all still seen while fewer allocations are
    recorded (as many halvings at once as the cost says). Only after the last halving do the probes go, when
    they alone still cost 5 times the budget."""
    def settled(reps):  # the probes shed, two measured reports past their cut + 4, one over with nothing left
        steps = reps[-1]["modes"]["shed"]
        cut = next((s["since_report"] for s in steps if s["step"] == "torch_cpu probes"), None)
        last = max((s["since_report"] for s in steps), default=0)
        return cut is not None and sum(r["seq"] > cut + 4 and r["overhead"]["measured"] for r in reps) >= 2 and \
            any(r["modes"]["over_budget_unshed"] and r["seq"] >= last for r in reps)

    def until_settled(fx, tool):
        """The loop runs until the reports show what the checks below read, then SIGUSR1 ends it: its 900 steps
        once ended before a report said nothing was left to shed, beside the suite's ASan passes."""
        end = time.time() + 100
        while time.time() < end and fx.poll() is None:
            reps = tool.reports_so_far()
            if reps and settled(reps):
                break
            time.sleep(0.2)
        fx.send_signal(signal.SIGUSR1)
    tool, _ = attached_run([torch_py(), TORCH_SCRIPT, "item", "cpu", "20000"], "-f", "json", "--max-overhead",
                           "0.1", "0.5", after_go=until_settled)
    reps = tool.reports()
    switched = [r["seq"] for r in reps if r["modes"]["libc"] == "heap_growth"]
    check(switched, "the C heap switched")
    shed = [s for s in reps[-1]["modes"]["shed"] if s["step"] != "rss sampling"]
    check(shed and shed[0]["step"] == "torch_cpu sampling", f"torch_cpu sampled first: {reps[-1]['modes']['shed']}")
    check(shed[0]["since_report"] >= switched[0], f"after the C heap's switch: {shed}, switch {switched[0]}")
    check(shed[0]["pct"] > 0, f"its cost: {shed}")
    eq(shed[0]["one_in"], 16, "halved down to 1/16 of the time")
    note = [l for l in tool.stderr_lines if "shedding" in l and "torch_cpu sampling" in l]
    check(note and all("torch_cpu " in n for n in note), f"each step named with what costs: {note}")
    ones = [next((s["one_in"] for s in r["modes"]["shed"] if s["step"] == "torch_cpu sampling"), 1) for r in reps]
    eq(ones, sorted(ones), "the sampling interval only grows")
    tc = lambda r: r["stats"]["layers"].get("torch_cpu", {"allocs_per_s": 0, "frees_per_s": 0})  # noqa: E731
    probes = [s for s in shed if s["step"] == "torch_cpu probes"]
    check(probes and probes[0]["since_report"] > shed[0]["since_report"],
          f"the probes shed after the sampling: {shed}")
    cut = probes[0]["since_report"]
    # Sampled, and the probes still on: every release is seen (the loop frees as many tensors as it makes),
    # and about one allocation in 16 recorded. Counted from the end of the report in which sampling reached
    # 1/16 to the one in which the probes went (where both counts stop): over a second or more, since the
    # probes' cost at 1/16 is judged on a sample of a second at least. The probes record only inside their
    # phase, however late its close comes (on a loaded CI machine, 487 allocations a second against 1,101
    # were recorded when a busy loop closed the phases late), so the share stays at most 2 phases of 1/16 s.
    by_seq = {r["seq"]: r for r in reps}
    late = [r["seq"] for r, n, was in zip(reps, ones, [1] + ones) if n == was == 16 and
            shed[0]["since_report"] < r["seq"] <= cut]
    check(late and late[0] - 1 in by_seq, f"reports sampled at 1/16 before the probes went: {late}")
    # The report in which the probes went may hold none: the budget's second and the reports' half second keep
    # step, and when a decision follows the report it cuts the probes at the start of the next interval.
    frees = {s: tc(by_seq[s])["frees_per_s"] for s in late}
    check(all(n > 0 for s, n in frees.items() if s < cut), f"releases still traced while sampled: {frees}, cut {cut}")
    a1, f1 = (tc(by_seq[late[-1]])[k] - tc(by_seq[late[0] - 1])[k] for k in ("allocs", "frees"))
    check(f1 > 0 and a1 < f1 / 4, f"far fewer allocations recorded than released: {a1} against {f1}")
    # the next sample, a second's hits later, and every one after it
    after = [r for r in reps if r["seq"] > cut + 4 and r["overhead"]["measured"]]
    check(after and all("torch_cpu" not in r["overhead"]["layer_pct"] for r in after),
          f"torch_cpu's probes cost nothing after: {[r['overhead']['layer_pct'] for r in after]}")
    # Then only the C heap's windows are left (0.4 to 0.6 %, over the 0.1 % budget): the reports say nothing is
    # left to shed, each of them over the budget and from the report that shows the last step shed on. That one
    # may say it too: its since_report is the report after the step, and the sample of the hits after the step
    # can come before that report as well (proof Q: the last step and such a sample both before report 5).
    # The step clock's halvings are the exception: each is taken while the clock costs an eighth of the budget,
    # judged on one sample's few sampled steps, so one sample below that line says nothing is left and the
    # next may halve again (proof F of stop 56: unshed from report 10, a halving after it). The run still ends
    # with nothing left: the last unshed report is at most one report before the last step of any kind.
    unshed = [r for r in reps if r["modes"]["over_budget_unshed"]]
    final = reps[-1]["modes"]["shed"]
    last_step = max(s["since_report"] for s in final if s["step"] != "step clock sampling")
    print(f"# shed: {[(s['step'], s['since_report'], s.get('one_in')) for s in final]}; unshed "
          f"{[(r['seq'], round(r['overhead']['pct'], 2)) for r in unshed]}", flush=True)
    check(unshed and all(r["overhead"]["pct"] > 0.1 and r["seq"] >= last_step for r in unshed),
          f"over the budget with nothing left to shed: {[(r['seq'], r['overhead']['pct']) for r in unshed]}, "
          f"the last step shed before report {last_step}")
    check(unshed[-1]["seq"] >= max(s["since_report"] for s in final) - 1,
          f"the run ends with nothing left to shed: the last unshed report {unshed[-1]['seq']}, steps {final}")


@test_no_asan  # as above: the steps are decided by a PyTorch loop's timing
@alone
def without_the_c_heap_the_budget_sheds_from_the_first_decision():
    """With --layers torch_cpu there is no C heap to switch: the shed order starts at the first decision (it never
    did, and the torch layers alone cost 17 % to 32 % against a 2 % budget). Tensors are sampled, then their probes
    go; the step clock, its trap a step the cost left, is then sampled in time (1/2 and on), and its counts stand
    for every step: the script's 5,000 within 15 % (the steps after the last window are not seen). Steps pause
    1 ms, not 5: at 5 ms the clock alone cost 0.09-0.10 % on kernel 6.18.44, the budget itself, and was shed
    in one run of three."""
    tool, pid = attached_run([torch_py(), TORCH_SCRIPT, "item", "cpu", "5000", "1"], "-f", "json", "--layers",
                             "torch_cpu", "--max-overhead", "0.1", "1")
    reps = tool.reports()
    eq({r["modes"]["libc"] for r in reps}, {"full"}, "no heap-growth mode: no C heap traced")
    shed = reps[-1]["modes"]["shed"]
    check(shed and shed[0]["step"] == "torch_cpu sampling" and shed[0]["since_report"] <= 4,
          f"torch_cpu sampled from the first decision: {shed}")
    note = [l for l in tool.stderr_lines if "shedding torch_cpu sampling" in l]
    check(note and not any("heap-growth" in n for n in note), f"named without heap-growth mode: {note}")
    clock = [s for s in shed if s["step"] == "step clock sampling"]
    print(f"# shed: {[(s['step'], s['since_report'], round(s['pct'], 2)) for s in shed]}; each report's overhead: "
          f"{[(r['seq'], round(r['overhead']['pct'], 2)) for r in reps]}", flush=True)
    check(clock and clock[0]["one_in"] >= 2, f"the step clock sampled once the tensor probes went: {shed}")
    count = next(p["steps"]["count"] for p in reps[-1]["processes"] if p["pid"] == pid)
    check(abs(count - 5000) <= 750, f"the steps estimated from those seen: {count} for the script's 5,000")


def _cpu_s(pid):
    """User plus system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lines_written(path):
    """Complete lines in a file another process is still writing: its newlines. Iterating it as text counted the
    line being written once per piece that had arrived, and ended the sampling two reports early."""
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


@test_no_asan  # ASan's own work would be most of what is counted
@alone
def own_cpu_is_the_reports_work_too():
    """The overhead line's "memleak-ai itself" is the tool's CPU from snapshot to snapshot, its reports' work (heap
    walks, the table's scan) included: summed over four intervals it is what /proc counts between those snapshots'
    times. It was taken over the budget's 1-s samples between reports and read 0.8 % of a CPU against /proc's 2.85 %;
    then from the start of one report's work to the next, which the test could not see, and CI's run once read
    0.658 s where /proc counted 1.210 s between the reports' writes."""
    out = os.path.join(tempfile.mkdtemp(prefix="owncpu-"), "r.json")
    cpu = []  # (time, the tool's CPU seconds), every 20 ms, until seven reports are written

    def follow(fx, tool):
        end = time.time() + 60
        while time.time() < end:
            done = _lines_written(out) >= 7
            cpu.append((time.time(), _cpu_s(tool.p.pid)))  # after the look: the seventh snapshot is covered
            if done:
                fx.send_signal(signal.SIGUSR1)  # the loop's remaining steps would only be waited for
                return
            time.sleep(0.02)
    attached_run([torch_py(), TORCH_SCRIPT, "keep", "cpu", "1200"], "-f", "json", "-o", out, "1", after_go=follow)
    reps = [json.loads(l) for l in open(out) if l.strip()]
    check(len(reps) >= 7, f"seven reports written: {len(reps)}")

    def cpu_at(t):  # /proc's count at a snapshot's time: the last sample before it
        before = [c for when, c in cpu if when <= t]
        check(before and cpu[-1][0] >= t, f"the samples ({len(cpu)}, {cpu[0][0]:.3f} to {cpu[-1][0]:.3f}) cover the "
              f"snapshot at {t:.3f}; the reports' times: {[round(r['time_unix'], 3) for r in reps]}")
        return before[-1]
    said = sum(r["overhead"]["tool_cpu_pct"] / 100 * (r["time_unix"] - p["time_unix"])
               for p, r in zip(reps[2:6], reps[3:7]))
    proc = cpu_at(reps[6]["time_unix"]) - cpu_at(reps[2]["time_unix"])
    print(f"# the tool's CPU over reports 4 to 7: {said:.3f} s said, {proc:.3f} s by /proc", flush=True)
    check(abs(said - proc) <= 0.35 * proc + 0.03, f"reports 4 to 7: {said:.3f} s of the tool's CPU said, /proc "
          f"counted {proc:.3f} s")


@test
def max_overhead_option_is_checked():
    for bad in ("0", "abc", "101", "-1", "5x"):
        r = subprocess.run([os.path.join(ROOT, "memleak-ai"), "--max-overhead", bad, "-p", "1"],
                           capture_output=True, text=True)
        eq(r.returncode, 2, f"--max-overhead {bad}: exit status")
        check(f"invalid --max-overhead '{bad}'" in r.stderr and len(r.stderr.splitlines()) == 1,
              f"one-line error: {r.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())
