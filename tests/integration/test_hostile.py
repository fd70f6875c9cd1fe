"""A hostile target: a program that corrupts its own heap metadata and keeps leaking is traced at default
settings and at full fidelity. The tool keeps reporting, its other rows stay right, the heap walk says where it
stopped, how much it left and why, and what the target wrote never grows the tool's own heap."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FIX, attached_run, check, eq, main, no_bpf_left, test  # noqa: E402

KEPT, LEAKS, LEAK = 4096, 200, 4000
CHUNK = (64 + 8 + 15) & ~15  # a kept 64-byte block's chunk
ANON_CEILING = 64 << 20  # the tool's own heap, whatever the target wrote; the BPF maps it maps are apart


def traced(mode, *budget):
    """The fixture in mode, attached with a report a second: (text, JSON reports, pid, the tool's RssAnon)."""
    rss = []

    def watch(fx, tool):
        time.sleep(LEAKS * 0.01 + 1)  # the leaks made and a report or two walked, the fixture not yet done
        for line in open(f"/proc/{tool.p.pid}/status"):
            if line.startswith("RssAnon:"):
                rss.append(int(line.split()[1]) << 10)

    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "r.json")
        tool, pid = attached_run([os.path.join(FIX, "hostile"), mode], *budget, "--json", js, "1",
                                 after_go=watch)
        reps = [json.loads(l) for l in open(js) if l.strip()]
    check(len(reps) >= 2, f"{mode}: reports kept coming: {len(reps)}")
    return tool.out, reps, pid, rss[0]


def proc(rep, pid):
    return next(p for p in rep["processes"] if p["pid"] == pid)


def leak_rows(rep):
    return [s for s in rep["stacks"] if s["layer"] == "libc" and s["frames"] and
            s["frames"][0].get("func") == "leak_step"]


def check_walk_stopped(mode, text, rep, pid):
    """The walk stopped at the bent chunk, in the middle of the kept blocks, twice alike: corrupt. What it
    could not walk is the rest of the kept blocks and the leaked ones above them, at least."""
    fr = proc(rep, pid).get("fragmentation")
    check(fr, f"{mode}: a fragmentation object: {sorted(proc(rep, pid))}")
    eq((fr["broken_walks"], fr["corrupt_walks"], fr["unreadable_walks"]), (1, 1, 0),
       f"{mode}: one walk stopped, at a corrupt header")
    check(fr["unwalked_bytes"] >= KEPT // 2 * CHUNK + LEAKS * LEAK,
          f"{mode}: the bytes past the bent chunk count as not walked: {fr['unwalked_bytes']}")
    lines = [l for l in text.splitlines() if l.startswith(f"C heap: pid {pid} ")]
    check(lines and "1 heap walk stopped, " in lines[-1] and " not walked: 1 at a corrupt chunk header" in lines[-1],
          f"{mode}: the text says where the walk stopped and why: {lines[-1:]}")


def check_leak(mode, rep, exact):
    rows = leak_rows(rep)
    if exact:
        eq([(s["bytes"], s["count"]) for s in rows], [(LEAKS * LEAK, LEAKS)], f"{mode}: leak_step's row, exact")
    else:
        check(rows, f"{mode}: leak_step's row: {[(s['layer'], s['bytes']) for s in rep['stacks'][:5]]}")


@test
def corrupt_chunk_sizes_full_fidelity():
    """A size of 1 TiB and a size of 0 on a kept chunk: the leak is exact, the walk names the corrupt header."""
    for mode in ("huge", "zero"):
        text, reps, pid, rss = traced(mode)
        check_leak(mode, reps[-1], True)
        check_walk_stopped(mode, text, reps[-1], pid)
        check(rss < ANON_CEILING, f"{mode}: the tool's RssAnon {rss} under {ANON_CEILING}")
    check(no_bpf_left(), "nothing left attached")


@test
def corrupt_chunk_sizes_default_settings():
    for mode in ("huge", "zero"):
        text, reps, pid, rss = traced(mode, "--max-overhead", "2")
        check_leak(mode, reps[-1], False)
        check_walk_stopped(mode, text, reps[-1], pid)
        check(rss < ANON_CEILING, f"{mode}: the tool's RssAnon {rss} under {ANON_CEILING}")


@test
def self_pointing_first_words():
    """4,096 kept blocks whose first word points at the block itself: read as vtables and as free-list links,
    they lead nowhere; the walk is whole and the leak exact."""
    for budget in ((), ("--max-overhead", "2")):
        text, reps, pid, rss = traced("self", *budget)
        check_leak("self", reps[-1], not budget)
        fr = proc(reps[-1], pid)["fragmentation"]
        eq((fr["broken_walks"], fr["unwalked_bytes"], fr["capped"]), (0, 0, False), f"self {budget}: the walk is whole")
        check(rss < ANON_CEILING, f"self: the tool's RssAnon {rss} under {ANON_CEILING}")


if __name__ == "__main__":
    main()
