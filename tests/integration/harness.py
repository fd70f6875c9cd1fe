"""Integration-test helpers: run fixtures and memleak-ai for real, collect its reports, count results."""
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("MEMLEAK_AI_BIN") or os.path.join(ROOT, "memleak-ai")  # the ASan build in `make test`
FIX = os.path.join(ROOT, "build", "tests")

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


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def eq(got, want, what):
    if got != want:
        raise Fail(f"{what}: got {got!r}, want {want!r}")


def read_line(f, timeout, what):
    """One line from a pipe, or Fail after timeout seconds."""
    end = time.time() + timeout
    buf = b""
    fd = f.fileno()
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
        if not r:
            break
        c = os.read(fd, 1)
        if not c:
            break
        if c == b"\n":
            return buf.decode(errors="replace")
        buf += c
    raise Fail(f"timed out waiting for {what} (got {buf!r})")


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


class Tool:
    """memleak-ai running in the background; stderr is watched for the 'attached' notice."""

    def __init__(self, *args, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.args = [TOOL, *exact(args)]
        self.p = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.stderr_lines = []
        # Reports are drained as they come: a full pipe would block the tool, not the test.
        self._out = []
        self._reader = threading.Thread(target=lambda: self._out.append(self.p.stdout.read()), daemon=True)
        self._reader.start()

    def wait_attached(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            line = read_line(self.p.stderr, end - time.time(), "memleak-ai attached")
            self.stderr_lines.append(line)
            if "attached to pid" in line:
                return
        raise Fail("memleak-ai did not attach")

    def finish(self, timeout=30):
        self.p.wait(timeout=timeout)
        err = self.p.stderr.read()
        self.stderr_lines += err.decode(errors="replace").splitlines()
        self._reader.join(timeout)
        self.out = b"".join(self._out).decode(errors="replace")
        return self.p.returncode

    def reports(self):
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def attached_run(argv, *tool_args, after_go=None, ready_timeout=60, done_timeout=120):
    """Start a fixture speaking the ready / go / done protocol on stdin and stdout, attach memleak-ai to it
    with -p, let it run, stop the tool with SIGINT once the fixture is done, and check both ended well.
    after_go(fx, tool) runs between go and done (more handshakes). Returns (tool, fixture pid); the
    fixture's further output lines are in tool.fixture_lines."""
    fx = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = read_line(fx.stdout, ready_timeout, "fixture ready")
        check(line.startswith("ready"), f"fixture said {line!r}")
        tool = Tool("-p", str(fx.pid), *tool_args)
        tool.fixture_lines = []
        try:
            tool.wait_attached()
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
            return tool, fx.pid
        finally:
            tool.kill()
    finally:
        fx.kill()
        fx.wait()


DEBIAN_PY = "/usr/bin/python3.11"  # libpython linked into the executable; has python3-torch
TORCH_SCRIPT = os.path.join(ROOT, "tests", "fixtures", "torch_loop.py")


def torch_kept_losses(*tool_args):
    """The PyTorch CPU loop that keeps its losses, traced in the torch_cpu layer: (the last periodic report,
    its growing torch_cpu stacks, the largest of them)."""
    if not os.access(DEBIAN_PY, os.X_OK):
        raise Fail("Debian python3.11 missing")
    tool, _ = attached_run([DEBIAN_PY, TORCH_SCRIPT, "keep"], "-f", "json", "--layers", "torch_cpu", "--top", "50",
                           *tool_args, "0.5")
    rep = tool.reports()[-2]
    growing = [s for s in rep["stacks"] if s["layer"] == "torch_cpu" and s["verdict"] == "growing"]
    check(growing, "kept losses: growing torch_cpu stacks")
    return rep, growing, max(growing, key=lambda s: s["bytes"])


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


def bpf_progs():
    """How many memleak-ai BPF programs are loaded right now (by any instance)."""
    r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    return sum(1 for p in json.loads(r.stdout or "[]") if p.get("name") in ("alloc_enter", "alloc_exit", "free_enter"))


_baseline = bpf_progs()


def no_bpf_left(timeout=10):
    """True when no more memleak-ai BPF programs are loaded than before the tests began. The kernel frees a
    program some time after its last holder exited, so give it a moment."""
    end = time.time() + timeout
    while bpf_progs() > _baseline:
        if time.time() > end:
            return False
        time.sleep(0.1)
    return True


def main():
    only = sys.argv[1:]
    passed = failed = 0
    for fn in _tests:
        if only and fn.__name__ not in only:
            continue
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"ok - {fn.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
            failed += 1
            print(f"not ok - {fn.__name__}: {e}", flush=True)
            if not isinstance(e, Fail):
                traceback.print_exc()
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0
