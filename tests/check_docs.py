"""The documentation against the code: every long option of user/session/opts.c's `struct option` table is in
the man page (docs/memleak-ai.8), and every key the JSON report can emit is named in docs/usage.md.

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


def long_options():
    src = read("user/session/opts.c")
    m = re.search(r"struct option\s+\w+\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
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

    lines = usage.count("\n")
    check(lines < 700, f"docs/usage.md is under 700 lines ({lines})")

    passed = sum(results)
    print(f"docs: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
