"""--follow: children that existed at attach, forked after it, and after exec, each reported under its own pid."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import test_no_asan, FIX, ROOT, Fail, attached_run, check, eq, main, no_bpf_left, read_line, test, torch_py  # noqa: E402


def wait_stderr(tool, pred, what, timeout=20):
    """Read the tool's stderr until a line satisfies pred."""
    end = time.time() + timeout
    while not any(pred(l) for l in tool.stderr_lines):
        if time.time() > end:
            raise Fail(f"timed out waiting for {what}: {tool.stderr_lines}")
        tool.stderr_lines.append(read_line(tool.p.stderr, end - time.time(), what))


def by_pid_func(rep):
    """{(pid, innermost function): (bytes, count)} over the report's stacks."""
    out = {}
    for s in rep["stacks"]:
        if not s["frames"]:
            continue
        k = (s["pid"], s["frames"][0]["func"])
        b, c = out.get(k, (0, 0))
        out[k] = (b + s["bytes"], c + s["count"])
    return out


def run_family(*tool_args, fmt=("-f", "json", "-v")):
    """The family fixture under memleak-ai: (parent pid, [A, B, C], tool). B and C are let go only once the
    tool follows them (with --follow): what a child does before it is probed is not seen."""
    def let_children_go(fx, tool):
        b, c = (int(x) for x in read_line(fx.stdout, 10, "forked").split()[1:])
        if "--no-follow" not in tool_args:
            wait_stderr(tool, lambda l: f"following pid {b} " in l, "B followed")
            if "-v" in fmt:
                wait_stderr(tool, lambda l: f"pid {c} ran exec: its new image is probed" in l, "C's exec followed")
        fx.stdin.write(b"g")
        fx.stdin.flush()

    tool, pid = attached_run([os.path.join(FIX, "family")], *fmt, "--top", "1000", *tool_args, "60",
                             after_go=let_children_go, ready_timeout=10, done_timeout=20)
    kids = [int(x) for x in tool.fixture_lines[0].split()[1:]]
    return pid, kids, tool


@test
def follow_children_forked_before_after_and_exec():
    parent, (a, b, c), tool = run_family()
    rep = tool.reports()[-1]
    f = by_pid_func(rep)
    eq(f.get((parent, "parent_leak")), (4 * 40001, 4), "the parent's leak, under its pid")
    eq(f.get((a, "child_leak_a")), (7 * 70001, 7), "child A (there before attach), under its pid")
    eq(f.get((b, "child_leak_b")), (5 * 50001, 5), "child B (forked after attach), under its pid")
    eq(f.get((c, "exec_leak")), (3 * 30001, 3), "child C after its exec, under its pid")
    # Nobody's leak shows up under another pid.
    for (pid, fn), _ in f.items():
        want = {"parent_leak": parent, "child_leak_a": a, "child_leak_b": b, "exec_leak": c}.get(fn)
        check(want is None or want == pid, f"{fn} reported under pid {pid}")
    procs = {p["pid"]: p["totals"]["libc"]["bytes"] for p in rep["processes"] if "libc" in p["totals"]}
    check(set(procs) >= {parent, a, b, c}, f"per-process totals: {procs}")
    check(procs[a] >= 7 * 70001 and procs[b] >= 5 * 50001, f"children's totals: {procs}")
    check(any(f"following pid {a} (child of {parent})" in l for l in tool.stderr_lines), "A's notice")
    check(no_bpf_left(), "probes detached")


@test
def follow_off_traces_only_the_process():
    parent, (a, b, c), tool = run_family("--no-follow")
    rep = tool.reports()[-1]
    f = by_pid_func(rep)
    eq(f.get((parent, "parent_leak")), (4 * 40001, 4), "the parent's leak")
    eq(sorted({s["pid"] for s in rep["stacks"]}), [parent], "no other process")
    check(not any("following" in l for l in tool.stderr_lines), "no follow notice")


@test
def follow_text_report_names_each_pid():
    parent, (_, b, _), tool = run_family(fmt=())
    lines = tool.out.splitlines()
    # Each process on a line of its own, a child under its parent (indented), with its name and role.
    at = [i for i, l in enumerate(lines) if l.startswith(f"    pid {b} [glibc] (family, worker): libc 244.1 KiB in 5 allocations")]
    check(at, f"B's total line, under its parent: {[l for l in lines if l.lstrip().startswith('pid')]}")
    up = next((l for l in reversed(lines[:at[0]]) if l.startswith("  pid ")), "")
    check(up.startswith(f"  pid {parent} [glibc] (family, main):"), f"B's parent's line above it: {up!r}")
    check(any(l.startswith("[") and f"] pid {b} libc: 250005 bytes" in l for l in lines),
          "B's stack line names its pid")


@test_no_asan
def dataloader_workers_leak_found_in_the_workers():
    """num_workers=2, the Dataset keeps what it makes: the growth is in the workers, at the Dataset's line. The loader
    goes on past its 250 items until the tool has made 8 reports since the go (1,000 items at most): beside
    stress-ng its 0.5-s reports came late, 4 in the 250 items, and the workers' rows stayed new."""
    script = os.path.join(ROOT, "tests", "fixtures", "dataloader.py")
    line = next(n for n, text in enumerate(open(script), 1) if "# at: cache" in text)

    def eight_reports(fx, tool):
        first, end = tool.lines(), time.time() + 120
        while tool.lines() < first + 8 and time.time() < end and fx.poll() is None:
            time.sleep(0.1)
        fx.stdin.write(b"s")
        fx.stdin.flush()

    tool, parent = attached_run([torch_py(), script, "250", "until-told"], "-f", "json", "--top", "50", "0.5",
                                after_go=eight_reports)
    reps = tool.reports()
    workers = [int(p) for p in tool.fixture_lines[0].split()[1:]]
    eq(len(workers), 2, "two workers")
    for w in workers:
        check(any(f"following pid {w} (child of {parent})" in l for l in tool.stderr_lines), f"worker {w} followed")
    at = (script, "CachingDataset.__getitem__", line)

    def leaks(rep, pid):
        return [s for s in rep["stacks"] if s["pid"] == pid and
                any((f["file"], f["func"], f["line"]) == at for f in s["frames"] if f["kind"] == "python")]

    final = reps[-1]
    kept = [sum(s["count"] for s in leaks(final, w) if s["bytes"] == s["count"] * (800000 + k))
            for k, w in enumerate(workers)]
    print(f"# {len(reps)} reports; the workers' kept items: {kept}", flush=True)
    for wid, w in enumerate(workers):
        # The line also grows the cache list (a realloc); the blocks are those of the worker's size.
        size = 800000 + wid
        st = [s for s in leaks(final, w) if s["bytes"] == s["count"] * size]
        check(st, f"worker {w}: stacks of {size}-byte blocks at the Dataset's line: {leaks(final, w)}")
        count = sum(s["count"] for s in st)
        # A forked worker is probed within ms (its libraries as read for the parent): 4/5 of them at least.
        check(count >= 100, f"worker {w}: nearly all of its ~125 items seen: {count}")
        check(max(s["count"] for s in st) >= count * 0.9, f"worker {w}: one stack holds them: {[s['count'] for s in st]}")
    eq([s for s in final["stacks"] if s["pid"] == parent and
        any(f.get("func") == "CachingDataset.__getitem__" for f in s["frames"])], [],
       "nothing of it in the training process")
    check(any(s["verdict"] == "growing" for r in reps[-3:-1] for w in workers for s in leaks(r, w)),
          f"a worker's cache is a leak candidate: {[[s['verdict'] for w in workers for s in leaks(r, w)] for r in reps]}")


if __name__ == "__main__":
    sys.exit(main())
