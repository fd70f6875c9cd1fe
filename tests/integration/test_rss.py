"""The rss layer on real faults: anonymous pages made resident by user-mode and kernel-mode faults, charged to
the function that faulted, with exact page counts; copies on write after fork, in the parent and in the child;
the release paths (munmap, madvise, a shrinking break, MAP_FIXED, mremap moves small and large, exec); the
sampling weight across a doubling of the interval. Transparent huge pages are off in the fixture (prctl), so
every fault is one 4 KiB page."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (FIX, Fail, Fixture, Tool, alone, attached_run, check, eq, main, read_line, test,  # noqa: E402
                     traced)

PAGE = 4096


def rows(rep, func, pid=None):
    """The rss rows whose innermost frame is func (of pid, when given)."""
    return [s for s in rep["stacks"] if s["layer"] == "rss" and s["frames"] and s["frames"][0]["func"] == func
            and (pid is None or s["pid"] == pid)]


def pages(rs):
    return sum(s["bytes"] for s in rs) // PAGE


def cow_pages(rs):
    return sum(s["cow_bytes"] for s in rs) // PAGE


def sampled(page, shift):
    """ml_rss_sampled (bpf/memleak.h) in Python."""
    h = ((page >> 12) * 0x9E3779B97F4A7C15) & (2**64 - 1)
    return shift == 0 or (h >> (64 - shift)) == 0


def smaps_rss_pages(pid, addr):
    """The Rss of pid's mapping that starts at addr, in pages, from /proc/PID/smaps."""
    with open(f"/proc/{pid}/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.split("-", 1)[0] == f"{addr:x}":
            for field in lines[i + 1:]:
                if field.startswith("Rss:"):
                    kb = int(field.split()[1])
                    check(kb % (PAGE // 1024) == 0, f"Rss of {addr:x}: {kb} kB")
                    return kb // (PAGE // 1024)
    raise Fail(f"no mapping at {addr:x} in /proc/{pid}/smaps")


@test
def first_touch_exact_pages():
    fx = Fixture("pages", "touch", "show")
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", "60")
    try:
        tool.wait_attached()
        fx.go()
        line = read_line(fx.p.stdout, 30, "fixture region")
        check(line.startswith("region "), f"fixture said {line!r}")
        # What the kernel made of the reads, while the fixture lives: the zero page (Rss 0) or, on kernels
        # that give a private anonymous page of its own at a read fault, all 8 pages resident.
        resident = smaps_rss_pages(fx.pid, int(line.split()[1], 16))
        check(resident in (0, 8), f"Rss of the 8 pages only read: {resident} pages")
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "memleak-ai exit status")
        reps = tool.reports()
        check(reps, "no report")
        rep = reps[-1]
        eq(rep["final"], True, "last report is final")
    finally:
        tool.kill()
        fx.kill()
    t = rows(rep, "touch_user")
    eq(pages(t), 64, "pages written by touch_user (user-mode faults)")
    eq(cow_pages(t), 0, "copies among them")
    eq(t[0]["frames"][1]["func"], "main", "touch_user's caller")
    eq(pages(rows(rep, "read_into")), 16, "pages read(2) wrote into (kernel-mode faults), charged to read's caller")
    only = rows(rep, "only_read")
    eq(pages(only), resident, "pages only read: as many as the kernel made resident (their Rss in smaps)")
    if not resident:
        eq(only, [], "pages only read, the zero page: no record")
    check(rep["stats"]["rss"]["pages"] >= 80 + resident, f"rss pages counter {rep['stats']['rss']['pages']}")
    eq(rep["stats"]["rss_sample_every"], 1, "every page recorded")
    eq(rep["totals"]["rss"]["cow_bytes"], 0, "no copies")


@test
@alone
def default_settings_keep_the_layer():
    fx = Fixture("pages", "touch")
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", "--max-overhead", "2", "60")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "memleak-ai exit status")
        rep = tool.reports()[-1]
        eq(pages(rows(rep, "touch_user")), 64, "pages written by touch_user at the default budget")
    finally:
        tool.kill()
        fx.kill()


@test
def layers_option_turns_it_off():
    rep, _ = traced("touch", "--layers", "libc", prog="pages")
    eq([s for s in rep["stacks"] if s["layer"] == "rss"], [], "rss rows with --layers libc")
    eq(rep["stats"]["rss"]["faults"], 0, "faults seen with the layer off")


@test
def faults_inside_a_probed_malloc_keep_their_callers():
    """At full fidelity malloc has a return probe pending while it runs: its return address on the stack is the
    uprobe trampoline's, the real one in the kernel's list. Pages malloc itself makes resident (the top chunk's
    header, a block further each time) are charged to the whole stack, its caller and main above it."""
    rep, _ = traced("heap", "--max-overhead", "100", prog="pages")
    eq(rep["modes"]["libc"], "full", "malloc's probes on")
    inside = [s for s in rep["stacks"] if s["layer"] == "rss" and
              {"_int_malloc", "sysmalloc"} & {f["func"] for f in s["frames"]}]
    check(pages(inside) >= 200, f"pages made resident inside malloc: {pages(inside)}")
    for s in inside:
        funcs = [f["func"] for f in s["frames"]]
        above = funcs[funcs.index("malloc") + 1:] if "malloc" in funcs else []
        eq(above[:2], ["heap_blocks", "main"], f"the stack above malloc: {funcs}")
    eq(rep["stats"]["unwind"]["stopped"], 0, "walks stopped early")


@test
def releases_and_moves():
    # 9,000 pages in a burst: over the 250 pages a second that start sampling; every page kept for exact counts.
    rep, _ = traced("release", prog="pages", env={"MEMLEAK_AI_TEST_RSS_MAX_RATE": "100000000"})
    eq(rows(rep, "gone_touch"), [], "pages unmapped, madvised away, replaced by MAP_FIXED or above a shrunk break")
    eq(pages(rows(rep, "moved_touch")), 8, "16 pages moved by mremap, 8 of them unmapped at their new place")
    eq(pages(rows(rep, "touch_user")), 4, "pages kept")
    eq(pages(rows(rep, "big_touch")), 500, "9000 pages moved by user space, 8500 unmapped there by user space")


@test
def exec_drops_the_old_image():
    fx = Fixture("pages", "exec")
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", "0.3")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        time.sleep(1.5)  # the new image is symbolized at the next scan: let a few pass before it exits
        fx.finish()
        eq(tool.finish(), 0, "memleak-ai exit status")
        rep = tool.reports()[-1]
    finally:
        tool.kill()
        fx.kill()
    eq(rows(rep, "gone_touch"), [], "pages of the image exec replaced")
    eq(pages(rows(rep, "touch_user")), 64, "pages the new image wrote")


@test
def copies_after_fork_in_parent_and_child():
    tool, pid = attached_run([os.path.join(FIX, "pages"), "fork"], "-f", "json", "--top", "1000",
                             "--max-overhead", "100", "60")
    child = int(next(line.split()[1] for line in tool.fixture_lines if line.startswith("child ")))
    rep = tool.reports()[-1]
    t = rows(rep, "touch_user", pid)
    eq((pages(t), cow_pages(t)), (32, 0), "parent's first touches (pages, copies)")
    w = rows(rep, "parent_write", pid)
    eq((pages(w), cow_pages(w)), (5, 5), "parent's copies after the fork")
    c = rows(rep, "child_write", child)
    eq((pages(c), cow_pages(c)), (8, 8), "child's copies")
    n = rows(rep, "touch_user", child)
    eq((pages(n), cow_pages(n)), (4, 0), "child's first touches")
    procs = {p["pid"]: p for p in rep["processes"]}
    check(child in procs and "memory" in procs[child], "the child is in processes[] with its memory")


@test
def sampling_weight_across_a_doubling():
    fx = Fixture("pages", "sample")
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", "--max-overhead", "100", "0.3",
                env={"MEMLEAK_AI_TEST_RSS_MAX_RECORDS": "1024"})
    try:
        tool.wait_attached()
        fx.go()
        from harness import read_line
        line = read_line(fx.p.stdout, 30, "region")
        check(line.startswith("region "), f"fixture said {line!r}")
        base = int(line.split()[1], 16)
        time.sleep(2)  # reports at 0.3 s: the 4096 records go over the limit of 1024 and the interval doubles
        fx.go()
        fx.wait_done()
        fx.finish()
        eq(tool.finish(), 0, "memleak-ai exit status")
        rep = tool.reports()[-1]
        every = rep["stats"]["rss_sample_every"]
        check(every >= 4, f"one page in {every} recorded after 4096 pages against a limit of 1024")
        shift = every.bit_length() - 1
        kept = [base + i * PAGE for i in range(2048, 4096)]
        want = sum(1 for p in kept if sampled(p, shift))
        b = rows(rep, "big_touch")
        eq(sum(s["count"] for s in b), want * every, f"records left after unmapping half (one page in {every}), each counting {every}")
        eq(pages(b), want * every, "pages they stand for")
        check(abs(pages(b) - 2048) <= 2048 // 2, f"estimate {pages(b)} pages of 2048")
        check(rep["stats"]["rss"]["pages"] >= 4096 // every, "pages counter")
    finally:
        tool.kill()
        fx.kill()


if __name__ == "__main__":
    sys.exit(main())
