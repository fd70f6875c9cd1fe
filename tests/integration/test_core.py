"""Integration tests of the core: real BPF programs attached to real fixture processes."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (test_no_asan, FIX, ROOT, TOOL, Fail, Fixture, Tool, alone, bpf_progs, by_func, check, eq,  # noqa: E402
                     html_check, main, no_bpf_left, read_line, run_tool, test, traced)

SRC = os.path.join(ROOT, "tests", "fixtures", "leaky.c")


def src_line(text, after=None):
    """Line number of the first source line containing text (after the line containing `after`)."""
    lines = open(SRC).read().splitlines()
    start = 0
    if after:
        start = next(i for i, l in enumerate(lines) if after in l)
    for i in range(start, len(lines)):
        if text in lines[i]:
            return i + 1
    raise Fail(f"{text!r} not in fixture source")


@test
def basic_leaks_exact_bytes_and_functions():
    rep, _ = traced("basic")
    f = by_func(rep)
    eq(f.get("leak_malloc"), (100000, 100), "leak_malloc bytes, count")
    eq(f.get("leak_calloc"), (15000, 5), "leak_calloc bytes, count (calloc n*size)")
    check("churn" not in f, f"churn freed everything, yet reported: {f.get('churn')}")
    eq(rep["totals"]["libc"], {"bytes": 115000, "count": 105, "growth_bytes": rep["totals"]["libc"]["growth_bytes"]},
       "libc totals")
    ev = rep["stats"]["events"]
    check(ev["free_null"] >= 7, f"free(NULL) counted: {ev['free_null']}")
    check(ev["frees_unknown"] >= 10, f"frees of pre-attach blocks ignored and counted: {ev['frees_unknown']}")
    check(ev["allocs"] >= 20105, f"allocs counted: {ev['allocs']}")
    check(ev["frees_matched"] >= 20000, f"churn frees matched: {ev['frees_matched']}")
    eq(sum(rep["stats"]["dropped"].values()), 0, "nothing dropped")


HEAPS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
         "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"}


def leak_rows(rep):
    """(function, bytes, count, the chain's functions) of the fixture's own leaking stacks."""
    return sorted((s["frames"][0]["func"], s["bytes"], s["count"], tuple(f["func"] for f in s["frames"]))
                  for s in rep["stacks"] if s["layer"] == "libc" and s["frames"] and
                  (s["frames"][0]["func"] or "").startswith(("leak_", "realloc_", "memalign_")))


@test_no_asan
def preloaded_jemalloc_and_tcmalloc_give_the_same_leaks():
    """A job that preloads another heap allocator (the usual cure for glibc's fragmentation): its own malloc
    family (and C++ operators) are probed, the report names it, and the leaks read exactly as with glibc."""
    for scenario in ("basic", "memalign"):
        base, _ = traced(scenario)
        eq(base["heap_allocator"], "glibc", f"{scenario}: glibc named")
        want = leak_rows(base)
        check(want, f"{scenario}: leaks found with glibc")
        for name, lib in HEAPS.items():
            check(os.path.exists(lib), f"{lib} installed (install-deps.sh)")
            rep, tool = traced(scenario, "-v", fixture_env={"LD_PRELOAD": lib})
            eq(rep["heap_allocator"], name, f"{scenario}: the allocator in use named")
            eq(leak_rows(rep), want, f"{scenario} under {name}: same sizes, counts and chains as glibc")
            check(any(f"C heap is {name}" in l for l in tool.stderr_lines), f"{name}: told with -v")


@test_no_asan
def single_probes_without_uprobe_multi():
    """Kernels before 6.6 have no uprobe_multi links: the one-probe-per-function path gives the same result."""
    for scenario, func, want in (("basic", "leak_malloc", (100000, 100)), ("realloc", "realloc_grow", (5000, 1)),
                                 ("memalign", "memalign_sites", (3 * 1024 + 2 * 256 + 4 * 96 + 4096 + 100, 11))):
        rep, tool = traced(scenario, "-v", env={"MEMLEAK_AI_NO_UPROBE_MULTI": "1"})
        check(any("uprobe_multi links not supported" in l for l in tool.stderr_lines), "single-probe path taken")
        eq(by_func(rep).get(func), want, f"{scenario}: {func}")


@test
def frames_have_file_line_module_and_caller():
    rep, _ = traced("basic")
    s = next(s for s in rep["stacks"] if s["frames"] and s["frames"][0]["func"] == "leak_malloc")
    fr = s["frames"][0]
    eq(fr["kind"], "native", "frame kind")
    eq(os.path.basename(fr["module"]), "leaky", "module")
    eq(os.path.basename(fr["file"] or ""), "leaky.c", "file")
    eq(fr["line"], src_line("kept(malloc(size));", after="void leak_malloc"), "line of the malloc call")
    check(fr["offset"] > 0, "offset from function start")
    check(s["oldest_age_s"] >= 0, "age")
    eq(s["growth_bytes"], s["bytes"], "growth of a stack first seen in this report")


@test
def realloc_semantics():
    rep, _ = traced("realloc")
    f = by_func(rep)
    eq(f.get("realloc_grow"), (5000, 1), "realloc(NULL,100) then grown to 5000: one block")
    eq(f.get("realloc_shrink"), (10, 1), "shrunk block attributed to the realloc")
    eq(f.get("realloc_src"), (55, 1), "only the block whose realloc failed stays at its malloc")
    eq(f.get("reallocarray_site"), (128, 1), "reallocarray(NULL, 8, 16)")
    eq(rep["stats"]["events"]["failed_allocs"], 1, "failed realloc not recorded, counted")


@test
def memalign_family():
    rep, _ = traced("memalign")
    f = by_func(rep)
    eq(f.get("memalign_sites"), (3 * 1024 + 2 * 256 + 4 * 96 + 4096 + 100, 11),
       "posix_memalign, aligned_alloc, memalign, valloc, pvalloc")
    eq(rep["stats"]["events"]["failed_allocs"], 2, "EINVAL posix_memalign and NULL malloc not recorded")


@test
def threads_free_each_others_blocks():
    rep, _ = traced("threads")
    f = by_func(rep)
    eq(f.get("thread_alloc"), (100 * 2048, 100), "half of 4x50 blocks freed by the main thread")
    check("churn" not in f, "per-thread churn all freed")
    eq(rep["stats"]["dropped"]["lost_return"], 0, "no lost returns")


@test
def cross_thread_churn_leaves_only_the_kept_blocks():
    rep, _ = traced("stress")
    f = by_func(rep)
    eq(f.get("stress_keep"), (4 * 25 * 777, 100), "the kept blocks, exactly")
    for fn in ("stress_make", "stress_grow", "stress_main"):
        check(fn not in f, f"{fn}: everything made, moved and freed across threads was matched: {f.get(fn)}")
    eq(rep["stats"]["dropped"]["lost_return"], 0, "no lost returns")
    check(rep["stats"]["events"]["frees_matched"] >= 80000, f"frees matched: {rep['stats']['events']}")


@test
def deleted_executable_still_probed_and_symbolized():
    """Files are opened through /proc/PID/map_files: a binary deleted (or replaced) on disk still works."""
    import shutil
    d = tempfile.mkdtemp()
    exe = os.path.join(d, "leaky-deleted")
    shutil.copy(os.path.join(FIX, "leaky"), exe)
    fx = Fixture(exe, "basic")
    os.unlink(exe)
    open(exe, "w").write("not an ELF any more\n")  # and something else under the same name
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "50", "60")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "exit status")
        rep = tool.reports()[-1]
        s = next((s for s in rep["stacks"] if s["frames"] and s["frames"][0]["func"] == "leak_malloc"), None)
        check(s is not None, f"leak_malloc symbolized from the deleted file: {[x['frames'][:1] for x in rep['stacks']]}")
        eq((s["bytes"], s["count"]), (100000, 100), "bytes and count")
        eq(os.path.basename(s["frames"][0]["file"] or ""), "leaky.c", "file:line from the deleted file's DWARF")
    finally:
        tool.kill()
        fx.kill()


@test
def target_in_its_own_pid_and_mount_namespace():
    """A containerised target: its executable lives on a tmpfs only its own mount namespace sees."""
    d = tempfile.mkdtemp()
    script = (f"mount -t tmpfs none {d} && cp {FIX}/leaky {d}/app && exec {d}/app basic")
    p = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "--mount-proc", "sh", "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    tool = None
    try:
        line = read_line(p.stdout, 10, "ready")
        check(line.startswith("ready"), line)
        eq(line.split()[1], "1", "pid 1 in its own namespace")
        kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        eq(len(kids), 1, "one child of unshare")
        host_pid = kids[0]
        check(not os.path.exists(f"{d}/app"), "the executable is not visible from the host")
        tool = Tool("-p", host_pid, "-f", "json", "--top", "50", "60")
        tool.wait_attached()
        p.stdin.write(b"g")
        p.stdin.flush()
        eq(read_line(p.stdout, 30, "done"), "done", "scenario ran")
        p.stdin.close()
        eq(tool.finish(), 0, "exit status")
        rep = tool.reports()[-1]
        eq(rep["pid"], int(host_pid), "the host's pid in the report")
        f = by_func(rep)
        eq(f.get("leak_malloc"), (100000, 100), "probed and symbolized through /proc/PID/map_files and root")
    finally:
        if tool:
            tool.kill()
        p.kill()
        p.wait()


@test
def size_filters():
    rep, _ = traced("basic", "--min-size", "1000", "--max-size", "2000")
    f = by_func(rep)
    eq(f.get("leak_malloc"), (100000, 100), "1000-byte blocks kept")
    check("leak_calloc" not in f, "3000-byte calloc blocks filtered out by --max-size")
    rep, _ = traced("small", "--min-size", "1000")
    f = by_func(rep)
    check("leak_malloc" not in f, f"500-byte blocks filtered out by --min-size: {f}")
    eq(f.get("leak_calloc"), (6000, 4), "1500-byte blocks kept")


@test
def min_age_hides_young_allocations():
    rep, _ = traced("basic", "--min-age", "30")
    eq(rep["stacks"], [], "nothing is 30 s old")
    eq(rep["totals"]["libc"]["count"], 0, "and nothing counted")
    check(rep["stats"]["events"]["allocs"] >= 20105, "yet every allocation was seen")


@test
def full_table_drops_are_counted():
    rep, _ = traced("many", "--max-allocs", "16")
    f = by_func(rep)
    dropped = rep["stats"]["dropped"]["allocs_table_full"]
    check(dropped > 0, "a 1024-slot table cannot hold 3000 blocks")
    eq(f.get("leak_malloc", (0, 0))[1] + dropped, 3000, "recorded + dropped = allocated")
    eq(f.get("leak_malloc", (0, 0))[0], 16 * f.get("leak_malloc", (0, 0))[1], "recorded bytes")


@test
def table_grows_by_levels():
    """200,000 blocks kept in under a second, at full fidelity: past a quarter of the first level's 262,144 slots,
    so a second level of 1,048,576 is made (and no third: 135,000 is 13 % of it); every block recorded in the
    levels, the first 4,096 found in the first level when freed after it, and the memory they take said."""
    rep, tool = traced("grows", "--max-overhead", "100", "-v")
    f = by_func(rep)
    eq(rep["stats"]["dropped"]["allocs_table_full"], 0, "no block dropped")
    eq(f.get("leak_malloc"), ((200000 - 4096) * 16, 200000 - 4096), "every block recorded, the freed ones gone")
    check(rep["stats"]["events"]["frees_matched"] >= 4096, f"frees matched: {rep['stats']['events']}")
    check(any("allocation table: a level of 1048576 slots added, 1310720 slots in all (60 MiB)" in l
              for l in tool.stderr_lines), f"the level said: {[l for l in tool.stderr_lines if 'table' in l]}")
    t = rep["stats"]["table"]
    eq((t["levels"], t["slots"], t["bytes"]), (2, 262144 + 1048576, (262144 + 1048576) * 48),
       "a second level of 1,048,576 slots, 60 MiB in all")


@test
def top_limits_stacks():
    rep, _ = traced("basic", "-T", "1", "--layers", "libc")  # the rss layer's pages would be the largest
    eq(len(rep["stacks"]), 1, "one stack")
    eq(rep["stacks"][0]["frames"][0]["func"], "leak_malloc", "largest first")
    check(rep["stats"]["stacks_total"] >= 2, "total stacks still counted")


@test
def interval_count_and_growth():
    fx = Fixture("leaky", "grow")
    tool = Tool("-p", str(fx.pid), "-f", "json", "0.5", "4")
    try:
        tool.wait_attached()
        fx.go()
        eq(tool.finish(), 0, "exit status after COUNT reports")
        reps = tool.reports()
        eq([r["seq"] for r in reps], [1, 2, 3, 4], "sequence numbers")
        eq([r["final"] for r in reps], [False, False, False, True], "last is final")
        for r in reps[1:]:
            g = [s for s in r["stacks"] if s["frames"] and s["frames"][0]["func"] == "grow_step"]
            eq(len(g), 1, "one grow_step stack")
            check(g[0]["growth_bytes"] > 0 and g[0]["growth_bytes"] % 4096 == 0,
                  f"grows by whole 4 KiB blocks: {g[0]['growth_bytes']}")
        check(reps[-1]["time_unix"] > reps[0]["time_unix"], "time advances")
    finally:
        tool.kill()
        fx.kill()


@test
def step_clock_counts_every_step_and_reads_growth_per_step():
    """--step names the job's step function (here a C one): every one of its 300 calls counted, once each, and
    the leak it makes read per step; the layer's total too. --step none: no step clock."""
    rep, _ = traced("steps", "--step", "train_step", "0.5")
    eq(rep["steps"] and (rep["steps"]["clock"], rep["steps"]["processes"], rep["steps"]["most"]),
       ("train_step", 1, 300), "the step clock: its function, one process, 300 steps")
    proc = rep["processes"][0]
    eq((proc["steps"]["count"], rep["stats"]["hits"]["step"]), (300, 300), "the process's steps, one trap each")
    row = next(s for s in rep["stacks"] if s["frames"] and s["frames"][0]["func"] == "train_step")
    eq((row["bytes"], row["count"]), (300000, 300), "train_step's blocks")
    ps = row.get("per_step") or {}
    check(abs(ps.get("bytes", 0) - 1000) <= 20 and abs(ps.get("count", 0) - 1) <= 0.02 and ps.get("steps", 0) >= 100,
          f"1000 bytes and one block a step: {ps}")
    lt = rep["totals"]["libc"].get("per_step") or {}
    check(abs(lt.get("bytes", 0) - 1000) <= 20 and lt.get("steps", 0) >= 100, f"libc's total, per step: {lt}")
    check(abs(proc["totals"]["libc"]["per_step"]["bytes"] - lt["bytes"]) < 1e-6, "the process's own, the same")
    rep, _ = traced("steps", "--step", "none", "0.5")
    eq((rep["steps"], rep["processes"][0]["steps"], rep["stats"]["hits"]["step"]), (None, None, 0),
       "--step none: no step clock, no trap")
    check(all("per_step" not in s for s in rep["stacks"]), "and no per-step rates")


@test
def verdicts_on_the_demo_trainer():
    """record_loss leaks a block per step; cache_put fills 64 slots then only replaces; train_step frees all."""
    def run(*args):
        demo = subprocess.Popen([f"{FIX}/demo_trainer"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            rc, out, err = run_tool("-f", "json", "-p", str(demo.pid), *args, timeout=60)
            eq(rc, 0, f"exit status ({err})")
            return [json.loads(l) for l in out.splitlines()]
        finally:
            demo.kill()
            demo.wait()

    reps = run("0.4", "10")
    last = reps[-1]
    by = {s["frames"][0]["func"]: s for s in last["stacks"] if s["frames"] and s["layer"] == "libc"}
    eq(by["record_loss"]["verdict"], "growing", "the leak is flagged")
    check(by["record_loss"]["leak_score"] > 0.8, f"with a high score: {by['record_loss']['leak_score']}")
    rate = by["record_loss"]["growth_bytes_per_s"]
    check(50 * 1032 < rate < 150 * 1032, f"about 100 records of 1032 bytes a second: {rate}")
    eq(by["cache_put"]["verdict"], "stable", "the bounded cache is not a leak")
    eq(last["stacks"][0]["frames"][0]["func"], "record_loss", "leak candidates first, though the cache is larger")
    eq(by["record_loss"]["evidence"]["intervals"] >= 4, True, "evidence: reports judged")
    check(by["record_loss"]["evidence"]["oldest_age_s"] > 2, "evidence: the oldest block survived the run")
    first_flag = next(r["seq"] for r in reps if any(s["verdict"] == "growing" for s in r["stacks"]))
    check(first_flag <= 5, f"flagged within a few intervals: report {first_flag}")
    last = run("--sort", "bytes", "0.4", "4")[-1]
    eq(last["stacks"][0]["frames"][0]["func"], "cache_put", "--sort bytes: largest first")


DEMO_EXPECT = ("== expect: record_loss grows every report and is a LEAK CANDIDATE from the 4th; cache_put holds at "
               "most 64 x 16 KiB and is never a candidate; train_step frees everything: no libc row of its own, "
               "never a candidate ==")


def demo_reports(out):
    """The text reports of scripts/demo.sh: per report, its header and its rows as (layer, bytes, verdict line,
    frame functions)."""
    reps = []
    row = None
    for line in out.splitlines():
        if line.startswith("=== memleak-ai "):
            reps.append({"header": line, "rows": []})
            row = None
        elif reps and line[:1] == "[" and "] " in line:
            layer, rest = line.split("] ", 1)[1].split(": ", 1)
            row = {"layer": layer, "bytes": int(rest.split(" ", 1)[0]), "line": line, "verdict": None, "funcs": []}
            reps[-1]["rows"].append(row)
        elif row is not None and line.startswith("      "):
            row["funcs"].append(line.split()[0].split("+", 1)[0])
        elif row is not None and line.startswith("    ") and row["verdict"] is None:
            row["verdict"] = line.strip()
    return reps


@test_no_asan
@alone
def demo_says_what_its_reports_show():
    """`make demo`'s scripts/demo.sh, five times, at its default settings (the --max-overhead budget included): its
    expectation holds every time. A final report on its tick, a fraction of a millisecond early, once restated the
    third report's sample: three samples, record_loss new under "not growing" (one run in three)."""
    for run in range(1, 6):
        r = subprocess.run([os.path.join(ROOT, "scripts", "demo.sh")], capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        eq(r.returncode, 0, f"run {run}: demo.sh exit status ({out[-500:]!r})")
        check(DEMO_EXPECT in out.splitlines(), f"run {run}: the expectation printed as this test reads it")
        reps = demo_reports(r.stdout)
        eq(len(reps), 4, f"run {run}: reports")
        check(reps[-1]["header"].startswith("=== memleak-ai final report #4 "), f"run {run}: {reps[-1]['header']!r}")
        for i, rep in enumerate(reps, 1):
            libc = {row["funcs"][0]: row for row in rep["rows"] if row["layer"] == "libc" and row["funcs"]}
            said = f"run {run}, report {i}: {[(x['line'], x['verdict'], x['funcs'][:3]) for x in rep['rows']]}"
            grew = "record_loss" in libc and re.search(
                r"oldest [^,]*, \+([0-9.]+) [KM]?i?B, \+[0-9]+ allocations since last", libc["record_loss"]["line"])
            check(grew and float(grew.group(1)) > 0, f"record_loss grows: {said}")
            eq(libc["record_loss"]["verdict"].startswith("LEAK CANDIDATE"), i >= 4,
               f"record_loss a LEAK CANDIDATE from the 4th report on: {said}")
            check("cache_put" in libc and libc["cache_put"]["bytes"] <= 64 * 16384,
                  f"cache_put at most 64 x 16 KiB: {said}")
            check(not libc["cache_put"]["verdict"].startswith("LEAK CANDIDATE"),
                  f"cache_put never a candidate: {said}")
            check("train_step" not in libc, f"train_step: no libc row: {said}")
            check(not any("train_step" in x["funcs"] and x["verdict"].startswith("LEAK CANDIDATE")
                          for x in rep["rows"]), f"train_step never a candidate: {said}")


@test
def sigterm_gives_final_report():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        fx = Fixture("leaky", "idle")
        tool = Tool("-p", str(fx.pid), "-f", "json", "60")
        try:
            tool.wait_attached()
            fx.go()
            fx.wait_done()
            tool.p.send_signal(sig)
            eq(tool.finish(), 0, f"exit status on {sig.name}")
            reps = tool.reports()
            eq(len(reps), 1, "one (final) report")
            eq(reps[0]["final"], True, "final")
            eq(by_func(reps[0]).get("leak_malloc"), (1536, 3), "3 x 512 leaked")
            check(fx.p.poll() is None, "target still running")
        finally:
            tool.kill()
            fx.kill()
    check(no_bpf_left(), "probes detached")


@test
def sigkill_of_the_tool_leaves_no_probe_behind():
    fx = Fixture("leaky", "idle")
    no_bpf_left()  # an earlier test's tool may still be unloading its programs
    before = bpf_progs(held=True)
    tool = Tool("-p", str(fx.pid), "60")
    try:
        tool.wait_attached()
        check(bpf_progs(held=True) > before, "programs loaded while attached")
        tool.p.kill()
        tool.p.wait()
        check(no_bpf_left(), "the kernel removed every probe with the killed tool")
        fx.go()
        fx.wait_done()
        check(fx.p.poll() is None, "target unharmed")
    finally:
        tool.kill()
        fx.kill()


@test
def text_format_and_output_file():
    d = tempfile.mkdtemp()
    out = os.path.join(d, "r.txt")
    fx = Fixture("leaky", "basic")
    tool = Tool("-p", str(fx.pid), "-o", out, "60")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "exit status")
        eq(tool.out, "", "nothing on stdout with -o")
        eq(stat.S_IMODE(os.stat(out).st_mode), 0o600, "output file mode")
        text = open(out).read()
        check("final report #1" in text, "final header")
        check("libc   outstanding 115000 bytes" in text, f"totals line in:\n{text[:600]}")
        check("100000 bytes (97.7 KiB) in 100 allocations" in text, "leak_malloc row")
        check("leak_malloc+0x" in text and "leaky.c:" in text, "symbolized frame")
        check("dropped: none" in text, "drops line")
    finally:
        tool.kill()
        fx.kill()


@test
def folded_output_for_flame_graphs():
    fx = Fixture("leaky", "basic")
    tool = Tool("-p", str(fx.pid), "-f", "folded", "--layers", "libc", "60")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "exit status")
        lines = tool.out.splitlines()
        weights = {}
        for l in lines:
            stack, w = l.rsplit(" ", 1)
            frames = stack.split(";")
            eq(frames[0], "libc", "layer as the root frame")
            weights[frames[-1]] = weights.get(frames[-1], 0) + int(w)
        eq(weights.get("leak_malloc"), 100000, "leaf frame and weight in bytes")
        eq(weights.get("leak_calloc"), 15000, "calloc leaf")
        eq(sum(weights.values()), 115000, "every stack, weights summing to the outstanding bytes")
    finally:
        tool.kill()
        fx.kill()


@test
def pprof_output_decodes_with_protoc():
    import gzip
    import re
    d = tempfile.mkdtemp()
    out = os.path.join(d, "leaks.pb.gz")
    rc, _, err = run_tool("-f", "pprof", "-o", out, "--layers", "libc", "-c", f"{FIX}/leaky basic auto", "60")
    eq(rc, 0, f"exit status ({err})")
    raw = gzip.open(out).read()
    r = subprocess.run(["protoc", f"--proto_path={ROOT}/proto", "--decode=perftools.profiles.Profile",
                        f"{ROOT}/proto/profile.proto"], input=raw, capture_output=True)
    eq(r.returncode, 0, f"protoc decodes it: {r.stderr[:200]}")
    text = r.stdout.decode()
    strings = re.findall(r'string_table: "(.*)"', text)
    for want in ("inuse_space", "bytes", "inuse_objects", "count", "growth_space", "peak_space", "layer", "libc",
                 "leak_malloc", "leak_calloc"):
        check(want in strings, f"{want} in the string table")
    samples = re.findall(r"sample \{(.*?)\n\}", text, re.S)
    values = sorted(tuple(int(v) for v in re.findall(r"value: (-?\d+)", s_)) for s_ in samples)
    eq(values, [(15000, 5, 15000, 15000), (100000, 100, 100000, 100000)], "samples: bytes, objects, growth, peak")
    fn = re.findall(r"function \{(.*?)\n\}", text, re.S)
    names = {strings[int(re.search(r"name: (\d+)", f).group(1))] for f in fn}
    check({"leak_malloc", "leak_calloc"} <= names, f"functions: {names}")
    one_line_error(["-p", "1", "-f", "pprof"], "give it with -o FILE", 2)


@test_no_asan
def html_report_renders_in_headless_chromium():
    d = tempfile.mkdtemp()
    page, shot = os.path.join(d, "report.html"), os.path.join(d, "report.png")
    demo = subprocess.Popen([f"{FIX}/demo_trainer"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        rc, _, err = run_tool("-f", "json", "--html", page, "-p", str(demo.pid), "0.3", "8", timeout=60)
        eq(rc, 0, f"exit status ({err})")
    finally:
        demo.kill()
        demo.wait()
    eq(stat.S_IMODE(os.stat(page).st_mode), 0o600, "page mode")
    html = open(page).read()
    check("<script src" not in html and "<link" not in html, "self-contained: nothing loaded from elsewhere")
    res, err = html_check(page, shot, search="record_loss")
    check("fatal" not in res, f"browser ran: {res.get('fatal')} {err[-500:]}")
    eq(res["errors"], [], "no page errors")
    eq(res["requests"], [], "no network requests (opens offline)")
    check(res["rendered"], "render script finished")
    check(res["title"].startswith(f"memleak-ai report: pid {demo.pid}"), f"page title: {res['title']!r}")
    # Chart.js canvases holding data, drawn: the layers (one line per layer) and the top stacks.
    eq(res["plots"], 2, f"two timeline plots (layers, top stacks): {res['charts']}")
    check(all(c["datasets"] >= 1 and c["points"] >= 2 for c in res["charts"]), f"timelines with data: {res['charts']}")
    check("libc" in res["charts"][0]["legend"], f"layers legend: {res['charts'][0]['legend']}")
    check(any("record_loss" in l for l in res["legend"]), f"top stacks legend: {res['legend']}")
    # The flame graph: one rect per frame of the data, the leak named.
    eq(res["flameRects"], res["flameData"], "flame graph: a rect for every frame of the data")
    eq(res["flameBad"], [], f"flame tree of {res['flameNodes']} nodes: siblings unique, each within its parent")
    check(res["flameRects"] >= 3, f"flame graph drawn: {res['flameRects']} frames")
    check(any("record_loss" in t for t in res["flameText"]), f"flame graph names the leak: {res['flameText'][:8]}")
    z = res["zoom"]
    check(z["frame"], f"a frame to zoom into: {z}")
    eq((z["xAfter"], z["widthAfter"]), (0, z["full"]), f"clicked frame {z['frame']!r} fills the width")
    check(z["widthBefore"] < z["full"], f"it did not before: {z}")
    eq(z["parents"], z["depth"], "its ancestors stay shown")
    check(z["parentsFull"] and z["withinWidth"], f"ancestors at full width, every frame inside: {z}")
    check(z["scaledFrames"] >= 1 and z["scaled"], f"the frames above it scaled with it: {z}")
    check(z["shownAfter"] < z["shownBefore"], f"frames outside it hidden: {z}")
    check(z["resetEnabled"] and z["rootClickRestores"] and z["resetRestores"], f"root click and reset unzoom: {z}")
    q = res["search"]
    check(q["expected"] >= 1, f"the data has record_loss frames: {q}")
    eq(q["highlighted"], q["expected"], "search highlights every record_loss frame, no other")
    eq(q["highlightFill"], ["rgb(230, 0, 230)"], "highlighted frames' colour")
    check(q["matchedText"].startswith(q["expectedText"] + " "), f"matched share shown: {q}")
    check(q["cleared"], "clearing the search clears the highlight")
    eq(res["rows"][0][2], "growing", "leak table: the candidate first")
    check("record_loss" in res["rows"][0][8], f"with its stack: {res['rows'][0]}")
    # The screenshot shows a drawn page, not a blank one: many distinct colours.
    png = open(shot, "rb").read()
    check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30000, f"screenshot taken ({len(png)} bytes)")
    shutil_copy = os.path.join(ROOT, "build", "tests", "html-report.png")
    open(shutil_copy, "wb").write(png)


@test
def command_mode_c_job_one_row_with_its_chain_from_the_first_report():
    """-c on a C job leaking from one function (no frame pointers): every report, the first included, has one
    row for it, with the whole chain to main; none cut short by tables not yet built."""
    # The C heap alone: the rss layer's faults in the loader's first instants would be walks stopped early too.
    rc, out, err = run_tool("-f", "json", "--layers", "libc", "-c", f"{FIX}/history", "0.5", timeout=60)
    eq(rc, 0, f"exit status ({err[-300:]})")
    reps = [json.loads(l) for l in out.splitlines()]
    check(len(reps) >= 3, f"reports: {len(reps)}")
    for r in reps[:-1]:
        rows = [s for s in r["stacks"] if s["layer"] == "libc" and s["frames"] and s["frames"][0]["func"] == "grow_history"]
        eq(len(rows), 1, f"report {r['seq']}: one row for grow_history")
        funcs = [f["func"] for f in rows[0]["frames"]]
        check(funcs[:2] == ["grow_history", "main"], f"report {r['seq']}: the whole chain: {funcs}")
        eq(rows[0]["bytes"], rows[0]["count"] << 20, f"report {r['seq']}: 1 MiB an allocation")
    eq(r["stats"]["unwind"]["stopped"], 0, "no walk stopped early")


@test
def command_mode_traces_from_start():
    rc, out, err = run_tool("-f", "json", "-c", f"{FIX}/leaky basic auto", "60")
    eq(rc, 0, f"exit status (stderr: {err})")
    rep = [json.loads(l) for l in out.splitlines()][-1]
    eq(rep["final"], True, "final on exit")
    f = by_func(rep)
    eq(f.get("leak_malloc"), (100000, 100), "leak_malloc from the first instruction on")
    # the 10 blocks made before the scenario are freed again: traced from the start, so matched, not unknown
    check(rep["stats"]["events"]["frees_matched"] >= 20010, "pre-scenario blocks matched")


@test
def command_quoting_and_missing_program():
    rc, out, err = run_tool("-c", "/nonexistent/prog 'a b'", "60")
    check(rc != 0, "non-zero exit")
    check("cannot run '/nonexistent/prog'" in err, f"stderr: {err}")
    eq(len(err.strip().splitlines()), 1, "one line")
    rc, out, err = run_tool("-c", "leaky 'unbalanced", "60")
    eq(rc, 2, "usage error")


def one_line_error(args, want, rc_want=None, env=None):
    rc, out, err = run_tool(*args, env=env)
    check(rc != 0, f"{args}: non-zero exit")
    if rc_want is not None:
        eq(rc, rc_want, f"{args}: exit status")
    lines = err.strip().splitlines()
    eq(len(lines), 1, f"{args}: one line on stderr: {lines}")
    check(want in lines[0], f"{args}: {want!r} in {lines[0]!r}")
    eq(out, "", f"{args}: nothing on stdout")


@test
def bad_pid():
    one_line_error(["-p", "999999"], "no process with pid 999999", 1)
    one_line_error(["-p", "abc"], "invalid pid 'abc'", 2)
    one_line_error(["-p", "0"], "invalid pid '0'", 2)
    check(no_bpf_left(), "nothing left attached")


@test
def bad_options():
    one_line_error(["-p", "1", "--top", "x"], "invalid --top 'x'", 2)
    one_line_error(["-p", "1", "--bogus"], "unknown option '--bogus'", 2)
    one_line_error(["-p", "1", "-0"], "unknown option '-0'", 2)
    one_line_error(["-p", "1", "soon"], "invalid interval 'soon'", 2)
    one_line_error(["-p", "1", "1", "0"], "invalid count '0'", 2)
    one_line_error(["-p", "1", "1", "2", "3"], "unexpected argument '3'", 2)
    one_line_error(["-p", "1", "--min-size", "9", "--max-size", "1"], "--min-size is larger", 2)
    one_line_error(["-p", "1", "--min-size", "-1"], "invalid --min-size", 2)
    one_line_error(["-p", "1", "-f", "xml"], "invalid --format 'xml'", 2)
    one_line_error([], "nothing to trace", 2)
    one_line_error(["-p", "1", "-c", "true"], "not several", 2)
    one_line_error(["--match", "x", "--all-python"], "not several", 2)
    one_line_error(["-p", "1", "--cgroup", "/x"], "(--cgroup may narrow --match or --all-python)", 2)
    one_line_error(["--match", "x", "--all-python", "--cgroup", "/x"], "not several", 2)
    one_line_error(["--all-python", "--cgroup", "relative/path"], "neither a cgroup directory", 1)
    one_line_error(["--match", "(unclosed"], "invalid --match '(unclosed'", 2)
    one_line_error(["--all-python", "--metrics-listen", "9400"], "invalid --metrics-listen '9400'", 2)
    one_line_error(["--all-python", "--metrics-listen", "127.0.0.1:99999"], "the port must be a number", 1)
    one_line_error(["--cgroup", "/sys/fs/cgroup/nonexistent"], "neither a cgroup directory", 1)
    one_line_error(["--cgroup", "relative/path"], "neither a cgroup directory", 1)
    one_line_error(["-p", "1", "--push", "ftp://x"], "invalid --push 'ftp://x'", 2)
    one_line_error(["-p", "1", "--push-tenant", "a b"], "invalid --push-tenant 'a b'", 2)
    one_line_error(["-p", "1", "--push-tenant", "t1"], "go with --push URL", 2)
    one_line_error(["-p", "1", "--pprof-keep", "0"], "invalid --pprof-keep '0'", 2)
    one_line_error(["-p", "1", "--pprof-keep", "5"], "go with --pprof-dir", 2)
    one_line_error(["-p", "1", "--pprof-dir", "/tmp/x", "--pprof-max-age", "0"], "invalid --pprof-max-age '0'", 2)
    d = tempfile.mkdtemp()
    open(os.path.join(d, "file"), "w").close()
    one_line_error(["--all-python", "--pprof-dir", os.path.join(d, "file")], "--pprof-dir", 1)
    one_line_error(["-p", "1", "--max-allocs", "99999999999"], "invalid --max-allocs", 2)
    one_line_error(["-p", "1", "--sort", "size"], "invalid --sort 'size'", 2)
    one_line_error(["-p"], "needs a value", 2)


@test
def unwritable_output():
    fx = Fixture("leaky", "idle")
    try:
        one_line_error(["-p", str(fx.pid), "-o", "/nonexistent-dir/out.json"], "cannot write output file", 1)
        d = tempfile.mkdtemp()
        os.symlink("/etc/passwd-should-not-be-touched", os.path.join(d, "link"))
        one_line_error(["-p", str(fx.pid), "-o", os.path.join(d, "link")], "cannot write output file", 1)
    finally:
        fx.kill()


@test
def static_binary_without_libc():
    fx = Fixture("leaky-static-stripped", "idle")
    try:
        one_line_error(["-p", str(fx.pid)], "has no C library with malloc and free to probe", 1)
        check(fx.p.poll() is None, "target untouched")
    finally:
        fx.kill()
    check(no_bpf_left(), "nothing left attached")


@test
def static_binary_with_symbols_is_traced():
    rep, _ = traced("basic", prog="leaky-static")
    eq(by_func(rep).get("leak_malloc"), (100000, 100), "static malloc probed in the executable")


@test
def command_mode_static_binary():
    rc, out, err = run_tool("-f", "json", "-c", f"{FIX}/leaky-static basic auto", "60")
    eq(rc, 0, f"exit status (stderr: {err})")
    rep = [json.loads(l) for l in out.splitlines()][-1]
    eq(by_func(rep).get("leak_malloc"), (100000, 100), "the executable's own malloc probed after exec")


@test
def command_mode_static_binary_without_symbols():
    one_line_error(["-c", f"{FIX}/leaky-static-stripped basic auto"], "has no C library with malloc and free", 1)


@test
def pid_exits_during_attach():
    p = subprocess.Popen(["sleep", "0.3"])
    try:
        one_line_error(["-p", str(p.pid)], "exited during attach", 1, env={"MEMLEAK_AI_TEST_ATTACH_DELAY_MS": "1500"})
    finally:
        p.wait()
    check(no_bpf_left(), "nothing left attached")


@test
def not_root():
    fx = Fixture("leaky", "idle")
    try:
        rc, out, err = 0, "", ""
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                            TOOL, "-p", str(fx.pid)], capture_output=True, text=True)
        check(r.returncode != 0, "non-zero exit")
        eq(r.stderr.strip(), "memleak-ai: needs root: CAP_SYS_ADMIN, which this kernel requires for uprobes (run it with sudo)", "message")
    finally:
        fx.kill()


@test
def kernel_without_btf_or_uprobes():
    d = tempfile.mkdtemp()
    os.makedirs(os.path.join(d, "bus/event_source/devices/uprobe"))
    open(os.path.join(d, "bus/event_source/devices/uprobe/type"), "w").write("7\n")
    one_line_error(["-p", "1"], "this kernel has no BTF", 1, env={"MEMLEAK_AI_SYSFS": d})
    d2 = tempfile.mkdtemp()
    os.makedirs(os.path.join(d2, "kernel/btf"))
    open(os.path.join(d2, "kernel/btf/vmlinux"), "w").write("x")
    one_line_error(["-p", "1"], "this kernel has no uprobe support", 1, env={"MEMLEAK_AI_SYSFS": d2})
    one_line_error(["-p", "1"], "this kernel is Linux 5.16: memleak-ai needs 5.17 or newer (bpf_loop, bpf_find_vma)",
                   1, env={"MEMLEAK_AI_KERNEL_RELEASE": "5.16.0-91-generic"})


if __name__ == "__main__":
    sys.exit(main())
