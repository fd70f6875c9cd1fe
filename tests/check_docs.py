"""The documentation against the code: every long option of user/session/opts.c's `struct option` table is in
the man page (docs/memleak-ai.8), and every key the JSON report can emit is named in docs/usage.md. DESIGN.md
cannot drift from the code: every `name()` it cites is defined in user/ or bpf/, and its tree names every
user/*/*.c. The README's layer table is the layers the tool knows (user/attach/allocators.c's layer_names), and
usage.md and the man page state the oldest kernel user/session/target.h checks for.

The JSON keys are the string keys handed to the writer of user/report/json.c (jw_str, jw_u64, jw_obj_begin,
...) and to the report's own helpers that pass them on (json_stats, json_trend, ...) in user/report/*.c, plus
the counter names of report.c's stat tables ({ML_STAT_..., "json", "text"}, ML_STAT_...(reason) too). html.c is left out: its keys are
the HTML page's embedded data, not the JSON Lines report. Layer names, which are keys too (totals.LAYER), come
from a function, not a literal; usage.md names them all the same. A key counts as named in usage.md when it
is a word of some `code span` there (`stats.rss_sample_every` names both `stats` and `rss_sample_every`).
Prints one "ok - ..." or "not ok - ..." line per check and ends with "docs: N passed, M failed"."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def long_options(path="user/session/opts.c"):
    src = read(path)
    m = re.search(r"struct option\s+\w+\[\]\s*=\s*\{(.*?)\};", src, re.S)
    if not m:
        return None
    return re.findall(r'\{\s*"([a-z0-9-]+)"\s*,', m.group(1))


def json_keys():
    keys = set()
    for path in sorted(glob.glob(os.path.join(ROOT, "user/report/*.c"))):
        if os.path.basename(path) == "html.c":
            continue
        with open(path, encoding="utf-8") as f:
            src = f.read()
        keys.update(re.findall(r'\b(?:jw|json)_\w+\(\s*&?\w+\s*,\s*"([^"]+)"', src))
        keys.update(re.findall(r'\{\s*ML_STAT_\w+(?:\(\w+\))?\s*,\s*"([^"]+)"\s*,\s*"', src))
    return sorted(keys)


# Names DESIGN.md cites that are the C library's or the kernel's, not ours.
EXTERNAL = {"_dl_debug_state", "pthread_self"}


def defined_names():
    """Every function, macro and variable name defined or declared in user/ and bpf/ (a word before "(" at a
    line's start, after a type, or after #define)."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "user/**/*.[ch]"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "bpf/*.[ch]")):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        names.update(re.findall(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\(", src, re.M))
        names.update(re.findall(r"^#define\s+([A-Za-z_]\w*)", src, re.M))
    return names


def layer_names():
    m = re.search(r"layer_names\[ML_LAYER_MAX\]\s*=\s*\{(.*?)\};", read("user/attach/allocators.c"), re.S)
    return sorted(re.findall(r'=\s*"([a-z_]+)"', m.group(1))) if m else []


def kernel_minimum():
    h = read("user/session/target.h")
    major = re.search(r"#define ML_KERNEL_MAJOR (\d+)", h)
    minor = re.search(r"#define ML_KERNEL_MINOR (\d+)", h)
    return f"{major.group(1)}.{minor.group(1)}" if major and minor else None


def check_design(check):
    design, known = read("docs/DESIGN.md"), defined_names()
    cited = sorted(set(re.findall(r"`([A-Za-z_]\w*)\(\)`", design)))
    check(len(cited) > 20, f"docs/DESIGN.md: the names it cites read ({len(cited)})")
    for name in cited:
        check(name in known or name in EXTERNAL, f"docs/DESIGN.md cites {name}(), defined in user/ or bpf/")
    tree = design[:design.index("## The BPF side")] if "## The BPF side" in design else design
    for path in sorted(glob.glob(os.path.join(ROOT, "user/*/*.c"))):
        name = os.path.basename(path)
        check(re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", tree) is not None,
              f"docs/DESIGN.md's tree names {os.path.relpath(path, ROOT)}")


def check_readme_and_kernel(check, man, usage):
    readme = read("README.md")
    table = re.findall(r"^\| `([a-z_]+)` \|", readme, re.M)
    known = layer_names()
    check(len(known) >= 8 and sorted(table) == known,
          f"README.md's layer table is the tool's layers: {sorted(table)} against {known}")
    want = kernel_minimum()
    check(want is not None and f"Linux {want} or newer" in usage and f"Linux {want} or newer" in man,
          f"docs/usage.md and docs/memleak-ai.8 state the kernel minimum the code checks ({want})")


def check_diff(check, man):
    """`memleak-ai diff`: its options in the man page and docs/diff.md, its JSON keys in docs/diff.md."""
    doc = read("docs/diff.md")
    opts = long_options("user/session/diffcmd.c")
    check(bool(opts), f"user/session/diffcmd.c: the struct option table read ({len(opts or [])} long options)")
    for name in opts or []:
        pat = r"--" + re.escape(name) + r"(?![a-z0-9-])"
        check(re.search(pat, man) is not None and re.search(pat, doc) is not None,
              f"diff --{name} is in docs/memleak-ai.8 and docs/diff.md")
    words = set()
    for span in re.findall(r"`([^`\n]+)`", doc):
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    src = read("user/diff/diffview.c")
    keys = sorted(set(re.findall(r'\b(?:jw|json)_\w+\(\s*&?\w+\s*,\s*"([^"]+)"', src)))
    check(len(keys) > 20, f"user/diff/diffview.c: the diff's JSON keys read ({len(keys)})")
    for key in keys:
        check(key in words, f"diff JSON key \"{key}\" is in docs/diff.md")


def main():
    results = []

    def check(ok, what):
        results.append(ok)
        print(("ok - " if ok else "not ok - ") + what)

    man = read("docs/memleak-ai.8").replace("\\-", "-").replace("\\(em", " ")
    opts = long_options()
    check(bool(opts), f"user/session/opts.c: the struct option table read ({len(opts or [])} long options)")
    for name in opts or []:
        check(re.search(r"--" + re.escape(name) + r"(?![a-z0-9-])", man) is not None,
              f"--{name} is in docs/memleak-ai.8")

    usage = read("docs/usage.md")
    words = set()
    for span in re.findall(r"`([^`\n]+)`", usage):
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    keys = json_keys()
    check(len(keys) > 50, f"user/report/*.c: the JSON keys read ({len(keys)})")
    for key in keys:
        check(key in words, f"JSON key \"{key}\" is in docs/usage.md")

    check_diff(check, man)
    lines = usage.count("\n")
    check(lines < 700, f"docs/usage.md is under 700 lines ({lines})")
    check_design(check)
    check_readme_and_kernel(check, man, usage)

    passed = sum(results)
    print(f"docs: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
