"""The architecture as a test: each folder of user/ includes only from lib/, the BPF contract and the stages
before it in the pipeline, so the tree keeps telling how data flows (attach -> collect -> judge -> report);
no cycle of modules (a module is X.c + X.h; a cycle hides which one is the lower; a shared header that declares
functions of other .c files, like session/state.h, ties each file that calls one of them to the file that
defines it), no BPF unit over 700 lines (at least three), no C file over 700 but those on BIG, main() under 150
lines, no C function over 80 lines but those on LONG (each entry of BIG and LONG with its reason), and ml_err()
only in session/ and main.c: a lower layer returns its error, and the one that decides what the run does says
it, once."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Stages in pipeline order; a stage may include its own headers and those of any earlier level.
LEVEL = {"lib": 0, "attach": 1, "symbolize": 1, "unwind": 1, "python": 1, "collect": 2, "judge": 3, "report": 4, "diff": 5,
         "session": 6}
GENERATED = {"memleak.h", "memleak.skel.h", "profile.pb-c.h"}
FUNC_MAX = 80
# The functions of user/ and bpf/ allowed over FUNC_MAX lines, each with why. The list is counted: an entry whose
# function is gone or back within FUNC_MAX fails too, so it only ever shrinks to the truth.
LONG = {
    "bpf/stack.bpf.c uw_one": "BPF: sets the frames per bpf_loop call (uw_step2); as its own function +1.85k insns (measured)",
}
FILE_MAX = 700
# The C files of user/ allowed over FILE_MAX lines, each with why. Counted like LONG: an entry whose file is gone or
# back within FILE_MAX fails, so the table only shrinks. A file is one thing: split it at a seam, never squeeze it.
BIG = {}
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


def declared(path):
    """The functions a header declares (prototypes at its top level; not a static inline it defines, a typedef or
    a member of a struct)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", open(path).read(), flags=re.S)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    flat, depth = [], 0  # the text outside braces, each body left as "{}"
    for c in text:
        if c == "{":
            depth += 1
            if depth == 1:
                flat.append("{}")
        elif c == "}":
            depth -= 1
        elif depth == 0:
            flat.append(c)
    names = set()
    # A chunk ended by ";" declares; one ended by a body defines (a function, a struct, an enum).
    for chunk, end in re.findall(r"([^;{}]*)(;|\{\})", "".join(flat)):
        chunk = chunk.strip()
        if end != ";" or chunk.startswith("typedef"):
            continue
        m = next((m for m in re.finditer(r"(\w+)\s*\(", chunk) if m.group(1) not in NOT_NAMES), None)
        if m and not chunk[:m.start()].rstrip().endswith("("):  # "(*f)(...)": a pointer, not a function
            names.add(m.group(1))
    return names


def shared_headers(user):
    """The headers that declare functions defined in another module's .c file, such as session/state.h (the state
    of a run and what its parts call in each other): {"stage/x.h": {function: {modules that define it}}}."""
    defined, shared = {}, {}
    for stage in sorted(LEVEL):
        d = os.path.join(user, stage)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".c"):
                for name, _, _ in functions(os.path.join(d, f)):
                    defined.setdefault(name, set()).add(f"{stage}/{f[:-2]}")
    for stage in sorted(LEVEL):
        d = os.path.join(user, stage)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".h"):
                decl = {n: defined[n] for n in declared(os.path.join(d, f)) if n in defined}
                if any(owners - {f"{stage}/{f[:-2]}"} for owners in decl.values()):
                    shared[f"{stage}/{f}"] = decl
    return shared


def include_edges(mod, path, n, inc, shared):
    """{module: why} that "#include inc" at line n of path makes mod depend on. A shared header counts against
    the modules that define the functions the file names from it, and against itself only where it has no .c
    (its types, and what it includes for them); a file that names none of its functions uses its types."""
    where, own = os.path.relpath(path, ROOT), inc.rsplit(".", 1)[0]
    plain = {own: f"{where}:{n} includes {inc}"}
    if inc not in shared or not path.endswith(".c"):
        return plain
    lines = open(path).read().splitlines()
    named = {name: k for name in sorted(shared[inc])
             if (k := next((i for i, l in enumerate(lines, 1) if re.search(rf"\b{name}\b", l)), None))}
    out = {owner: f"{where}:{k} calls {name}() (declared in {inc}, defined in {owner}.c)"
           for name, k in reversed(named.items()) for owner in shared[inc][name] - {mod}}
    if named and os.path.exists(os.path.join(ROOT, "user", own + ".c")):
        return out
    return {**plain, **out}


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
    edges = {}  # module ("stage/name") -> {module it depends on: where, the first such include or call}
    user = os.path.join(ROOT, "user")
    shared = shared_headers(user)
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
                mod = f"{stage}/{f.rsplit('.', 1)[0]}"
                for to, why in include_edges(mod, os.path.join(d, f), n, inc, shared).items() if dep in LEVEL else ():
                    if to != mod:
                        edges.setdefault(mod, {}).setdefault(to, why)
            if stage != "session" and f"{stage}/{f}" not in ("lib/log.c", "lib/log.h"):
                for n, line in enumerate(open(os.path.join(d, f)), 1):
                    if re.search(r"\bml_err\(", line):
                        bad.append(f"user/{stage}/{f}:{n}: ml_err outside session/ and main.c (return the error)")
            if stage == "lib" and "memleak.skel.h" in open(os.path.join(d, f)).read():
                bad.append(f"user/lib/{f}: lib/ must not see the BPF skeleton")
    for cyc in module_cycles(edges):
        hops = ", ".join(edges[a][b] for a, b in zip(cyc, cyc[1:]))
        bad.append(f"module cycle {' -> '.join(cyc)} ({hops})")
    # The sizes that keep the tree readable: BPF units, C files, main().
    units = [f for f in os.listdir(os.path.join(ROOT, "bpf")) if f.endswith(".bpf.c")]
    if len(units) < 3:
        bad.append(f"bpf/: {len(units)} units, at least three wanted")
    for f in units:
        n = sum(1 for _ in open(os.path.join(ROOT, "bpf", f)))
        if n > 700:
            bad.append(f"bpf/{f}: {n} lines, over 700")
    big = {}
    for root, _, names in os.walk(user):
        for f in names:
            if f.endswith(".c"):
                n = sum(1 for _ in open(os.path.join(root, f)))
                if n > FILE_MAX:
                    big[os.path.relpath(os.path.join(root, f), ROOT)] = n
    for f in sorted(set(big) - set(BIG)):
        bad.append(f"{f}: {big[f]} lines, over {FILE_MAX} (split it at a seam, or add it to BIG with why)")
    for f in sorted(set(BIG) - set(big)):
        bad.append(f"{f}: on BIG but gone or within {FILE_MAX} lines: take it off")
    for f in sorted(f for f in BIG if not BIG[f].strip()):
        bad.append(f"{f}: on BIG without a reason")
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
          f"functions within their sizes ({len(BIG)} files over {FILE_MAX} and {len(LONG)} functions over {FUNC_MAX} "
          f"lines allowed by name)"
          if not bad else f"# {len(bad)} architecture errors")
    print(f"layers: {0 if bad else 1} passed, {1 if bad else 0} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
