"""The architecture as a test: each folder of user/ includes only from lib/, the BPF contract and the stages
before it in the pipeline, so the tree keeps telling how data flows (attach -> collect -> judge -> report);
no cycle of modules (a module is X.c + X.h; a cycle hides which one is the lower), no BPF unit over 700 lines (at
least three), no C file over 900, main() under 150 lines, no C function over 80 lines but those on LONG, each with its
reason, and ml_err() only in session/ and main.c: a lower layer returns its error, and the one that decides
what the run does says it, once."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Stages in pipeline order; a stage may include its own headers and those of any earlier level.
LEVEL = {"lib": 0, "attach": 1, "symbolize": 1, "unwind": 1, "python": 1, "collect": 2, "judge": 3, "report": 4,
         "session": 5}
GENERATED = {"memleak.h", "memleak.skel.h", "profile.pb-c.h"}
FUNC_MAX = 80
# The functions of user/ and bpf/ allowed over FUNC_MAX lines, each with why. The list is counted: an entry whose
# function is gone or back within FUNC_MAX fails too, so it only ever shrinks to the truth.
LONG = {
    "bpf/stack.bpf.c uw_one": "BPF: sets the frames per bpf_loop call (uw_step2); as its own function +1.85k insns (measured)",
}
# Macros that define a BPF program: the program's name is their first argument.
BPF_PROG_MACROS = {"BPF_PROG", "BPF_KPROBE", "BPF_KRETPROBE", "BPF_UPROBE", "BPF_URETPROBE", "BPF_USDT"}
NOT_NAMES = {"SEC", "__attribute__", "__section", "if", "while", "for", "switch", "return", "sizeof"}


def module_cycles(edges):
    """Each cycle of the include graph of modules, one per strongly connected component (Tarjan), as a list of
    modules from one back to itself. edges: {module: {included module: where}}."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    cycles = []
    for comp in comps:
        # The shortest way back to the component's first module, by breadth-first search inside it.
        start = min(comp)
        prev, todo = {start: None}, [start]
        while todo:
            v = todo.pop(0)
            nxt = [w for w in sorted(edges.get(v, {})) if w in comp]
            if start in nxt:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                cycles.append(path[::-1] + [start])
                break
            for w in nxt:
                if w not in prev:
                    prev[w] = v
                    todo.append(w)
    return cycles


def functions(path):
    """(name, first line, lines) of each function defined at the top level of a C file, counted from the line
    naming it to its closing brace: kernel style (as .clang-format makes it) puts a definition's "{" and "}"
    alone in column 0, and nothing else."""
    lines = open(path).read().splitlines()
    out = []
    for i, l in enumerate(lines):
        if l.rstrip() != "{":
            continue
        head = i - 1  # the signature: back to a line that ends something else
        while head > 0 and lines[head - 1].strip() and not lines[head - 1].rstrip().endswith((";", "}", "*/")) \
                and not lines[head - 1].startswith("#"):
            head -= 1
        sig = " ".join(lines[head:i])
        name, first = None, head
        for m in re.finditer(r"(\w+)\s*\(", sig):
            if m.group(1) in NOT_NAMES:
                continue
            name = m.group(1)
            if name in BPF_PROG_MACROS:
                name = re.match(r"\s*(\w+)", sig[m.end():]).group(1)
            first = next((k for k in range(head, i) if re.search(r"\b" + re.escape(m.group(1)) + r"\(", lines[k])), head)
            break
        end = next((k for k in range(i + 1, len(lines)) if lines[k].rstrip() == "}"), None)
        if name and end is not None:
            out.append((name, first + 1, end - first + 1))
    return out


def long_functions():
    """{"path name": lines} of every function of user/ and bpf/ over FUNC_MAX lines."""
    found = {}
    for top in ("user", "bpf"):
        for root, _, names in os.walk(os.path.join(ROOT, top)):
            for f in sorted(names):
                if f.endswith((".c", ".h")):
                    path = os.path.join(root, f)
                    for name, _, n in functions(path):
                        if n > FUNC_MAX:
                            found[f"{os.path.relpath(path, ROOT)} {name}"] = n
    return found


def main():
    bad, files = [], 0
    edges = {}  # module ("stage/name") -> {module it includes: "file:line" of the first such include}
    user = os.path.join(ROOT, "user")
    for stage in sorted(os.listdir(user)):
        d = os.path.join(user, stage)
        if not os.path.isdir(d):
            continue
        if stage not in LEVEL:
            bad.append(f"user/{stage}/: a folder the pipeline does not name")
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            files += 1
            for n, line in enumerate(open(os.path.join(d, f)), 1):
                m = re.match(r'#include "([^"]+)"', line)
                if not m or m.group(1) in GENERATED:
                    continue
                inc = m.group(1)
                dep = inc.split("/")[0] if "/" in inc else None
                if dep is None or dep not in LEVEL:
                    bad.append(f"user/{stage}/{f}:{n}: include \"{inc}\" names no stage folder")
                elif dep != stage and LEVEL[dep] >= LEVEL[stage]:
                    bad.append(f"user/{stage}/{f}:{n}: {stage} may not include {inc} (same or later stage)")
                mod, to = f"{stage}/{f.rsplit('.', 1)[0]}", inc.rsplit(".", 1)[0]
                if dep in LEVEL and to != mod:
                    edges.setdefault(mod, {}).setdefault(to, f"user/{stage}/{f}:{n}")
            if stage != "session" and f"{stage}/{f}" not in ("lib/log.c", "lib/log.h"):
                for n, line in enumerate(open(os.path.join(d, f)), 1):
                    if re.search(r"\bml_err\(", line):
                        bad.append(f"user/{stage}/{f}:{n}: ml_err outside session/ and main.c (return the error)")
            if stage == "lib" and "memleak.skel.h" in open(os.path.join(d, f)).read():
                bad.append(f"user/lib/{f}: lib/ must not see the BPF skeleton")
    for cyc in module_cycles(edges):
        hops = ", ".join(f"{edges[a][b]} includes {b}.h" for a, b in zip(cyc, cyc[1:]))
        bad.append(f"module cycle {' -> '.join(cyc)} ({hops})")
    # The sizes that keep the tree readable: BPF units, C files, main().
    units = [f for f in os.listdir(os.path.join(ROOT, "bpf")) if f.endswith(".bpf.c")]
    if len(units) < 3:
        bad.append(f"bpf/: {len(units)} units, at least three wanted")
    for f in units:
        n = sum(1 for _ in open(os.path.join(ROOT, "bpf", f)))
        if n > 700:
            bad.append(f"bpf/{f}: {n} lines, over 700")
    for root, _, names in os.walk(user):
        for f in names:
            if f.endswith(".c"):
                n = sum(1 for _ in open(os.path.join(root, f)))
                if n > 900:
                    bad.append(f"{os.path.relpath(os.path.join(root, f), ROOT)}: {n} lines, over 900")
    found = long_functions()
    for fn in sorted(set(found) - set(LONG)):
        bad.append(f"{fn}: {found[fn]} lines, over {FUNC_MAX} (split it, or add it to LONG with why)")
    for fn in sorted(set(LONG) - set(found)):
        bad.append(f"{fn}: on LONG but no longer a function over {FUNC_MAX} lines: take it off")
    lines = open(os.path.join(user, "main.c")).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("int main(")), None)
    end = next((i for i in range(start or 0, len(lines)) if lines[i] == "}"), None) if start is not None else None
    if start is None or end is None or end - start + 1 >= 150:
        bad.append(f"user/main.c: main() is {None if end is None else end - start + 1} lines, 150 at most")
    top = [f for f in os.listdir(user) if f.endswith((".c", ".h")) and f != "main.c"]
    for f in top:
        bad.append(f"user/{f}: only main.c stays at user/'s top")
    for b in bad:
        print(f"not ok - {b}")
    print(f"ok - {files} files follow the stage order with no cycle of modules; BPF units, C files, main() and "
          f"functions within their sizes ({len(LONG)} over {FUNC_MAX} lines allowed by name)"
          if not bad else f"# {len(bad)} architecture errors")
    print(f"layers: {0 if bad else 1} passed, {1 if bad else 0} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
