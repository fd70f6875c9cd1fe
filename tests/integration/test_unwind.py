"""Native stacks without frame pointers: the whole chain, frame by frame, against what gdb prints at the same point."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import test_no_asan, FIX, TORCH_SCRIPT, Fail, attached_run, check, eq, flaky, main, test, torch_kept_losses, torch_py, wait_tables_loaded  # noqa: E402

UNWIND = os.path.join(FIX, "unwind")  # g++ -O2 -fomit-frame-pointer, with libunwind_fix.so beside it
UNWIND_DF = os.path.join(FIX, "unwind-df", "unwind")  # its library described by .debug_frame only
SCENARIOS = {"five": 1111, "deep": 2222, "lib": 3333, "new": 4444, "signal": 5555}


def name(s):
    """A function name as both sides can agree on it: no parameter list."""
    return s.split("(")[0].strip()


def gdb_frames(exe, scenario, size):
    """(function, line or None) for gdb's frames above malloc, up to main, when malloc(size) is called: the
    fixture runs as under memleak-ai (every scenario after a 'g' on stdin), stopped in the one asked for."""
    with tempfile.NamedTemporaryFile("w", suffix=".in") as go:
        go.write("g")
        go.flush()
        r = subprocess.run(["gdb", "-nx", "-batch", "-ex", "set debuginfod enabled off", "-ex", "break main",
                            "-ex", f"run < {go.name}", "-ex", f"break malloc if $rdi == {size}", "-ex", "continue",
                            "-ex", "bt", exe], capture_output=True, text=True, timeout=120)
    out = []
    for line in r.stdout.splitlines():
        m = re.match(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?(.*)$", line)
        if not m or m.group(1) == "0":
            continue
        rest = m.group(2)
        if rest.startswith("<signal handler called>"):
            out.append(("__restore_rt", None))
            continue
        fm = re.match(r"(.+?) \(.*?\)(?: at (\S+):(\d+))?(?: from \S+)?$", rest)
        check(fm, f"gdb frame parsed: {line!r}")
        out.append((name(fm.group(1)), int(fm.group(3)) if fm.group(3) else None))
        if out[-1][0] == "main":
            break
    check(out and out[-1][0] == "main", f"gdb reached main for {scenario}: {r.stdout[-2000:]}")
    return out


def call_line(func, call):
    """The line of the fixture's source where func makes the call."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "unwind.cpp")) as f:
        lines = f.read().splitlines()
    start = next(i for i, ln in enumerate(lines) if re.search(rf"\b{func}\(size_t n\)$", ln))
    return next(i + 1 for i in range(start, len(lines)) if call in lines[i])


def tool_frames(stack):
    out = []
    for f in stack["frames"]:
        out.append((name(f["func"] or "?"), f["line"]))
        if out[-1][0] == "main":
            break
    return out


def stacks_by_size(exe, *args):
    tool, _ = attached_run([exe], "-f", "json", "--top", "1000", *args, "60")
    rep = tool.reports()[-1]
    out = {}
    for s in rep["stacks"]:
        if s["layer"] == "libc" and s["count"] == 1 and s["bytes"] in SCENARIOS.values():
            out[s["bytes"]] = s
    return out, rep


@test
def every_chain_matches_gdb_frame_by_frame():
    if not shutil.which("gdb"):
        raise Fail("gdb missing")
    got, rep = stacks_by_size(UNWIND)
    for scenario, size in SCENARIOS.items():
        check(size in got, f"{scenario}: a stack of {size} bytes: {sorted(got)}")
        ours, theirs = tool_frames(got[size]), gdb_frames(UNWIND, scenario, size)
        eq([f for f, _ in ours], [f for f, _ in theirs], f"{scenario}: functions, innermost to main")
        for (f, ln), (_, gl) in zip(ours, theirs):
            if gl is not None:
                eq(ln, gl, f"{scenario}: line of {f}")
    # the depths the scenarios promise, counted from malloc's caller to main
    eq(len(tool_frames(got[2222])), 40 + 2, "deep: 40 frames, run and main")
    five = got[1111]["frames"]
    eq([f["inlined"] for f in five[:4]], [False, False, True, False], "five_c is an inlined frame of five_b")
    eq(got[4444]["frames"][0]["func"], "operator new(unsigned long)", "C++ new: operator new is malloc's caller")
    check(got[4444]["frames"][1]["func"].startswith("new_site"), "then the new expression's function")
    eq(os.path.basename(got[3333]["frames"][0]["module"]), "libunwind_fix.so", "lib: frames in the shared library")
    # __restore_rt is a local symbol: named from libc's debug file (libc6-dbg, installed by install-deps.sh)
    sig = tool_frames(got[5555])
    eq(sig[:3], [("on_alarm", sig[0][1]), ("__restore_rt", None), ("spin", sig[2][1])],
       "signal: handler, trampoline, interrupted function")
    check(rep["stats"]["unwind"]["stacks"] > 0 and rep["stats"]["unwind"]["truncated"] == 0, f"unwind counters: {rep['stats']['unwind']}")


@test
@flaky("issue 37: beside stress-ng --cpu 1, under ASan, chain a's three allocations were not one row of 3 x 6666 "
       "bytes (1 run of 1, cause not found; one guess: the fixture's own table left to the builder thread, now built "
       "at attach); a failure lists every memo_leaf row and the tables' state")
def remembered_walks_replay_the_same_chains():
    """Walks are remembered per caller and replayed when every word they read is the same: chains sharing
    the leaf's caller stay apart, and a chain through an rbp-based frame replays too. The memo is per CPU:
    the fixture runs on one."""
    tool, _ = attached_run(["taskset", "-c", "0", UNWIND], "-f", "json", "--top", "1000", "60")
    rep = tool.reports()[-1]
    got = {}
    for s in rep["stacks"]:
        if s["layer"] == "libc" and s["bytes"] in (3 * 6666, 2 * 6666, 20 * 7777, 4 * 8888, 4 * 9999) and name(s["frames"][0]["func"] or "") == "memo_leaf":
            got.setdefault(s["bytes"], []).append(([f for f, _ in tool_frames(s)], s["count"]))
    leaf = [(s["bytes"], s["count"], [f for f, _ in tool_frames(s)]) for s in rep["stacks"]
            if s["layer"] == "libc" and s["frames"] and name(s["frames"][0]["func"] or "") == "memo_leaf"]
    eq(got.get(3 * 6666), [(["memo_leaf", "memo_a2", "memo_a1", "memo_scenario", "run", "main"], 3)],
       f"chain a: its three allocations, one stack (memo_leaf's rows: {leaf}; unwind: {rep['stats']['unwind']}; "
       f"tables: {rep['stats'].get('unwind_tables')})")
    eq(got.get(2 * 6666), [(["memo_leaf", "memo_b1", "memo_scenario", "run", "main"], 2)],
       "chain b, called between them: its two")
    eq(got.get(20 * 7777), [(["memo_leaf", "memo_vla", "memo_scenario", "run", "main"], 20)],
       "through the rbp-based frame: twenty, one stack")
    eq(sorted(got.get(4 * 8888, [])), [(["memo_leaf", "memo_mid", "memo_top_a", "memo_scenario", "run", "main"], 4),
                                       (["memo_leaf", "memo_mid", "memo_top_b", "memo_scenario", "run", "main"], 4)],
       "two tops from one call site, alternately: a replay resumed where they part, each its own stack")
    eq(sorted(got.get(4 * 9999, [])),
       [(["memo_leaf", "memo_vla", "memo_vla2", "memo_vtop_a", "memo_scenario", "run", "main"], 4),
        (["memo_leaf", "memo_vla", "memo_vla2", "memo_vtop_b", "memo_scenario", "run", "main"], 4)],
       "the same above two rbp-based frames: resumed with the rbp the replayed checks left")
    uw = rep["stats"]["unwind"]
    check(uw["replayed"] >= 19 and uw["replayed"] < uw["stacks"], f"the rbp-framed walk replayed 19 times at least: {uw}")


NORMAL_ENDS = ("outermost", "null_return", "depth_limit", "step_limit")
# A leaf called through frames without frame pointers or any unwinding table of their own (the C runtime's
# objects still give the executable a table, which has no row for them).
NO_FDE_SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void *leaf(int i) { void *p = malloc(4321 + i % 2); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) void *mid(int i) { void *p = leaf(i); __asm__ volatile("" ::: "memory"); return p; }
int main(void)
{
	char c;
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	if (read(0, &c, 1) != 1)
		return 1;
	for (int i = 0; i < 50; i++)
		if (!mid(i))
			return 1;
	printf("done\n");
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
"""


def check_stop_sums(uw, what):
    """Each walk counts one reason: they add up to the stacks, the early ones to stopped, depth to truncated."""
    r = uw["stop_reasons"]
    eq(sum(r.values()), uw["stacks"], f"{what}: one reason per stack unwound ({r})")
    eq(sum(v for k, v in r.items() if k not in NORMAL_ENDS), uw["stopped"], f"{what}: early stops add up to stopped")
    eq(r["depth_limit"], uw["truncated"], f"{what}: depth_limit is truncated")


@test
def walks_end_for_their_reasons():
    _, rep = stacks_by_size(UNWIND)
    uw = rep["stats"]["unwind"]
    check_stop_sums(uw, "the unwind fixture")
    check(uw["stop_reasons"]["outermost"] + uw["stop_reasons"]["null_return"] > 0,
          f"walks reach the outermost frame: {uw['stop_reasons']}")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "nofde.c"), os.path.join(d, "nofde")
        with open(src, "w") as f:
            f.write(NO_FDE_SRC)
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
                        src, "-o", exe], check=True)
        tool, _ = attached_run([exe], "-f", "json", "60")
        uw = tool.reports()[-1]["stats"]["unwind"]
    check_stop_sums(uw, "no table rows, no frame pointers")
    check(uw["stop_reasons"]["no_fde"] > 0 and uw["stopped"] > 0, f"walks stop at a pc its table has no row for: {uw}")


@test
def frame_pointers_alone_lose_the_chain():
    got, rep = stacks_by_size(UNWIND, "--unwind", "fp")
    check(2222 in got, "deep stack recorded")
    depth = len(tool_frames(got[2222]))
    check(depth < 10, f"without tables the 40-deep chain is cut short ({depth} frames)")
    eq(rep["stats"]["unwind"]["stacks"], 0, "no stack unwound with tables")
    eq(sum(rep["stats"]["unwind"]["stop_reasons"].values()), 0, "nor any walk's end counted")


@test
def debug_frame_only_library_unwinds():
    sections = subprocess.run(["readelf", "-SW", os.path.join(FIX, "unwind-df", "libunwind_fix.so")],
                              capture_output=True, text=True).stdout
    check(".debug_frame" in sections, "the library has a .debug_frame")
    fdes = subprocess.run(["readelf", "--debug-dump=frames", os.path.join(FIX, "unwind-df", "libunwind_fix.so")],
                          capture_output=True, text=True).stdout
    check("Contents of the .debug_frame section" in fdes, "its functions' CFI is in .debug_frame")
    got, _ = stacks_by_size(UNWIND_DF)
    eq([f for f, _ in tool_frames(got[3333])], ["lib_inner", "lib_outer", "via_lib", "run", "main"],
       "through the .debug_frame library to main")


@test
def stripped_binary_named_from_its_debug_file():
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "unwind")
        shutil.copy(UNWIND, exe)
        shutil.copy(os.path.join(FIX, "libunwind_fix.so"), d)
        bid = re.search(r"Build ID: ([0-9a-f]+)",
                        subprocess.run(["readelf", "-n", exe], capture_output=True, text=True).stdout).group(1)
        dbg = os.path.join(d, "debug", ".build-id", bid[:2])
        os.makedirs(dbg)
        subprocess.run(["objcopy", "--only-keep-debug", exe, os.path.join(dbg, bid[2:] + ".debug")], check=True)
        subprocess.run(["strip", "--strip-all", exe], check=True)
        check("debug_info" not in subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True).stdout,
              "the copy is stripped")
        got, _ = stacks_by_size(exe, "--debug-dir", os.path.join(d, "debug"))
        eq(tool_frames(got[1111])[:5], [("five_e", call_line("five_e", "malloc(n)")),
                                        ("five_d", call_line("five_d", "five_e(n)")),
                                        ("five_c", call_line("five_c", "five_d(n)")),
                                        ("five_b", call_line("five_b", "five_c(n)")),
                                        ("five_a", call_line("five_a", "five_b(n)"))],
           "names, inlined frame and lines from the debug file")
        got, _ = stacks_by_size(exe)
        check(got[1111]["frames"][0]["func"] is None, "without it the stripped frames have no name")


@test_no_asan
def libtorch_allocation_reaches_the_python_frames():
    _, _, top = torch_kept_losses()
    fr = top["frames"]
    eq(os.path.basename(fr[0]["module"]), "libc10.so", "c10::alloc_cpu's caller is in libc10 (the wheel's name)")
    at = [i for i, f in enumerate(fr) if f["kind"] == "native" and (f["func"] or "").startswith("at::")]
    check(len(at) >= 5, f"at:: frames from libtorch_cpu: {len(at)}")
    py = [i for i, f in enumerate(fr) if f["kind"] == "python"]
    check(py and py[0] > at[-1], "the Python frames come after the at:: frames")
    check(any(f["kind"] == "python" and f["file"] == TORCH_SCRIPT and f["func"] == "<module>" for f in fr),
          "the job's own line is there")
    eq(fr[-1]["func"], "_start", "and the native frames go on to _start")
    _, growing_fp, _ = torch_kept_losses("--unwind", "fp", tables=False)
    fp_at = max(sum(1 for f in s["frames"] if (f["func"] or "").startswith("at::")) for s in growing_fp)
    check(fp_at < len(at), f"frame pointers alone see fewer at:: frames ({fp_at} vs {len(at)})")


@test_no_asan
def tables_load_behind_the_attach():
    """Issue 36: attaching to a torch job does not wait for the unwinding tables of its ~90 libraries: those of
    libc, the interpreter and libc10 are built at once, the rest by a thread. Meanwhile every tensor the loop
    allocates keeps its caller in libc10 and its Python line; once every table is in (the -v line says so), the
    loop's stacks go on to _start, and the report's stats.unwind_tables say all were loaded, some by the thread."""
    line = next(i for i, l in enumerate(open(TORCH_SCRIPT), 1) if "# at: forward" in l)

    tool, _ = attached_run([torch_py(), TORCH_SCRIPT, "keep", "cpu", "1500"], "-v", "-f", "json", "--layers",
                           "torch_cpu", "--top", "50", "0.5", after_go=wait_tables_loaded, done_timeout=180)
    reps = tool.reports()
    at_line = [(r["seq"], s) for r in reps for s in r["stacks"]
               if any(f["kind"] == "python" and f["file"] == TORCH_SCRIPT and f["line"] == line for f in s["frames"])]
    check(at_line, "tensors allocated at the forward line")
    callers = {os.path.basename(s["frames"][0].get("module") or "?") for _, s in at_line}
    eq(callers, {"libc10.so"}, "every row at the forward line keeps c10::alloc_cpu's caller, in libc10")
    tables = reps[-1]["stats"]["unwind_tables"]
    print(f"# first report: {reps[0]['stats']['unwind_tables']}; last: {tables}; cut walks merged: "
          f"{reps[-1]['stats']['stack_store']['stopped_walks_merged']}", flush=True)
    check(tables["pending"] == 0 and tables["queued"] >= 50 and tables["background"] >= 1 and
          tables["all_loaded_s"] > 0, f"every table loaded, some by the thread: {tables}")
    full = [s for s in reps[-1]["stacks"] if s["layer"] == "torch_cpu" and s["verdict"] == "growing"]
    check(full and max(full, key=lambda s: s["bytes"])["frames"][-1]["func"] == "_start",
          "once loaded, the kept tensors' stack goes on to _start")


if __name__ == "__main__":
    sys.exit(main())
