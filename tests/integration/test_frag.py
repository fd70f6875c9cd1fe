"""Fragmentation named: the C heap's free-but-resident memory, read from glibc's chunk headers, is charged to the
in-use blocks just above each free run, and the report ranks their stacks by it."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FIX, attached_run, check, eq, main, no_bpf_left, read_line, test  # noqa: E402

PAIRS = 64
BIG_CHUNK = (100 * 1024 + 8 + 15) & ~15  # glibc: request + 8, rounded up to 16
SMALL_CHUNK = (64 + 8 + 15) & ~15
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # libjemalloc2, installed by scripts/install-deps.sh


def frag_of(rep, pid):
    proc = next((p for p in rep["processes"] if p["pid"] == pid), None)
    check(proc is not None, f"pid {pid} in processes[]")
    check("fragmentation" in proc, f"a fragmentation object: {sorted(proc)}")
    return proc


@test
def alternating_blocks_exact():
    """64 pairs of 100 KiB and 64 B blocks, the 100 KiB ones freed: exactly 64 free resident chunks of
    102,416 bytes, each charged to the 80-byte chunk above it, whose stack is pin_small's; malloc_trim(0) would
    return what it returns in a forked copy of the heap."""
    trims = []

    def measure_trim(fx, tool):
        fx.stdin.write(b"t")
        fx.stdin.flush()
        trims.append(int(read_line(fx.stdout, 30, "the fixture's trim").split()[1]))

    tool, pid = attached_run([os.path.join(FIX, "fragheap")], "-f", "json", "--top", "100", "60",
                             after_tool=measure_trim)
    rep = tool.reports()[-1]
    eq(rep["final"], True, "the final report, made while the target runs")
    proc = frag_of(rep, pid)
    fr = proc["fragmentation"]
    eq(fr["broken_walks"], 0, "no walk stopped")
    eq(fr["capped"], False, "not capped")
    eq(fr["free_bytes"], PAIRS * BIG_CHUNK, "free bytes below the top")
    eq(fr["free_resident_bytes"], PAIRS * BIG_CHUNK, "free but resident bytes")
    eq(fr["unheld_bytes"], 0, "nothing unheld")
    # What malloc_trim(0) would return: the fixture trimmed a forked copy of its heap and measured the drop.
    trim = trims[0]
    check(trim >= PAIRS * 24 * 4096, f"the fixture measured its trim: {trim}")
    eq(fr["trimmable_bytes"], trim, "trimmable bytes: what malloc_trim(0) returned in a copy of the heap")
    eq([(a["main"], a["heaps"], a["free_resident_bytes"], a["trimmable_bytes"]) for a in fr["arenas"]],
       [(True, 1, PAIRS * BIG_CHUNK, trim)], "one arena, the main one, holds it all")
    holders = fr["holders"]
    check(holders, "holder stacks")
    top = holders[0]
    eq(top["frames"][0]["func"], "pin_small", "the top holder stack's allocating function")
    eq((top["charged_bytes"], top["bytes"], top["count"]), (PAIRS * BIG_CHUNK, PAIRS * SMALL_CHUNK, PAIRS),
       "charged bytes, holding chunk bytes, holding blocks")
    eq(fr["charged_bytes"], PAIRS * BIG_CHUNK, "all of it charged to recorded stacks")
    eq(fr["unrecorded"]["charged_bytes"], 0, "nothing charged to blocks from before attach")
    # The charged bytes explain the process's growth too: the 64 B blocks plus the free heap they hold.
    mem = proc["memory"]
    eq(mem["explained_bytes"], min(mem["anon_growth_bytes"], PAIRS * 64 + PAIRS * BIG_CHUNK),
       "explained: the 64 B blocks and the free heap they hold, each byte once")
    check(no_bpf_left(), "nothing left attached")


@test
def alternating_blocks_text():
    tool, pid = attached_run([os.path.join(FIX, "fragheap")], "60")
    lines = [l for l in tool.out.splitlines() if l.startswith("C heap: pid %d " % pid)]
    check(lines, f"a C heap line: {tool.out[-2000:]}")
    check("6.3 MiB free but resident" in lines[-1] and "held by 5.0 KiB of blocks from pin_small" in lines[-1],
          f"the line names the size and the holder: {lines[-1]}")
    check("; malloc_trim(0) would return 6.0 MiB; " in lines[-1], f"... and what malloc_trim(0) returns: {lines[-1]}")
    holds = [l for l in tool.out.splitlines() if l.startswith("  holds 6.3 MiB: 5.0 KiB in 64 libc blocks from pin_small")]
    check(holds, "the ranked holder line")


def arenaheap_rss(env):
    """The arenaheap fixture run without the tool under env: its RssAnon once its threads are done."""
    fx = subprocess.Popen([os.path.join(FIX, "arenaheap")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env={**os.environ, **env})
    try:
        read_line(fx.stdout, 30, "ready")
        fx.stdin.write(b"gr")
        fx.stdin.flush()
        eq(read_line(fx.stdout, 30, "done"), "done", "the fixture's threads are done")
        return int(read_line(fx.stdout, 30, "its rss").split()[1])
    finally:
        fx.kill()
        fx.wait()


@test
def thread_arenas_what_would_return_it():
    """Four threads, each with an arena of its own, leave 6.3 MiB free but resident in it (arenaheap). The
    report's estimates against the same program run again: under MALLOC_ARENA_MAX=1 its RssAnon is lower by
    about the arenas' free memory but the largest's, and under a preloaded jemalloc (decay 0, its steady state
    at once) by about the whole free pages, malloc_trim(0)'s figure; each within 15 %."""
    rss = []

    def measure(fx, tool):
        fx.stdin.write(b"r")
        fx.stdin.flush()
        rss.append(int(read_line(fx.stdout, 30, "the fixture's rss").split()[1]))

    tool, pid = attached_run([os.path.join(FIX, "arenaheap")], "-f", "json", "60", after_tool=measure)
    fr = frag_of(tool.reports()[-1], pid)["fragmentation"]
    eq(sorted(a["heaps"] for a in fr["arenas"] if not a["main"]), [1, 1, 1, 1], "four thread arenas, a heap each")
    one = arenaheap_rss({"MALLOC_ARENA_MAX": "1"})
    jem = arenaheap_rss({"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"})
    print(f"# RssAnon: {rss[0]} as traced, {one} with MALLOC_ARENA_MAX=1, {jem} with jemalloc; estimates "
          f"{fr['arena_max_1_bytes']} and {fr['jemalloc_bytes']}", flush=True)
    saved_one, saved_jem = rss[0] - one, rss[0] - jem
    check(abs(fr["arena_max_1_bytes"] - saved_one) <= 0.15 * saved_one,
          f"MALLOC_ARENA_MAX=1: estimated {fr['arena_max_1_bytes']}, saved {saved_one}")
    check(abs(fr["jemalloc_bytes"] - saved_jem) <= 0.15 * saved_jem,
          f"jemalloc: estimated {fr['jemalloc_bytes']}, saved {saved_jem}")
    eq(fr["jemalloc_bytes"], fr["trimmable_bytes"], "jemalloc's figure is the whole free pages")


if __name__ == "__main__":
    sys.exit(main())
