"""--max-overhead: the tool measures its own cost and, over budget, follows the C heap through its system calls."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, attached_run, check, eq, main, test  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "fixtures", "py_hot.py")
PY = os.path.expanduser("~/.pyenv/versions/3.11.7/bin/python3.11")
if not os.access(PY, os.X_OK):
    PY = "/usr/bin/python3.11"


def line_of(mark):
    return next(n for n, text in enumerate(open(SCRIPT), 1) if f"# at: {mark}" in text)


def run(secs, *tool_args):
    tool, _ = attached_run([PY, SCRIPT, str(secs)], "-f", "json", "--top", "50", *tool_args, "1")
    return tool.reports(), tool


def py_lines(stack):
    return [(f["func"], f["line"]) for f in stack["frames"] if f["kind"] == "python"]


@test
def over_budget_switches_to_heap_growth_and_still_flags_the_leak():
    reps, tool = run(8, "--max-overhead", "2")
    check(any("heap-growth mode" in l for l in tool.stderr_lines), f"notice: {tool.stderr_lines}")
    final = reps[-1]
    eq(final["modes"]["libc"], "heap_growth", "libc's mode in the report")
    ov = final["overhead"]
    check(ov["measured"] and ov["hit_ns"] > 0 and ov["budget_pct"] == 2, f"overhead shown: {ov}")
    switched = next(r["seq"] for r in reps if r["modes"]["libc"] == "heap_growth")
    note = next(l for l in tool.stderr_lines if "heap-growth mode" in l)
    cost = float(re.search(r"tracing cost ([0-9.]+)%", note).group(1))
    check(cost > 2, f"the cost that made it switch is over the budget: {note}")
    # After the switch the probes on every malloc are off: the cost falls under the budget.
    after = [r["overhead"]["pct"] for r in reps[switched + 1:-1]]
    check(after and min(after) < 2, f"cost after the switch: {after}")
    plant = ("plant", line_of("plant"))
    growing = [s for r in reps[-3:] for s in r["stacks"] if s["verdict"] == "growing" and plant in py_lines(s)]
    check(growing, f"the planted leak is a leak candidate at its line: "
                   f"{[(s['verdict'], py_lines(s)[:2]) for s in final['stacks'][:5]]}")
    churn = ("scratch", line_of("churn"))
    eq([s for s in final["stacks"] if s["verdict"] == "growing" and churn in py_lines(s)], [],
       "the churn is no leak candidate")


@test
def within_budget_every_probe_stays():
    reps, tool = run(3, "--max-overhead", "100")
    eq({r["modes"]["libc"] for r in reps}, {"full"}, "libc stays fully traced")
    check(not any("heap-growth" in l for l in tool.stderr_lines), "no switch notice")
    check(reps[-1]["overhead"]["measured"], "cost measured all the same")


@test
def max_overhead_option_is_checked():
    for bad in ("0", "abc", "101", "-1", "5x"):
        r = subprocess.run([os.path.join(ROOT, "memleak-ai"), "--max-overhead", bad, "-p", "1"],
                           capture_output=True, text=True)
        eq(r.returncode, 2, f"--max-overhead {bad}: exit status")
        check(f"invalid --max-overhead '{bad}'" in r.stderr and len(r.stderr.splitlines()) == 1,
              f"one-line error: {r.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())
