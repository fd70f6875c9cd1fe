"""Python frames: exact files, functions and lines from real interpreters, attached with -p like a user would."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (test_no_asan, flaky, DEBIAN_PY, FIX, ROOT, TORCH_SCRIPT, Fail, attached_run, check, eq, main, skip,  # noqa: E402
                     Tool, run_tool, test, torch_kept_losses, wait_or_tell)

SCRIPT = os.path.join(ROOT, "tests", "fixtures", "py_leaky.py")
PYENV = os.path.expanduser("~/.pyenv/versions")


def pyenv(minor):
    """The pyenv interpreter of a minor version (shared libpython), or None."""
    if not os.path.isdir(PYENV):
        return None
    for v in sorted(os.listdir(PYENV), reverse=True):
        exe = os.path.join(PYENV, v, "bin", "python" + minor)
        if v.startswith(minor + ".") and os.access(exe, os.X_OK):
            return exe
    return None


def markers(path):
    """{'name': line} from the fixture's '# at: name' comments."""
    out = {}
    with open(path) as f:
        for n, text in enumerate(f, 1):
            m = re.search(r"# at: (\w+)", text)
            if m:
                out[m.group(1)] = n
    return out


AT = markers(SCRIPT)


def run_py(python, scenario, *args, tool_args=()):
    """Run the fixture under memleak-ai -p: (final JSON report, tool)."""
    tool, _ = attached_run([python, SCRIPT, scenario, *args], "-f", "json", "--top", "1000", *tool_args, "60")
    reps = tool.reports()
    check(reps and reps[-1]["final"], "a final report")
    return reps[-1], tool


def py_frames(stack):
    return [(f["file"], f["func"], f["line"]) for f in stack["frames"] if f["kind"] == "python"]


def sized(rep, size, layer="libc"):
    """Stacks holding allocations of exactly `size` bytes each."""
    return [s for s in rep["stacks"] if s["layer"] == layer and s["count"] and s["bytes"] == size * s["count"]]


def expect_chain(rep, size, count, chain, what):
    """All `count` blocks of `size` bytes sit on one stack whose Python frames begin with `chain`."""
    st = sized(rep, size)
    eq(sum(s["count"] for s in st), count, f"{what}: blocks of {size} bytes outstanding")
    eq(len(st), 1, f"{what}: one stack for them")
    got = py_frames(st[0])
    want = [(SCRIPT, func, AT[mark]) for func, mark in chain]
    eq(got[:len(want)], want, f"{what}: Python frames, innermost first")
    return st[0]


def check_py_stop_sums(py, what):
    """Each walk counts one reason: they add up to the walks, and to unreadable and truncated where they say so."""
    r = py["stop_reasons"]
    eq(sum(r.values()), py["with_frames"] + py["without_frames"], f"{what}: one reason per walk ({r})")
    eq(r["frame_unreadable"], py["unreadable"], f"{what}: frame_unreadable is unreadable")
    eq(r["depth_limit"] + r["step_limit"], py["truncated"], f"{what}: depth and step limits are truncated")


def check_basic(python):
    rep, tool = run_py(python, "basic")
    check(any("Python frames: CPython 3." in l for l in tool.stderr_lines), f"notice: {tool.stderr_lines}")
    # 20 kept blocks of 300000 + i bytes (+1 for bytearray's NUL), all from one line through leak_step.
    sizes = set(300001 + i for i in range(20))
    st = [s for s in rep["stacks"] if s["layer"] == "libc" and s["count"] == 20 and
          s["bytes"] == sum(sizes)]
    eq(len(st), 1, "one stack holds the 20 kept blocks, exactly")
    want = [(SCRIPT, func, AT[mark]) for func, mark in
            [("make_block", "make_block"), ("leak_step", "leak_step"), ("basic", "basic"), ("<module>", "main")]]
    eq(py_frames(st[0]), want, "its Python frames, innermost first")
    # churn()'s 50 blocks were freed: none outstanding, and every free matched its allocation.
    eq(sized(rep, 200001), [], "churn's freed blocks are not outstanding")
    # 70 allocations ran Python code: 20 kept, 50 churned (smaller objects come from CPython's own arenas).
    check(rep["stats"]["python"]["with_frames"] >= 70, f"python stats: {rep['stats']['python']}")
    check_py_stop_sums(rep["stats"]["python"], "basic")
    check(rep["stats"]["python"]["stop_reasons"]["chain_end"] >= 70, f"chains read to their end: {rep['stats']['python']}")
    check(rep["stats"]["events"]["frees_matched"] >= 50, f"churn's frees matched: {rep['stats']['events']}")
    # Frames appear in call order with the native ones: the allocator's caller and the interpreter's C
    # functions up to the eval loop, the Python frames that loop ran in its place, then the interpreter's
    # start-up frames down to _start (unwound with the tables: libpython keeps no frame pointers).
    kinds = [f["kind"] for f in st[0]["frames"]]
    first, last = kinds.index("python"), len(kinds) - 1 - kinds[::-1].index("python")
    check(kinds[0] == "native" and kinds[first:last + 1] == ["python"] * 4 and
          all(k == "native" for k in kinds[last + 1:]) and st[0]["frames"][-1]["func"] == "_start",
          f"frame kinds: {kinds}, last {st[0]['frames'][-1]['func']}")
    check(any(f["func"] == "Py_RunMain" for f in st[0]["frames"][last + 1:]),
          "the interpreter's own frames below the Python ones (Py_RunMain)")


@test
def python_pyenv_311_shared_libpython():
    exe = pyenv("3.11")
    if not exe:
        raise Fail("the pyenv Python 3.11 (shared libpython, first on PATH) is missing")
    check_basic(exe)


@test
def python_debian_311_static_libpython():
    if not os.access(DEBIAN_PY, os.X_OK):
        raise Fail("Debian python3.11 missing")
    check_basic(DEBIAN_PY)


def check_pyenv(minor):
    exe = pyenv(minor)
    if not exe:
        skip(f"no Python {minor} on this machine")
    check_basic(exe)


@test
def python_312():
    check_pyenv("3.12")


@test
def python_313_checked_against_debug_offsets():
    check_pyenv("3.13")


def census_of(python):
    rep, tool = run_py(python, "objects")
    cen = next(p["census"] for p in rep["processes"] if p.get("census"))
    return {t["name"]: t["count"] for t in cen["types"]}, cen, tool


@test
def python_objects_counted_by_type_in_pymalloc_pools():
    """The heap census counts Python objects in pymalloc's pools by their type, from outside: 12,345
    instances with a __dict__ (GC head, and from 3.11 the managed-dict words before it), 3,456 with
    __slots__ (GC head only), 23,456 of an int subclass (no GC head), exactly, on every interpreter here."""
    exes = [e for e in [pyenv(m) for m in ("3.11", "3.12", "3.13")] + [DEBIAN_PY] if e and os.access(e, os.X_OK)]
    check(len(exes) >= 2, f"interpreters to count in: {exes}")
    for exe in exes:
        got, cen, _ = census_of(exe)
        want = {"Python CensusDict": 12345, "Python CensusSlots": 3456, "Python CensusInt": 23456}
        eq({k: got.get(k) for k in want}, want, f"{exe}: objects by type ({cen['python_pools']} pools)")
        check(cen["python_typed"] > 0.8 * cen["python_objects"] and cen["python_pools_left_out"] == 0,
              f"{exe}: most objects typed: {cen['python_typed']} of {cen['python_objects']}")


@test
def python_threads_each_to_its_own_frames():
    rep, _ = run_py(pyenv("3.11") or DEBIAN_PY, "threads")
    a = expect_chain(rep, 410001, 10, [("Worker.run_a", "run_a")], "thread a")
    b = expect_chain(rep, 420001, 10, [("Worker.run_b", "run_b")], "thread b")
    # A thread's outermost Python frame is threading's bootstrap, never the main thread's frames.
    for st in (a, b):
        funcs = [f for _, f, _ in py_frames(st)]
        check("Thread._bootstrap" in funcs and "<module>" not in funcs, f"thread frames: {funcs}")


@test
def python_frames_of_a_call_that_released_the_gil():
    # ctypes releases the GIL around libc.malloc: the frames are the caller's all the same.
    rep, _ = run_py(pyenv("3.11") or DEBIAN_PY, "nogil")
    expect_chain(rep, 123457, 5, [("nogil", "nogil"), ("<module>", "main")], "malloc without the GIL")


@test
def python_deep_recursion_whole_and_truncated():
    exe = pyenv("3.11") or DEBIAN_PY
    rep, _ = run_py(exe, "deep", "150")
    st = expect_chain(rep, 510001, 3, [("recurse", "recurse_leaf")] + [("recurse", "recurse")] * 149, "150 deep")
    funcs = [f for _, f, _ in py_frames(st)]
    eq(funcs[150:], ["deep", "<module>"], "the frames below the recursion")
    eq(st["python_truncated"], False, "150 + 2 frames fit")
    rep, _ = run_py(exe, "deep", "300")
    st = sized(rep, 510001)
    eq(len(st), 1, "one stack")
    eq(len(py_frames(st[0])), 192, "the innermost 192 frames are kept")
    eq(st[0]["python_truncated"], True, "the rest is reported missing")
    check(rep["stats"]["python"]["truncated"] >= 3, f"counted: {rep['stats']['python']}")
    check_py_stop_sums(rep["stats"]["python"], "300 deep")
    check(rep["stats"]["python"]["stop_reasons"]["depth_limit"] >= 3, f"at the depth limit: {rep['stats']['python']}")


@test
def python_frames_off():
    rep, tool = run_py(pyenv("3.11") or DEBIAN_PY, "basic", tool_args=("--no-python",))
    st = [s for s in rep["stacks"] if s["count"] == 20 and s["bytes"] == sum(300001 + i for i in range(20))]
    eq(len(st), 1, "the leak is still found")
    eq(py_frames(st[0]), [], "no Python frames")
    check(not any("Python frames" in l for l in tool.stderr_lines), "no notice")


@test
def python_older_interpreter_gets_a_notice_and_native_stacks():
    exe = pyenv("3.10")
    if not exe:
        print("# skipped: no Python 3.10 on this machine")
        return
    rep, tool = run_py(exe, "basic")
    check(any("older than 3.11" in l and "native stacks only" in l for l in tool.stderr_lines),
          f"notice: {tool.stderr_lines}")
    st = [s for s in rep["stacks"] if s["count"] == 20 and s["bytes"] == sum(300001 + i for i in range(20))]
    eq(len(st), 1, "the leak is still found")
    eq(py_frames(st[0]), [], "no Python frames")


@test
def c_program_native_stacks_and_no_python_notice():
    tool, _ = attached_run([os.path.join(FIX, "leaky"), "basic"], "-f", "json", "60")
    rep = tool.reports()[-1]
    check(rep["stacks"], "stacks reported")
    eq([f for s in rep["stacks"] for f in s["frames"] if f["kind"] != "native"], [], "only native frames")
    eq({k: v for k, v in rep["stats"]["python"].items() if k != "stop_reasons"},
       {"with_frames": 0, "without_frames": 0, "truncated": 0, "unreadable": 0, "unresolved_frames": 0,
        "code_objects_learned": 0, "learn_ms": 0}, "no Python capture, nothing decoded")
    eq(sum(rep["stats"]["python"]["stop_reasons"].values()), 0, "nor any Python walk's end")
    check(not any("Python" in l for l in tool.stderr_lines), f"no Python notice: {tool.stderr_lines}")


@test
def python_frames_in_text_report():
    tool, _ = attached_run([pyenv("3.11") or DEBIAN_PY, SCRIPT, "basic"], "--top", "100", "60")
    for func, mark in [("make_block", "make_block"), ("leak_step", "leak_step"), ("basic", "basic")]:
        want = f"      {SCRIPT}:{AT[mark]} in {func}"
        check(want in tool.out.splitlines(), f"text report has {want!r}")


EXITS = os.path.join(ROOT, "tests", "fixtures", "py_exits.py")


def null_python_frames(reps):
    """Every Python frame of every report (its rows and its peak's) with a null file or function."""
    return [(r["seq"], f) for r in reps for s in r["stacks"] + r.get("peak", {}).get("stacks", [])
            for f in s["frames"] if f["kind"] == "python" and (f["func"] is None or f["file"] is None)]


@test
def python_script_that_ends_keeps_its_findings():
    """-c on a script that ends by itself: its interpreter's teardown (Py_FinalizeEx) holds it while a report
    is made, so that report has all 150 kept blocks at their line; the final report, after the exit, shows that
    report's rows and verdicts, says the exit freed them, and every Python frame still names its line."""
    py = pyenv("3.12") or DEBIAN_PY
    at = markers(EXITS)
    rc, out, err = run_tool("-f", "json", "--top", "50", "-c", f"{py} {EXITS} 150", "1", timeout=120)
    eq(rc, 0, f"exit status ({err[-300:]})")
    reps = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    check(len(reps) >= 4, f"reports: {len(reps)}")
    # The teardown's report, then the final one; on a busy machine a periodic report can come between them
    # (ASan beside two busy loops: teardown report 7, then 8, then the final).
    final = reps[-1]
    live = next((r for r in reps if r["seq"] == final.get("exited", {}).get("live_report")), None)
    check(final["final"] and live is not None and not live["final"] and live["seq"] >= len(reps) - 3,
          f"the final shows the teardown's report: {final.get('exited')}, reports {[r['seq'] for r in reps]}")
    want = sum(65537 + i for i in range(150))
    keep = [s for s in live["stacks"] if s["layer"] == "libc" and s["bytes"] == want and s["count"] == 150]
    eq(len(keep), 1, f"at teardown, one row holds the 150 kept blocks: {[(s['bytes'], s['count']) for s in live['stacks'][:5]]}")
    eq(py_frames(keep[0])[:1], [(EXITS, "keep", at["keep"])], "its line")
    row = [s for s in final["stacks"] if s["frames"] == keep[0]["frames"] and s["layer"] == "libc"]
    eq(len(row), 1, "the final report shows it")
    eq((row[0]["verdict"], row[0]["bytes"], row[0]["peak_bytes"], row[0]["freed_at_exit_bytes"]),
       ("growing", want, want, want), "a leak candidate to the end, its peak, and what the exit freed: all of it")
    check(final["stacks"][0]["frames"] == keep[0]["frames"], "the first row of the final report")
    churn = [s for s in final["stacks"] if (py_frames(s)[:1] or [(0, 0, 0)])[0][2] == at["churn"]]
    eq([s["verdict"] for s in churn if s["verdict"] == "growing"], [], "the churned block is no candidate")
    check(final["peak"]["layers"]["libc"]["bytes"] >= want and final["peak"]["rss_hwm_bytes"] > want,
          f"the peak: {final['peak']['layers']}, VmHWM {final['peak']['rss_hwm_bytes']}")
    eq(null_python_frames(reps), [], "no null Python frame in any report")
    # A module's body is freed once it ran: a start-up stack read after that (or while it was being freed) keeps
    # a reason. Never a candidate's.
    bad = [(s["verdict"], f["func"]) for s in final["stacks"] for f in s["frames"] if f.get("unresolved")]
    eq([b for b in bad if b[0] == "growing"], [], "every Python frame of a leak candidate decoded")
    eq(final["stats"]["python"]["unresolved_frames"], len(bad), "stats.python counts the frames left unresolved")
    check(final["stats"]["python"]["code_objects_learned"] > 0, f"code objects decoded as stacks came: {final['stats']['python']}")


@test
def python_started_by_a_shell_that_execs_it():
    """-c on a shell that waits, then execs the interpreter under jemalloc (LD_PRELOAD, as a job launcher may):
    the first reports walk the shell's glibc heap, and the exec gives the same pid a new address space with no
    chunk headers to walk. That walk and its census go with the old image: kept, every later report read the
    freed census (ASan: heap-use-after-free; without it, SIGSEGV in 5 runs of 6 through a pyenv shim). The
    interpreter's kept blocks are then found at their line."""
    py = pyenv("3.12") or DEBIAN_PY
    at = markers(EXITS)
    jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # libjemalloc2, installed by scripts/install-deps.sh
    cmd = f"sh -c 'sleep 2.5; LD_PRELOAD={jemalloc} exec {py} {EXITS} 150'"
    rc, out, err = run_tool("-f", "json", "--top", "50", "-c", cmd, "1", timeout=120)
    eq(rc, 0, f"exit status ({err[-300:]})")
    reps = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    check(len(reps) >= 5, f"reports: {len(reps)}")
    root = reps[-1]["processes"][0]["pid"]  # the shell's pid, then the interpreter's
    walks = [(r["seq"], bool((p.get("fragmentation") or {}).get("heaps"))) for r in reps for p in r["processes"]
             if p["pid"] == root]
    check(walks[:2] == [(1, True), (2, True)], f"the shell's heap walked at the first reports: {walks}")
    eq(walks[-1], (reps[-1]["seq"], False), f"no walk shown once the interpreter runs under jemalloc: {walks}")
    want = sum(65537 + i for i in range(150))
    live = [r for r in reps if r["seq"] == reps[-1].get("exited", {}).get("live_report")]
    keep = [s for r in live for s in r["stacks"] if s["bytes"] == want and s["count"] == 150]
    eq([py_frames(s)[:1] for s in keep], [[(EXITS, "keep", at["keep"])]],
       f"after the exec, the kept blocks at their line in the report at teardown ({reps[-1].get('exited')})")


@test
@flaky("issue 37: once in CI under ASan a report read 69.8 MB of C heap while a 31 MB bash heap ran (report 2, "
       "before the second image's start was logged); not seen in 24 runs here, 20 of them beside stress-ng. The "
       "failure now prints each report's address space, estimate and rows")
def exec_in_heap_growth_mode_starts_from_the_new_break():
    """-c on a bash loop busy enough to put the C heap in heap-growth mode, that grows its heap by brk and execs
    itself, four images in all, then an interpreter: each new image's program break is not the old one's. Kept,
    a new image's first brk (in ld.so's start) read as growth from the old break to it whenever address
    randomization put the new heap above the old (one exec in two): blocks of 54 to 875 GB. Now no report
    holds more C heap than the processes could (64 MiB of address space, and as much of the sampling windows'
    estimated blocks, which live in that space), and every report after the first exec is in heap-growth
    mode: the later images start in it. Told by the images' own start times (EXEC_CHAIN_LOG), not by a report's
    number: beside stress-ng the ASan build decided after the second report, while the first image still ran."""
    py = pyenv("3.12") or DEBIAN_PY
    chain = os.path.join(ROOT, "tests", "fixtures", "exec_chain.sh")
    with tempfile.NamedTemporaryFile("r", prefix="exec_chain-", suffix=".log") as log:
        rc, out, err = run_tool("--max-overhead", "2", "-f", "json", "--top", "1000", "-c",
                                f"bash {chain} 4 {py} -c 'import time; time.sleep(2)'", "1",
                                env={"EXEC_CHAIN_LOG": log.name}, timeout=120)
        starts = [float(l.split()[1]) for l in log.read().splitlines()]
    eq(rc, 0, f"exit status ({err[-300:]})")
    reps = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    eq(len(starts), 4, "the chain's four images started")
    after = [(r["seq"], r["modes"].get("libc")) for r in reps if r["time_unix"] > starts[1]]
    check(len(after) >= 3, f"reports after the first exec: {after}")
    eq({m for _, m in after}, {"heap_growth"}, f"heap-growth mode in every report after the first exec: {after}")
    print(f"# images began {[round(t - starts[0], 2) for t in starts]} s after the first; reports after the first "
          f"exec: {[seq for seq, _ in after]} of {len(reps)}", flush=True)
    # The address space the images added, and apart from it the sampling windows' estimate of the blocks that
    # live in it: each within what a process could hold. Summed (totals.libc) they count the heap twice: 69.8 MB
    # in CI (ASan, 3x slower) for a 31 MB heap.
    def part(r, est):
        return sum(s["bytes"] for s in r["stacks"] if s["layer"] == "libc" and
                   (s["estimated"] if est else s["address_space"]))
    parts = [(r["seq"], part(r, False), part(r, True), r["totals"]["libc"]["bytes"]) for r in reps]
    check(max(p[1] for p in parts) >= 1 << 20, f"the images' heaps grown by brk, read as address space: {parts}")
    def over_cap(p):  # each part within 64 MiB; the total, with any other record, within both
        return max(p[1], p[2]) > 64 << 20 or p[3] > 128 << 20
    over = [(r, p) for r, p in zip(reps, parts) if over_cap(p)]
    first = over[0][0] if over else {"stacks": [], "stats": {}, "modes": {}}
    rows = [(s["pid"], s["bytes"], s["count"], s["address_space"], s["estimated"], s["oldest_age_s"],
             [f.get("func") for f in s["frames"][:3]]) for s in first["stacks"] if s["layer"] == "libc"]
    eq([p for _, p in over], [],
       f"no report with more C heap than the processes could hold (report, address space, estimated, total): "
       f"{parts}; the first such report's libc rows: {rows[:12]}, dropped {first['stats'].get('dropped')}, "
       f"modes {first['modes']}")


@test
def python_attached_script_that_ends_keeps_its_findings():
    """-p on a script that ends by itself: the job is never stopped, so the final report shows the last report
    made before its interpreter's teardown began, its kept blocks (those made since attach) growing at their
    line, all freed at exit. The script counts its 200 steps (8 s) from the tool's attach: an ASan build's
    attach on a loaded CI machine took 10 s, and a fixed-length script left it two reports."""
    py = pyenv("3.12") or DEBIAN_PY
    at = markers(EXITS)
    job = subprocess.Popen([py, EXITS, "200", "go"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    tool = Tool("-f", "json", "--top", "50", "-p", str(job.pid), "1")
    try:
        tool.wait_attached(timeout=60)
        job.stdin.write(b"g")
        job.stdin.flush()
        wait_or_tell(job, 60, "the script")
        rc = tool.finish(timeout=60)
        out, err = tool.out, "\n".join(tool.stderr_lines)
    finally:
        tool.kill()
        job.kill()
        job.wait()
    eq(rc, 0, f"exit status ({err[-300:]})")
    reps = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    final = reps[-1]
    live = next((r for r in reps if r["seq"] == final.get("exited", {}).get("live_report")), None)
    check(live is not None and not live["final"], f"the final report names a live one: {final.get('exited')}")
    keep = [s for s in final["stacks"] if (py_frames(s)[:1] or [(0, 0, 0)])[0] == (EXITS, "keep", at["keep"])
            and s["layer"] == "libc" and s["bytes"] > 65536 * s["count"]]  # not the list's own growth
    eq(len(keep), 1, f"the kept blocks' row in the final report ({len(reps)} reports; the top rows: "
       f"{[(s['layer'], s['count'], s['bytes'], py_frames(s)[:1]) for s in final['stacks'][:3]]})")
    check(keep[0]["verdict"] == "growing" and 150 <= keep[0]["count"] <= 200 and keep[0]["freed_at_exit_bytes"] == keep[0]["bytes"],
          f"growing to the end, all of it freed at exit: {[(s['verdict'], s['count'], s['bytes'], s.get('freed_at_exit_bytes')) for s in keep]}")
    eq(null_python_frames(reps), [], "no null Python frame in any report")


@test_no_asan
def pytorch_kept_losses_name_the_forward_line():
    _, growing, top = torch_kept_losses()
    fwd = markers(TORCH_SCRIPT)["forward"]
    # Inner frames are PyTorch's own Python (functional.py's relu, ...); the job's line is the outermost.
    eq(py_frames(top)[-1], (TORCH_SCRIPT, "<module>", fwd), "the largest growing stack's outermost Python frame")
    on_line = sum(s["bytes"] for s in growing if (TORCH_SCRIPT, "<module>", fwd) in py_frames(s))
    check(on_line >= sum(s["bytes"] for s in growing) * 0.9,
          f"the growth is attributed to the forward line: {on_line} of {sum(s['bytes'] for s in growing)}")


if __name__ == "__main__":
    sys.exit(main())
