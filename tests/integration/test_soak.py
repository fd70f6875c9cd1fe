"""Soak: a churning multi-threaded target whose threads come and go, traced for a bounded time. The tool's own
memory and open files stay flat, the kernel's stack table stays bounded, and every allocator event the target
made is accounted for by a counter in the final report."""
import ctypes
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import TOOL, Fail, Fixture, Tool, by_func, check, eq, flaky, main, read_line, test  # noqa: E402

SOAK_S = float(os.environ.get("MEMLEAK_AI_SOAK_S", "25"))  # the long run; the whole file takes about 2x
SOAK_BITS = int(os.environ.get("MEMLEAK_AI_SOAK_BITS", "6"))  # 2^BITS call-chain shapes; 20+: a stream of new stacks
LEAK = (50 * 1000, 50)  # soak_leak(): the only blocks the fixture keeps
CHURN_FUNCS = ("soak_make", "soak_grow", "soak_side", "soak_deep_a", "soak_deep_b")


def _asan():
    try:
        with open(TOOL, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


ASAN = _asan()
# Under ASan, freed memory waits in a quarantine (256 MiB by default) before reuse, so RSS climbs by design;
# a small one keeps use-after-free detection and lets the tool's memory settle.
TOOL_ENV = {"ASAN_OPTIONS": ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=1") if o)} \
    if ASAN else None


def _help_has(opt):
    try:
        r = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return opt in r.stdout + r.stderr


# Every probe stays on: the soak is about the full-tracing path, not the switch to heap-growth mode. Its stack
# bounds count the C heap's chain shapes: the rss layer's faults (thread stacks, new arenas) are left out.
KEEP_PROBES = (("--max-overhead", "100") if _help_has("--max-overhead") else ()) + ("--layers", "libc")


# --- the kernel's cache of stacks handed over, counted through the bpf() system call -------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_NR_BPF = 321  # x86_64
_BPF_MAP_GET_NEXT_KEY = 4
_BPF_MAP_GET_FD_BY_ID = 14


def _bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = _libc.syscall(_NR_BPF, cmd, buf, 128)
    return r, ctypes.get_errno()


def stack_map_id(pid):
    """The id and size of the kernel's cache of stacks handed over ("stacks_sent", an LRU hash) among the BPF maps a
    memleak-ai process holds, or None."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-map":
                continue
            info = dict(l.split(":", 1) for l in open(f"/proc/{pid}/fdinfo/{fd}").read().splitlines() if ":" in l)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        if info.get("map_type") != "9" or "map_id" not in info:  # an LRU hash map
            continue
        r = subprocess.run(["bpftool", "map", "show", "id", info["map_id"], "-j"], capture_output=True, text=True)
        try:
            if json.loads(r.stdout).get("name") == "stacks_sent":
                return int(info["map_id"]), int(info["max_entries"])
        except ValueError:
            continue
    return None


class MapCounter:
    """Counts the keys of a BPF hash map by id (the tool may delete keys meanwhile: a bounded walk)."""

    def __init__(self, map_id, max_entries):
        fd, err = _bpf(_BPF_MAP_GET_FD_BY_ID, struct.pack("<III", map_id, 0, 0))
        if fd < 0:
            raise Fail(f"cannot open BPF map {map_id}: {os.strerror(err)}")
        self.fd, self.max = fd, max_entries

    def count(self):
        """A walk that meets a key deleted under it starts over and counts keys twice (an LRU map churning at every
        event does that often): the least of three walks."""
        return min(self._walk() for _ in range(3))

    def _walk(self):
        key, nxt = ctypes.c_uint64(), ctypes.c_uint64()
        n, have = 0, False
        while n <= 4 * self.max:
            attr = struct.pack("<IIQQ", self.fd, 0, ctypes.addressof(key) if have else 0, ctypes.addressof(nxt))
            r, _ = _bpf(_BPF_MAP_GET_NEXT_KEY, attr)
            if r < 0:
                break
            key.value, have = nxt.value, True
            n += 1
        return n

    def close(self):
        os.close(self.fd)


def tool_prog_ids(pid):
    """The ids of the BPF programs a memleak-ai process holds, through its program and link files."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") not in ("anon_inode:bpf-prog", "anon_inode:bpf_link"):
                continue
            for l in open(f"/proc/{pid}/fdinfo/{fd}").read().splitlines():
                if l.startswith("prog_id:"):
                    ids.add(int(l.split()[1]))
        except OSError:
            continue
    return ids


def progs_gone(ids, timeout=10):
    """True once none of these programs is loaded (the kernel frees one a little after its last holder exits).
    Other memleak-ai runs on the machine (tests in parallel) do not count."""
    end = time.time() + timeout
    while True:
        r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
        left = ids & {p.get("id") for p in json.loads(r.stdout or "[]")}
        if not left:
            return True
        if time.time() > end:
            return False
        time.sleep(0.1)


# --- the tool, watched at every report -------------------------------------------------------------------------

def proc_status(pid):
    """VmRSS and RssAnon in KiB, and the number of open files, of a live process; None once it is gone."""
    try:
        st = open(f"/proc/{pid}/status").read()
        kb = {l.split(":")[0]: int(l.split()[1]) for l in st.splitlines() if l.startswith(("VmRSS:", "RssAnon:"))}
        return kb["VmRSS"], kb["RssAnon"], len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, KeyError, ValueError, IndexError):
        return None


class WatchedTool(Tool):
    """memleak-ai -f json whose reports are read as they come; at each one, the tool's memory, open files and the
    kernel stack table's size are sampled (the tool has just read its tables and written the report)."""

    def __init__(self, *args, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.args = [TOOL, *args]
        self.p = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.stderr_lines = []
        self._out = []
        self.samples = []  # (time, report, (vmrss_kib, rssanon_kib, fds) or None, stack-table entries or None)
        self.stacks = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def wait_attached(self, timeout=20):
        super().wait_attached(timeout)
        found = stack_map_id(self.p.pid)
        check(found is not None, "the tool's cache of stacks handed over among its open BPF maps")
        self.stacks = MapCounter(*found)
        self.prog_ids = tool_prog_ids(self.p.pid)
        check(self.prog_ids, "the tool's BPF programs among its open files")

    def _read(self):
        for line in iter(self.p.stdout.readline, b""):
            self._out.append(line)
            try:
                rep = json.loads(line)
            except ValueError:
                continue
            st = proc_status(self.p.pid)
            n = self.stacks.count() if self.stacks and st else None
            self.samples.append((time.time(), rep, st, n))

    def finish(self, timeout=30):
        rc = super().finish(timeout)  # the reader is done once this returns
        self._close_map()
        return rc

    def kill(self):
        super().kill()
        self._reader.join(5)
        self._close_map()

    def _close_map(self):
        if self.stacks:
            self.stacks.close()
            self.stacks = None


class Soak(Fixture):
    """The soak fixture: 'ready PID'; a byte starts the churn, a second one stops it: 'done ALLOCS FREES THREADS'."""

    def __init__(self, *args):
        super().__init__("soak", *map(str, args))

    def byte(self, b=b"g"):
        self.p.stdin.write(b)
        self.p.stdin.flush()

    def stop(self):
        """Stop the churn; the fixture's own count of its successful allocating calls, frees and threads ended."""
        self.byte(b"s")
        line = read_line(self.p.stdout, 60, "soak done")
        w = line.split()
        check(len(w) == 4 and w[0] == "done", f"fixture said {line!r}")
        return int(w[1]), int(w[2]), int(w[3])


def cpu_s(pid):
    """User + system CPU seconds a process has used so far."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def soak_run(seconds, fixture_args, *tool_args, interval="0.5"):
    """Trace the soak fixture while it churns for `seconds`, stop it, take a report of the quiescent target, let it
    exit. Returns (tool, samples, final report, fixture counts)."""
    fx = Soak(*fixture_args)
    tool = WatchedTool("-p", str(fx.pid), "-f", "json", "--top", "1000", *KEEP_PROBES, *tool_args, interval,
                       env=TOOL_ENV)
    try:
        tool.wait_attached()
        fx.byte()
        end = time.time() + seconds
        while time.time() < end:
            check(fx.p.poll() is None, f"the target died during the churn (status {fx.p.returncode})")
            check(tool.p.poll() is None, f"memleak-ai stopped during the churn (status {tool.p.returncode})")
            time.sleep(0.2)
        counts = fx.stop()
        # The target is quiescent now (main blocks on stdin): one more periodic report, then its exit ends the run.
        n = len(tool.samples)
        end = time.time() + 10 * float(interval) + 5
        while len(tool.samples) < n + 1 and time.time() < end:
            time.sleep(0.05)
        fx.finish()
        eq(tool.finish(), 0, "memleak-ai exit status")
        reps = tool.reports()
        check(reps and reps[-1]["final"], "a final report")
        return tool, tool.samples, reps[-1], counts
    finally:
        tool.kill()
        fx.kill()


def check_accounting(rep, counts, what):
    """Every event the target made is in a counter: the identities between them must hold in the final report."""
    fa, ff, _ = counts
    ev, dr = rep["stats"]["events"], rep["stats"]["dropped"]
    races = ev["realloc_races"]
    lib = rep["stats"]["layers"]["libc"]
    eq((lib["allocs"], lib["frees"]), (ev["allocs"], ev["frees"]), f"{what}: libc layer's counts are all the counts")
    eq(ev["failed_allocs"], 0, f"{what}: failed allocations")
    eq(dr["lost_return"], 0, f"{what}: lost returns (threads exit between calls, never inside one)")
    eq(dr["thread_state"], 0, f"{what}: per-thread state always available")
    # Releases: each one found its record (matched) or was of a block never recorded (unknown: from before attach,
    # dropped, or already released: glibc's thread exit flushes its tcache through free). Only a release whose
    # record a racing realloc took first, which needs a realloc race, is in neither.
    lost = ev["frees"] - ev["frees_matched"] - ev["frees_unknown"]
    check(0 <= lost <= races, f"{what}: frees {ev['frees']} = matched {ev['frees_matched']} + unknown "
                              f"{ev['frees_unknown']} (+ at most {races} lost to realloc races), off by {lost}")
    # Allocations: each one is outstanding now, was released (matched), was dropped (table full), was outside the
    # size filter, had its record taken over (another allocation got its address before its release was seen:
    # a realloc moved the block and another thread got the old address first), or went with its process
    # (exit, exec). Exactly.
    recorded = (ev["allocs"] - dr["allocs_table_full"] - ev["filtered"] - ev["frees_matched"] - ev["takeovers"] -
                ev["forgotten"])
    out = rep["totals"]["libc"]["count"]
    eq(out, recorded, f"{what}: outstanding = allocs - table full - filtered - matched - taken over - forgotten "
                      f"({ev}, {dr})")
    # The fixture's own count: every call it made was seen; the few more are the C library's own (thread set-up).
    check(fa <= ev["allocs"] <= fa + 1000, f"{what}: allocs seen {ev['allocs']}, the fixture made {fa}")
    extra = ev["allocs"] - fa
    print(f"# {what}: fixture {fa} allocs {ff} frees; seen allocs {ev['allocs']} (+{extra}) frees {ev['frees']} = "
          f"matched {ev['frees_matched']} + unknown {ev['frees_unknown']} (+{lost}); outstanding {out} = {recorded}"
          f" - {recorded - out}; realloc races {races}; takeovers {ev['takeovers']}; dropped {dr}", flush=True)
    if dr["allocs_table_full"]:
        check(ff - races <= ev["frees_matched"] + ev["frees_unknown"],
              f"{what}: releases seen {ev['frees_matched']} + {ev['frees_unknown']}, the fixture made {ff}")
    else:
        # Every release the fixture made matched, less those lost to a realloc race or a takeover (the same race
        # seen from the other side: its record replaced before the release came); more only for the C library's.
        check(ff - races - ev["takeovers"] <= ev["frees_matched"] <= ff + extra,
              f"{what}: releases matched {ev['frees_matched']}, the fixture made {ff} (realloc races {races}, "
              f"takeovers {ev['takeovers']})")
    return extra


def check_flat(name, xs, slack_kib=1024, climb_kib=128):
    """After a warm-up quarter: the last quarter's median within slack of the second quarter's, and no steady
    climb (a growth made of many small steps rather than one allocator step). ASan's own allocator settles
    in small steps over a minute or so (its size-class regions and metadata): a climb of up to 1 MiB is its."""
    if ASAN:
        climb_kib = max(climb_kib, 1024)
    q2, q4 = quarters(xs)
    check(statistics.median(q4) <= statistics.median(q2) + slack_kib,
          f"tool {name} grows: second-quarter median {statistics.median(q2)} KiB, last-quarter "
          f"{statistics.median(q4)} KiB")
    post = xs[max(1, len(xs) // 4):]
    steps = sum(1 for a, b in zip(post, post[1:]) if b > a)
    check(not (steps >= 6 and post[-1] - post[0] >= climb_kib),
          f"tool {name} climbs in {steps} steps from {post[0]} to {post[-1]} KiB after the warm-up: {post}")


def quarters(xs):
    """The samples after a warm-up quarter, split into the second quarter and the last quarter."""
    q = max(1, len(xs) // 4)
    return xs[q:2 * q], xs[-q:]


@test
def soak_tool_memory_files_and_stack_table_stay_flat():
    """Four worker threads at a time, each replaced after 1500 rounds of malloc/realloc/calloc/posix_memalign/free
    handing blocks to each other, traced for the soak's length at 0.5 s reports."""
    tool, samples, final, counts = soak_run(SOAK_S, (SOAK_BITS,))
    live = [(t, s, n) for t, r, s, n in samples if s is not None and not r["final"]]
    check(len(live) >= SOAK_S / 0.5 * 0.6, f"reports kept coming: {len(live)} in {SOAK_S:.0f} s")
    check(counts[2] >= 40, f"threads created and destroyed all along: {counts[2]}")
    rss = [s[0] for _, s, _ in live]
    anon = [s[1] for _, s, _ in live]
    fds = [s[2] for _, s, _ in live]
    nst = [n for _, _, n in live]
    print(f"# soak {SOAK_S:.0f} s: {len(live)} reports, {counts[2]} threads, {counts[0]} allocs; tool VmRSS "
          f"{rss[0]}..{max(rss)} KiB (last {rss[-1]}), RssAnon {anon[0]}..{max(anon)} KiB (last {anon[-1]}), "
          f"fds {min(fds)}..{max(fds)}, stack table {min(nst)}..{max(nst)} entries", flush=True)
    for name, xs in (("VmRSS", rss), ("RssAnon", anon)):
        check_flat(name, xs)
    # Files: the rescans open and close /proc files, so a sample may catch one in flight.
    q2, q4 = quarters(fds)
    check(max(q4) <= min(q2) + 2 and statistics.median(q4) <= statistics.median(q2),
          f"tool's open files grow: {fds}")
    # The kernel's cache and the tool's store: 2^BITS chain shapes and a few other sites, whatever the threads.
    check(max(nst) <= min(2 ** SOAK_BITS + 32, 65536), f"stack cache entries: {nst}")
    check(final["stats"]["stack_store"]["stacks"] <= 2 ** SOAK_BITS + 32,
          f"stacks kept: {final['stats']['stack_store']}")
    if SOAK_BITS <= 10:
        q2, q4 = quarters(nst)
        check(max(q4) <= max(q2) + 8, f"stack table keeps growing: {nst}")
    # Accounting in the report of the stopped target.
    extra = check_accounting(final, counts, "soak")
    dr = final["stats"]["dropped"]
    eq(dr["allocs_table_full"], 0, "no allocation dropped with the default table")
    if 2 ** SOAK_BITS < 4096:
        eq(dr["stack_unavailable"], 0, "no stack dropped with the default table")
    f = by_func(final)
    eq(f.get("soak_leak"), LEAK, "the known leak, exactly")
    for fn in CHURN_FUNCS:
        check(fn not in f, f"{fn}: every block handed between threads was matched: {f.get(fn)}")
    check(final["totals"]["libc"]["count"] - LEAK[1] <= extra,
          f"outstanding beyond the leak only the C library's own: {final['totals']['libc']}, {extra} extra allocs")


@test
def tiny_tables_degrade_with_counted_drops():
    """--max-allocs 16 (a 1024-slot table) against 2048-4096 blocks in flight, --max-stacks 16 against 256 call
    chains taken in turn (each comes back after 255 others, so the 16-entry cache of stacks already handed over
    has always evicted it): drops are counted, reports keep coming, the target keeps running; a stack the tiny
    cache evicted is handed over again, so none is lost. (A stream of stacks never seen before, the hot ones
    among them kept by the LRU, may go without any eviction that matters: it cannot show the hand-over again.)"""
    tool, samples, final, counts = soak_run(6, (8, 4096), "--max-allocs", "16", "--max-stacks", "16",
                                            interval="0.25")
    live = [(t, r, n) for t, r, s, n in samples if s is not None]
    times = [t for t, _, _ in live]
    check(len(live) >= 12, f"reports kept coming: {len(live)} in 6 s")
    gaps = [b - a for a, b in zip(times, times[1:])]
    check(max(gaps) < 3, f"no stall between reports: longest gap {max(gaps):.1f} s")
    nst = [n for _, _, n in live if n is not None]
    # A key walk over a map that changes under it can count a key twice: bounded, not exact.
    check(nst and max(nst) <= 2 * 16, f"stack cache within --max-stacks 16: {nst}")
    dr = final["stats"]["dropped"]
    check(dr["allocs_table_full"] > 0, f"a 1024-slot table overflows: {dr}")
    eq(dr["stack_unavailable"], 0, "no stack lost with a 16-entry cache")
    st = final["stats"]["stack_store"]
    # 256 shapes plus the fixture's few other sites; every shape taken several times by each worker thread.
    check(256 <= st["stacks"] <= 256 + 32 and st["received"] > 2 * st["stacks"] and st["collisions"] == 0,
          f"every chain kept though the cache holds 16, evicted ones sent again: {st}")
    check(counts[0] > 10000 and counts[2] > 4, f"the target kept running: {counts}")
    check_accounting(final, counts, "tiny tables")
    check(final["totals"]["libc"]["count"] <= 1024, f"no more recorded than the table holds: {final['totals']}")
    check(progs_gone(tool.prog_ids), "the tool's BPF programs unloaded")


@test
def target_killed_mid_churn():
    """SIGKILL while threads are inside malloc and free: a final report, exit 0, nothing left in the kernel."""
    fx = Soak(4)
    tool = WatchedTool("-p", str(fx.pid), "-f", "json", *KEEP_PROBES, "0.5", env=TOOL_ENV)
    try:
        tool.wait_attached()
        fx.byte()
        time.sleep(3)
        t0 = cpu_s(fx.pid)
        time.sleep(0.3)
        check(cpu_s(fx.pid) > t0, "the target was churning")
        os.kill(fx.pid, signal.SIGKILL)
        fx.p.wait()
        t_kill = time.time()
        eq(tool.finish(timeout=15), 0, "exit status")
        check(time.time() - t_kill < 10, "memleak-ai ended promptly after its target")
        reps = tool.reports()
        check(reps and reps[-1]["final"], "a final report")
        check(reps[-1]["stats"]["events"]["allocs"] > 1000, "events were seen")
        check(any(f"pid {fx.pid} exited" in l for l in tool.stderr_lines), f"exit noticed: {tool.stderr_lines}")
        check(progs_gone(tool.prog_ids), "the tool's BPF programs unloaded")
    finally:
        tool.kill()
        fx.kill()


@test
@flaky("issue 37: in CI (stop 50, shared part) the new image's soak_leak row was missing from the final report; "
       "16 runs here pass, quiet and beside stress-ng; the failure now prints the rows to find why")
def exec_from_a_thread_mid_call():
    """A worker thread runs execve from a signal handler (most often between an allocator's entry and its return)
    while the other threads churn: the new image is traced from a clean slate, with no lost return nor call taken
    for a nested one, and the old image's records are gone."""
    fx = Soak(4)
    tool = WatchedTool("-p", str(fx.pid), "-f", "json", "--top", "1000", "-v", *KEEP_PROBES, "0.5", env=TOOL_ENV)
    try:
        tool.wait_attached()
        fx.byte()
        time.sleep(2)
        fx.byte(b"x")
        line = read_line(fx.p.stdout, 10, "soak ready after exec")
        eq(line, f"ready {fx.pid}", "the new image, same pid")
        end = time.time() + 20
        while not any(f"pid {fx.pid} ran exec: its new image is probed" in l for l in tool.stderr_lines):
            tool.stderr_lines.append(read_line(tool.p.stderr, end - time.time(), "the new image probed"))
        time.sleep(1)
        before = len(tool.samples)
        seen_at_exec = tool.samples[-1][1]["stats"]["events"]["allocs"]
        fx.byte()
        time.sleep(2)
        counts = fx.stop()
        end = time.time() + 10
        while len(tool.samples) < before + 2 and time.time() < end:
            time.sleep(0.05)
        fx.finish()
        eq(tool.finish(), 0, "exit status")
        final = tool.reports()[-1]
        check(final["final"], "a final report")
        ev, dr = final["stats"]["events"], final["stats"]["dropped"]
        check(ev["allocs"] >= seen_at_exec + counts[0],
              f"the new image is traced: {counts[0]} allocations made after the exec, the tool's count went from "
              f"{seen_at_exec} to {ev['allocs']}")
        eq(dr["lost_return"], 0, "no return lost: the exec'ing thread's call in flight went with its old image")
        eq(ev["nested_calls"], 0, "no call of the new image taken for one nested in a stale call")
        eq(dr["thread_state"], 0, "per-thread state")
        f = by_func(final)
        bare = [(s["bytes"], s["count"], s["stack_id"] if "stack_id" in s else None) for s in final["stacks"]
                if s["layer"] == "libc" and not s["frames"]]
        eq(f.get("soak_leak"), LEAK, f"the new image's leak only: the old image's records went with it (rows by "
                                     f"function: {f}; rows without frames: {bare}; {len(tool.samples) - before} "
                                     f"reports after the byte; dropped {dr})")
        for fn in CHURN_FUNCS:
            check(fn not in f, f"{fn}: nothing of the churn outstanding: {f.get(fn)}")
        # The old image's records are dropped by user space, in no counter: only an inequality here.
        out = final["totals"]["libc"]["count"]
        check(out <= ev["allocs"] - dr["allocs_table_full"] - ev["frees_matched"], f"outstanding {out}: {ev}")
        check(progs_gone(tool.prog_ids), "the tool's BPF programs unloaded")
    finally:
        tool.kill()
        fx.kill()


if __name__ == "__main__":
    sys.exit(main())
