"""OOM kills: a C program leaking 1 MiB a step in a v1 memory cgroup with a 96 MiB limit is ended by the kernel's
OOM killer; memleak-ai's final report names the leaking function and says OOM, memleak-ai itself is never the
victim, and under -c it exits with the command's status. The OOM event reaches the tool moments before its victim's
exit: a tool that gets the CPU only after both still reads the event before the final report."""
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FIX, Fail, Fixture, Tool, by_func, check, eq, main, no_bpf_left, run_tool, test  # noqa: E402

BASE = "/sys/fs/cgroup/memory"
LIMIT = 96 << 20


class MemCgroup:
    """A v1 memory cgroup with a small limit (swap included, where the kernel accounts it)."""

    def __init__(self):
        if not os.path.isdir(BASE):
            raise Fail(f"no v1 memory cgroup hierarchy at {BASE}")
        self.path = os.path.join(BASE, "memleak-ai-oom-" + uuid.uuid4().hex[:8])
        os.mkdir(self.path)
        self._write("memory.limit_in_bytes", LIMIT)
        if os.path.exists(os.path.join(self.path, "memory.memsw.limit_in_bytes")):
            self._write("memory.memsw.limit_in_bytes", LIMIT)

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def add(self, pid):
        self._write("cgroup.procs", pid)

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def can_lower_oom_score():
    """CAP_SYS_RESOURCE (bit 24) in this process's effective set: needed to set a negative oom_score_adj."""
    with open("/proc/self/status") as f:
        eff = int(next(l for l in f if l.startswith("CapEff:")).split()[1], 16)
    return bool(eff >> 24 & 1)


def check_oom_report(rep, pid, what):
    """The victim in the report: exit_reason, its RSS when chosen, and the leak by function (its own stacks)."""
    rep = dict(rep, stacks=[s for s in rep["stacks"] if s["pid"] == pid])
    procs = {p["pid"]: p for p in rep["processes"]}
    check(pid in procs, f"{what}: the victim in processes[]: {list(procs)}")
    p = procs[pid]
    eq(p["exit_reason"], "oom_killed", f"{what}: exit_reason")
    check(60 << 20 <= p["oom_rss"]["anon_bytes"] <= LIMIT + (8 << 20),
          f"{what}: its anonymous RSS when chosen, near the limit: {p['oom_rss']}")
    b, n = by_func(rep).get("oom_leak_step", (0, 0))
    check(n >= 60 and b == n * (1 << 20), f"{what}: the leak named, 1 MiB a block: {b} bytes in {n}")


@test
def oom_kill_of_an_attached_process_is_reported():
    cg = MemCgroup()
    fx = tool = None
    try:
        fx = Fixture("oom_leak")
        cg.add(fx.pid)
        tool = Tool("-p", str(fx.pid), "-f", "json", "-v", "0.5")
        tool.wait_attached()
        with open(f"/proc/{tool.p.pid}/oom_score_adj") as f:
            adj = f.read().strip()
        if can_lower_oom_score():
            eq(adj, "-1000", "memleak-ai keeps itself out of the OOM killer's choice")
        else:  # without CAP_SYS_RESOURCE (this machine's sandbox drops it) the kernel refuses, and it is said
            eq(adj, "0", "oom_score_adj left as it was")
            check(any("cannot keep memleak-ai out of the OOM killer's choice: Permission denied" in l
                      for l in tool.stderr_lines), f"the refusal said (-v): {tool.stderr_lines}")
        fx.go()
        eq(tool.finish(timeout=60), 0, "memleak-ai exit status, after its target was killed")
        eq(fx.p.wait(10), -9, "the fixture was killed (SIGKILL)")
        rep = tool.reports()[-1]
        check(rep["final"], "a final report")
        check_oom_report(rep, fx.pid, "-p")
        check(any(f"pid {fx.pid} was chosen by the kernel's OOM killer" in l for l in tool.stderr_lines),
              f"said on stderr: {tool.stderr_lines[-4:]}")
    finally:
        if tool:
            tool.kill()
        if fx:
            fx.kill()
        cg.remove()
    check(no_bpf_left(), "nothing left attached")


@test
def oom_kill_under_command_mode_exits_with_its_status():
    cg = MemCgroup()
    try:
        # The command moves itself into the cgroup, then runs the leak (exec: the same process, followed).
        cmd = f"sh -c 'echo $$ > {cg.path}/cgroup.procs && exec {FIX}/oom_leak auto'"
        rc, out, err = run_tool("--max-overhead", "100", "-c", cmd, "0.5", timeout=60)
        eq(rc, 137, f"exit status as a shell reports a SIGKILL ({err[-300:]})")
        lines = out.splitlines()
        oom = [l for l in lines if l.startswith("OOM: pid ") and "(oom_leak) was killed by the kernel's OOM killer" in l]
        check(oom, f"the final report says OOM: {[l for l in lines if 'OOM' in l][:3]}")
        final = lines[max(i for i, l in enumerate(lines) if l.startswith("=== memleak-ai final report")):]
        check(any("oom_leak_step" in l for l in final), "the final report names the leaking function")
        check("chosen by the kernel's OOM killer" in err, "said on stderr")
    finally:
        cg.remove()
    check(no_bpf_left(), "nothing left attached")


@test
def oom_kill_of_a_child_is_reported_at_once_and_the_run_goes_on():
    """A traced parent whose child (followed) leaks in the cgroup: the child's report comes at once, while its
    records are still there, and the run goes on until the parent exits."""
    cg = MemCgroup()
    d = tempfile.mkdtemp()
    try:
        script = os.path.join(d, "parent.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nsh -c 'echo $$ > {cg.path}/cgroup.procs && exec {FIX}/oom_leak auto'\nsleep 1.5\n")
        os.chmod(script, 0o755)
        rc, out, err = run_tool("--max-overhead", "100", "-f", "json", "-c", script, "5", timeout=60)
        eq(rc, 0, f"exit status: the parent exited normally ({err[-300:]})")
        child = int(next(l for l in err.splitlines() if "was chosen by the kernel's OOM killer" in l).split()[2])
        reps = [json.loads(l) for l in out.splitlines() if l.startswith("{")]  # the command shares stdout
        at_once = [r for r in reps if not r["final"] and any(p["pid"] == child for p in r["processes"])]
        check(at_once, f"a report before the final one holds the child: {[r['seq'] for r in reps]}")
        check_oom_report(at_once[0], child, "child")
        check(reps[-1]["final"] and reps[-1]["seq"] == at_once[0]["seq"] + 1,
              "the run went on to the parent's exit and its final report")
    finally:
        cg.remove()
        shutil.rmtree(d, ignore_errors=True)
    check(no_bpf_left(), "nothing left attached")


if __name__ == "__main__":
    sys.exit(main())
