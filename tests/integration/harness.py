"""Integration-test helpers: run fixtures and memleak-ai for real, collect its reports, count results."""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("MEMLEAK_AI_BIN") or os.path.join(ROOT, "memleak-ai")  # the ASan build in `make test`
FIX = os.path.join(ROOT, "build", "tests")
# PyTorch's OpenMP threads spin between parallel regions by default: three test files at a time on two CPUs, the
# spinning took a fifth of the CPU (perf) and slowed every other target. PASSIVE keeps the threads and their work,
# and lets them sleep when idle (the diff test alone: 145 CPU-s instead of 183). A test may still set its own.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_tests = []


def test(fn):
    _tests.append(fn)
    return fn


# The second pass of `make test` runs the tool built with ASan (MEMLEAK_AI_BIN): tests whose code paths the
# other tests already take under ASan, and whose cost is their workload (PyTorch, Chromium, other
# allocators), run in the first pass only.
UNDER_ASAN = bool(os.environ.get("MEMLEAK_AI_BIN"))


def test_no_asan(fn):
    if not UNDER_ASAN:
        _tests.append(fn)
    return fn


def alone(fn):
    """Under @test: a test whose outcome rests on the share of the machine it gets: on the tool's measure of its
    own cost share (the --max-overhead budget decides what is traced) or on how fast the parts of its target run
    against each other. `make test` runs these after every other test (three test files at a time), one file
    at a time (a file's shares at once on an idle machine): MEMLEAK_AI_TEST_PART=alone runs only these, =shared
    only the others, =all (or unset) both."""
    fn.alone = True
    return fn


def beside(fn):
    """Under @test, in a file whose shared tests run one after another (the workloads'): a test that may run beside
    that file's others, in a job of its own, as the other files' tests do: it checks exact accounting, not what
    timing or the machine's share decides. MEMLEAK_AI_TEST_PART=beside runs only these; =shared leaves them out."""
    fn.beside = True
    return fn


def flaky(why):
    """Under @test: a test known to fail now and then for a reason not yet fixed (why, with its issue). A failure
    is printed with the reason and the test runs once more; it passes only if that run passes. Every retry is
    in the output ("# retried: ..."), and the list of such tests is in the closing notes until the cause goes."""
    def mark(fn):
        fn.flaky = why
        return fn
    return mark


PART = os.environ.get("MEMLEAK_AI_TEST_PART")
if PART not in (None, "", "all", "alone", "shared", "beside"):
    sys.exit(f"harness: MEMLEAK_AI_TEST_PART must be alone, shared, beside or all, not {PART!r}")
PART = None if PART in (None, "", "all") else PART


def takes(seconds):
    """Under @test: about how long the test runs on a quiet machine, for MEMLEAK_AI_TEST_SHARD (30 s unmarked)."""
    def mark(fn):
        fn.takes = seconds
        return fn
    return mark


def _shard_spec():
    """MEMLEAK_AI_TEST_SHARD=K/N: run the K-th of N shares of the tests this run selects (`make test` splits the
    workloads' @alone tests in two, to run at once on an idle machine). Unset: every test."""
    spec = os.environ.get("MEMLEAK_AI_TEST_SHARD") or ""
    if not spec:
        return None
    k, _, n = spec.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        sys.exit(f"harness: MEMLEAK_AI_TEST_SHARD must be K/N with 1 <= K <= N, not {spec!r}")
    return int(k), int(n)


SHARD = _shard_spec()


def _in_shard(chosen):
    """The tests of shard K: the longest first, each to the share with the least time so far; they run in file order."""
    if not SHARD:
        return chosen
    k, n = SHARD
    load, mine = [0.0] * n, set()
    for fn in sorted(chosen, key=lambda f: -getattr(f, "takes", 30)):
        i = load.index(min(load))
        load[i] += getattr(fn, "takes", 30)
        if i == k - 1:
            mine.add(fn)
    return [fn for fn in chosen if fn in mine]


class Fail(Exception):
    pass


class Skip(Exception):
    """A test that cannot run here (what it needs is missing): counted and printed as a skip, never a pass."""


def skip(why):
    raise Skip(why)


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def eq(got, want, what):
    if got != want:
        raise Fail(f"{what}: got {got!r}, want {want!r}")


def pieces(f, timeout, size):
    """What a pipe gives, up to size bytes a read, for at most timeout seconds; b"" last, at its end."""
    end = time.time() + timeout
    fd = f.fileno()
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
        if not r:
            return
        c = os.read(fd, size)
        yield c
        if not c:
            return


def read_line(f, timeout, what, left=None):
    """One line from a pipe, or Fail after timeout seconds. A byte a read, so that nothing past the line leaves
    the pipe for its other readers; with left (a bytearray this pipe's only reader keeps), 64 KiB a read and the
    bytes past the line kept in left: the browser's findings are a megabyte long."""
    buf = bytearray()
    if left is not None:
        n = left.find(b"\n")
        if n >= 0:
            line = bytes(left[:n])
            del left[:n + 1]
            return line.decode(errors="replace")
        buf, left[:] = bytearray(left), b""
    for c in pieces(f, timeout, 1 if left is None else 65536):
        if not c:
            break
        n = c.find(b"\n")
        if n >= 0:
            if left is not None:
                left += c[n + 1:]
            return (buf + c[:n]).decode(errors="replace")
        buf += c
    raise Fail(f"timed out waiting for {what} (got {bytes(buf[-300:])!r})")


def _cpu_ticks(pid):
    """User plus system clock ticks of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def read_start_line(proc, idle_s, what, cap_s=600):
    """A starting process's first line, waited for as long as its start makes progress: Fail once it has used no
    CPU for idle_s seconds, or has ended, or after cap_s. `import torch` takes 5 s alone and over 60 beside
    stress-ng and three test jobs (a fixture that said nothing in 60 s, 2026-11-30)."""
    buf, t0 = bytearray(), time.time()
    last, busy_at = _cpu_ticks(proc.pid), t0
    while time.time() - t0 < cap_s:
        for c in pieces(proc.stdout, 1.0, 1):  # a second's bytes, then the CPU check
            if not c:
                raise Fail(f"timed out waiting for {what}: it ended (got {bytes(buf[-300:])!r})")
            if c == b"\n":
                return buf.decode(errors="replace")
            buf += c
        now, ticks = time.time(), _cpu_ticks(proc.pid)
        if ticks is None:
            break
        if ticks != last:
            last, busy_at = ticks, now
        elif now - busy_at > idle_s:
            raise Fail(f"timed out waiting for {what}: no CPU used for {idle_s} s (got {bytes(buf[-300:])!r})")
    raise Fail(f"timed out waiting for {what} (got {bytes(buf[-300:])!r})")


def drain(f, what, timeout=10):
    """The rest of a pipe whose writer has exited, up to its end. A process the writer left behind that still
    holds the pipe (a forked child that never ended) would make a plain read wait forever: after timeout seconds
    it is named, ended (only a process this test file started), and the test fails."""
    buf = b""
    for c in pieces(f, timeout, 65536):
        if not c:
            return buf
        buf += c
    ino = os.fstat(f.fileno()).st_ino
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(pid) != os.getpid() and _ours(pid) and any(
                    os.readlink(f"/proc/{pid}/fd/{x}").startswith("pipe:") and os.stat(f"/proc/{pid}/fd/{x}").st_ino == ino
                    for x in os.listdir(f"/proc/{pid}/fd")):
                with open(f"/proc/{pid}/comm") as c:
                    left.append((int(pid), c.read().strip()))
        except OSError:
            continue
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    raise Fail(f"{what} still open {timeout} s after it exited, held by {left or 'an unknown process'}: "
               f"{buf[-300:].decode(errors='replace')!r}")


class Fixture:
    """A fixture process that waits on stdin: 'ready' -> go -> 'done' -> EOF exits."""

    def __init__(self, prog, *args, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.p = subprocess.Popen([os.path.join(FIX, prog), *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=e)
        line = read_line(self.p.stdout, 10, f"{prog} ready")
        check(line.startswith("ready"), f"fixture said {line!r}")
        self.pid = self.p.pid

    def go(self):
        self.p.stdin.write(b"g")
        self.p.stdin.flush()

    def wait_done(self):
        line = read_line(self.p.stdout, 30, "fixture done")
        check(line == "done", f"fixture said {line!r}")

    def finish(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=10)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def exact(args):
    """Tests count exact bytes and calls: every probe stays on (--max-overhead 100) unless a test sets a budget."""
    args = list(args)
    if "--max-overhead" in args or not any(a in ("-p", "-c") for a in args):
        return args
    return ["--max-overhead", "100", *args]


def threads_of(pid):
    """Each thread of pid: name, state, kernel wait channel and system call (what a hung process waits on)."""
    out = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            d = f"/proc/{pid}/task/{tid}"
            comm = open(d + "/comm").read().strip()
            state = open(d + "/stat").read().rsplit(")", 1)[1].split()[0]
            wchan = open(d + "/wchan").read().strip()
            sc = open(d + "/syscall").read().split()[0]
            out.append(f"{tid} {comm} {state} wchan={wchan or '-'} syscall={sc}")
        except OSError:
            continue
    return out


def wait_or_tell(p, timeout, what="memleak-ai"):
    """p.wait(timeout); past it, a failure that says what each of p's threads waits on."""
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            threads = threads_of(p.pid)
        except OSError:
            threads = []
        raise Fail(f"{what} did not exit within {timeout} s; its threads: {threads}") from None


class Tool:
    """memleak-ai running in the background; stderr is watched for the 'attached' notice."""

    def __init__(self, *args, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.args = [TOOL, *exact(args)]
        self.p = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.stderr_lines = []
        # Reports are drained as they come, a line at a time: a full pipe would block the tool, not the test, and
        # lines() tells a test the tool's progress.
        self._out = []
        self._parsed, self._so_far = 0, []  # reports_so_far(): how many lines are parsed, and their reports
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in iter(self.p.stdout.readline, b""):
            self._out.append(line)

    def lines(self):
        """The lines the tool has written to stdout so far (with -f json, its reports)."""
        return len(self._out)

    def reports_so_far(self):
        """With -f json, the reports written so far, the tool still running: a test waits on what they say. Each
        line is parsed once: a test polls while it measures the tool's cost, and torch reports are large."""
        new = self._out[self._parsed:]
        self._parsed += len(new)
        self._so_far += [json.loads(line) for line in new if line.strip()]
        return list(self._so_far)

    def wait_attached(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            line = read_line(self.p.stderr, end - time.time(), "memleak-ai attached")
            self.stderr_lines.append(line)
            if "attached to pid" in line:
                return
        raise Fail("memleak-ai did not attach")

    def finish(self, timeout=30):
        wait_or_tell(self.p, timeout)
        err = drain(self.p.stderr, "memleak-ai's stderr")
        self.stderr_lines += err.decode(errors="replace").splitlines()
        self._reader.join(timeout)
        self.out = b"".join(self._out).decode(errors="replace")
        return self.p.returncode

    def reports(self):
        reps = [json.loads(line) for line in self.out.splitlines() if line.strip()]
        check_no_null_python_frame(reps)
        return reps

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def check_no_null_python_frame(reps):
    """No output ever carries a null Python frame: one that could not be decoded says why. Every JSON report
    read by a test is checked: its rows, and its peak's."""
    bad = [(r.get("seq"), f) for r in reps if isinstance(r, dict) for s in r.get("stacks", []) +
           r.get("peak", {}).get("stacks", []) for f in s.get("frames", [])
           if f.get("kind") == "python" and (f.get("func") is None or f.get("file") is None)]
    eq(bad[:3], [], "no null Python frame in any report")


def attached_run(argv, *tool_args, before_go=None, after_go=None, after_tool=None, ready_timeout=60, done_timeout=120):
    """Start a fixture speaking the ready / go / done protocol on stdin and stdout, attach memleak-ai to it
    with -p, let it run, stop the tool with SIGINT once the fixture is done, and check both ended well.
    before_go(fx, tool) runs once the tool is attached, before go; after_go(fx, tool) between go and done (more
    handshakes); after_tool(fx, tool) once the tool has ended, the fixture still running. Returns (tool, fixture
    pid); the fixture's further output lines are in tool.fixture_lines. ready_timeout: how long the fixture's start may use no CPU before its "ready"."""
    fx = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = read_start_line(fx, ready_timeout, "fixture ready")
        check(line.startswith("ready"), f"fixture said {line!r}")
        tool = Tool("-p", str(fx.pid), *tool_args)
        tool.fixture_lines = []
        try:
            tool.wait_attached()
            if before_go:
                before_go(fx, tool)
            fx.stdin.write(b"g")
            fx.stdin.flush()
            if after_go:
                after_go(fx, tool)
            while True:
                line = read_line(fx.stdout, done_timeout, "fixture done")
                if line == "done":
                    break
                tool.fixture_lines.append(line)
            tool.p.send_signal(signal.SIGINT)
            eq(tool.finish(), 0, "memleak-ai exit status")
            check(fx.poll() is None, "the target is still running")
            if after_tool:
                after_tool(fx, tool)
            return tool, fx.pid
        finally:
            tool.kill()
    finally:
        for pid in descendants(fx.pid):  # DataLoader workers: else they linger until they notice
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        fx.kill()
        fx.wait()


def descendants(pid):
    """The pids of a process's children, theirs, and so on."""
    out = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for c in f.read().split():
                    out |= {int(c)} | descendants(int(c))
    except OSError:
        pass
    return out


DEBIAN_PY = "/usr/bin/python3.11"  # libpython linked into the executable; has python3-torch (1.13)
TORCH_SCRIPT = os.path.join(ROOT, "tests", "fixtures", "torch_loop.py")
# The PyTorch people install: PyPI's torch in build/venv/3.12 (scripts/make-venv.sh, run by make test).
TORCH_PY = os.environ.get("MEMLEAK_AI_TORCH_PY") or os.path.join(ROOT, "build", "venv", "3.12", "bin", "python")


def torch_py():
    """TORCH_PY, or a failure that says how to make it."""
    if not os.access(TORCH_PY, os.X_OK):
        raise Fail(f"{TORCH_PY} missing: scripts/make-venv.sh (make venv) installs PyPI's torch there")
    return TORCH_PY


def wait_tables_loaded(fx, tool, timeout=90):
    """Reads the tool's stderr (-v) until it says every unwinding table is in: they load behind the attach (issue
    36), so a stack taken sooner may hold only frame pointers' frames."""
    end = time.time() + timeout
    while time.time() < end:
        tool.stderr_lines.append(read_line(tool.p.stderr, end - time.time(), "the tables loaded"))
        if "unwinding tables: all loaded" in tool.stderr_lines[-1]:
            return
    raise Fail("the unwinding tables did not all load")


def torch_kept_losses(*tool_args, tables=True):
    """The PyTorch CPU loop that keeps its losses, traced in the torch_cpu layer: (the last periodic report,
    its growing torch_cpu stacks, the largest of them). tables: the loop starts once every unwinding table is
    in (a loaded machine took 10 s, the whole loop, and its rows held frame pointers' frames only)."""
    wait = ("-v",) if tables else ()
    tool, _ = attached_run([torch_py(), TORCH_SCRIPT, "keep"], "-f", "json", "--layers", "torch_cpu", "--top", "50",
                           *wait, *tool_args, "0.5", before_go=wait_tables_loaded if tables else None)
    rep = tool.reports()[-2]
    growing = [s for s in rep["stacks"] if s["layer"] == "torch_cpu" and s["verdict"] == "growing"]
    check(growing, "kept losses: growing torch_cpu stacks")
    return rep, growing, max(growing, key=lambda s: s["bytes"])


_browser = None
HTML_CHECK_PY = "/usr/bin/python3"  # Debian's: python3-selenium is in its dist-packages


def html_check(page, shot, timeout=120, search=None):
    """Loads an HTML report in headless Chromium through Selenium and chromedriver (tests/integration/html_check.py,
    run by Debian's python3, whose dist-packages hold python3-selenium): (its findings, the checker's stderr so
    far). search: the regular expression to type into the flame graph's search box (by default the exact name of
    the frame the zoom check clicks). One browser serves a test file's pages, each in a tab of its own: its
    start-up, seconds long, is paid once. It carries no mark of this test file: ending what a test left running
    spares it; it ends when this file does (its stdin closes), or with its process group when it fails."""
    global _browser
    if _browser is None or _browser.p.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != "MEMLEAK_AI_TEST_RUN"}
        err = tempfile.TemporaryFile()
        p = subprocess.Popen([HTML_CHECK_PY, os.path.join(ROOT, "tests", "integration", "html_check.py"), "--serve"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                             start_new_session=True)
        _browser = types.SimpleNamespace(p=p, err=err, left=bytearray())
    b = _browser
    try:
        b.p.stdin.write(json.dumps([page, shot] + ([search] if search is not None else [])).encode() + b"\n")
        b.p.stdin.flush()
        res = json.loads(read_line(b.p.stdout, timeout, "the browser's findings", b.left))
    except (OSError, ValueError, Fail) as e:
        try:
            os.killpg(b.p.pid, signal.SIGKILL)  # chromedriver and Chromium with it
        except OSError:
            pass
        b.p.wait()
        res = {"fatal": f"html_check.py: {e}"}
    b.err.seek(0)
    return res, b.err.read().decode(errors="replace")


def run_tool(*args, env=None, timeout=30):
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run([TOOL, *exact(args)], capture_output=True, text=True, env=e, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def traced(scenario, *tool_args, prog="leaky", env=None, fixture_env=None):
    """Attach to a fixture, run its scenario, let it exit, and return the tool's final JSON report."""
    fx = Fixture(prog, scenario, env=fixture_env)
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", *tool_args, "60", env=env)
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        fx.finish()
        rc = tool.finish()
        eq(rc, 0, "memleak-ai exit status")
        reps = tool.reports()
        check(reps, "no report")
        final = reps[-1]
        eq(final["final"], True, "last report is final")
        return final, tool
    finally:
        tool.kill()
        fx.kill()


def by_func(report, layer="libc"):
    """Sum bytes and counts of stacks by the name of their first (innermost) frame's function."""
    out = {}
    for s in report["stacks"]:
        if s["layer"] != layer or not s["frames"]:
            continue
        f = s["frames"][0]["func"] or "?"
        b, c = out.get(f, (0, 0))
        out[f] = (b + s["bytes"], c + s["count"])
    return out


# Every process this test file starts (memleak-ai, fixtures, and anything they leave behind) carries this mark in
# its environment: the BPF programs they hold are told from those of other memleak-ai runs on the machine (the
# other test files of a parallel `make test`, someone else's session).
RUN_MARK = f"{os.getpid()}-{time.time_ns()}"
os.environ["MEMLEAK_AI_TEST_RUN"] = RUN_MARK


def _ours(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"MEMLEAK_AI_TEST_RUN={RUN_MARK}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _prog_holders():
    """{BPF program id: set of pids holding it (by a program or link file)} over every process."""
    held = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") not in ("anon_inode:bpf-prog", "anon_inode:bpf_link"):
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    for l in f:
                        if l.startswith("prog_id:"):
                            held.setdefault(int(l.split()[1]), set()).add(int(pid))
            except (OSError, ValueError):
                continue
    return held


def _memleak_progs():
    r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    return [p["id"] for p in json.loads(r.stdout or "[]") if p.get("name") in ("alloc_enter", "alloc_exit", "free_enter")]


def bpf_progs(held=False):
    """How many memleak-ai BPF programs are loaded right now that are this test file's: held by a process it
    started, or (unless held) by no process any more: the kernel frees a program a little after its last holder
    exited. Programs other memleak-ai runs on the machine hold do not count, nor those loaded and held by no
    process when the tests began."""
    ids = [i for i in _memleak_progs() if i not in _before]
    if not ids:
        return 0
    holders = _prog_holders()
    return sum(1 for i in ids if any(_ours(pid) for pid in holders.get(i, ())) or (not held and not holders.get(i)))


_before = {i for i in _memleak_progs() if not _prog_holders().get(i)}


def no_bpf_left(timeout=10):
    """True when no memleak-ai BPF program of this test file is loaded any more. The kernel frees a program some
    time after its last holder exited, so give it a moment."""
    end = time.time() + timeout
    while bpf_progs() > 0:
        if time.time() > end:
            return False
        time.sleep(0.1)
    return True


def _left_behind():
    """(pid, name) of the live processes this test file started, other than itself."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid() or not _ours(pid):
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    continue
            with open(f"/proc/{pid}/comm") as f:
                out.append((int(pid), f.read().strip()))
        except (OSError, IndexError):
            continue
    return out


def sweep(name):
    """End what a test left running (a fixture started before its try, a child it forked): each test begins
    without the last one's processes, and none outlives the file. Said, for whoever fixes the test."""
    left = _left_behind()
    if left:
        time.sleep(0.5)  # one being killed right now
        left = _left_behind()
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        print(f"# {name} left {len(left)} processes running, ended now: {left}", flush=True)


def _part(fn):
    """The part of `make test` fn runs in: alone, beside (its file's shared part, in a job of its own) or shared."""
    return "alone" if getattr(fn, "alone", False) else "beside" if getattr(fn, "beside", False) else "shared"


def main():
    only = sys.argv[1:]
    passed = failed = skipped = 0
    chosen = [fn for fn in _tests if (not only or fn.__name__ in only) and (not PART or PART == _part(fn))]
    for fn in _in_shard(chosen):
        for attempt in (1, 2):
            t0 = time.time()
            try:
                fn()
                passed += 1
                print(f"ok - {fn.__name__} ({time.time() - t0:.1f}s)", flush=True)
                break
            except Skip as e:
                skipped += 1
                print(f"skip - {fn.__name__}: {e}", flush=True)
                break
            except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
                if attempt == 1 and getattr(fn, "flaky", None):
                    print(f"# retried: {fn.__name__} failed once ({fn.flaky}): {e}", flush=True)
                    sweep(fn.__name__)
                    continue
                failed += 1
                print(f"not ok - {fn.__name__}: {e}", flush=True)
                if not isinstance(e, Fail):
                    traceback.print_exc()
                break
        sweep(fn.__name__)
    print(f"integration: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""), flush=True)
    return 1 if failed else 0
