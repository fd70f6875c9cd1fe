"""A hostile target: a program that corrupts its own heap metadata and keeps leaking is traced at default
settings and at full fidelity. The tool keeps reporting, its other rows stay right, the heap walk says where it
stopped, how much it left and why, and what the target wrote never grows the tool's own heap."""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FIX, TOOL, UNDER_ASAN, attached_run, check, eq, main, no_bpf_left, read_line, test  # noqa: E402

KEPT, LEAKS, LEAK = 4096, 200, 4000
CHUNK = (64 + 8 + 15) & ~15  # a kept 64-byte block's chunk
ANON_CEILING = 64 << 20  # the tool's own heap, whatever the target wrote; the BPF maps it maps are apart


def check_rss(what, rss):
    """The tool's RssAnon under the ceiling. Not under AddressSanitizer, whose quarantine keeps freed memory
    (74 to 139 MB here): that build checks every access instead."""
    if UNDER_ASAN:
        print(f"# {what}: RssAnon {rss} not held to {ANON_CEILING} under AddressSanitizer", flush=True)
        return
    check(rss < ANON_CEILING, f"{what}: the tool's RssAnon {rss} under {ANON_CEILING}")


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
        check_rss(mode, rss)
    check(no_bpf_left(), "nothing left attached")


@test
def corrupt_chunk_sizes_default_settings():
    for mode in ("huge", "zero"):
        text, reps, pid, rss = traced(mode, "--max-overhead", "2")
        check_leak(mode, reps[-1], False)
        check_walk_stopped(mode, text, reps[-1], pid)
        check_rss(mode, rss)


@test
def self_pointing_first_words():
    """4,096 kept blocks whose first word points at the block itself: read as vtables and as free-list links,
    they lead nowhere; the walk is whole and the leak exact."""
    for budget in ((), ("--max-overhead", "2")):
        text, reps, pid, rss = traced("self", *budget)
        check_leak("self", reps[-1], not budget)
        fr = proc(reps[-1], pid)["fragmentation"]
        eq((fr["broken_walks"], fr["unwalked_bytes"], fr["capped"]), (0, 0, False), f"self {budget}: the walk is whole")
        check_rss("self", rss)


# 1,000 floats given a fake type whose ob_type points at itself and whose tp_name is 1 MiB with no NUL; the
# interpreter never touches them again and leaves by os._exit (their deallocation would follow the fake type).
FAKE_TYPE_SCRIPT = r"""import ctypes, os, select, sys
u64 = lambda addr, v: ctypes.memmove(addr, ctypes.byref(ctypes.c_uint64(v)), 8)
fake = ctypes.create_string_buffer(1024)
name = ctypes.create_string_buffer(b"A" * (1 << 20), 1 << 20)
at = ctypes.addressof(fake)
u64(at + 8, at)  # ob_type: itself
u64(at + 24, ctypes.addressof(name))  # tp_name: no NUL within 1 MiB
u64(at + 32, 24)  # tp_basicsize
u64(at + 168, 1 << 12)  # tp_flags: Py_TPFLAGS_READY
floats = [float(i) + 0.5 for i in range(1000)]
for f in floats:
    u64(id(f) + 8, at)
kept = []
print("ready", flush=True)
os.read(0, 1)
while len(kept) < 5000 and not select.select([0], [], [], 0.01)[0]:  # until told to stop, by reports seen
    kept.append(bytearray(20000))  # LEAK
os.read(0, 1)
print("done", flush=True)
os.read(0, 1)
os._exit(0)
"""


@test
def fake_python_type_default_settings():
    """Floats whose type claims to be its own type, named by 1 MiB with no NUL: the census reads that word as
    a type once, refuses it and says so (python_types_refused), names no such type, and the leak beside it is
    found at its line; the tool's own heap stays under the ceiling."""
    with tempfile.TemporaryDirectory() as d:
        script, js = os.path.join(d, "fake_type.py"), os.path.join(d, "r.json")
        with open(script, "w") as f:
            f.write(FAKE_TYPE_SCRIPT)
        rss = []

        def at_line(rep):
            return [s["verdict"] for s in rep["stacks"]
                    if any(f.get("file") == script and f.get("line") == 17 for f in s["frames"])]

        def watch(fx, tool):
            # The leak goes on until a report calls it growing, or 30 reports: on a busy machine the budget moves
            # the C heap to sampling windows, whose rows are judged at the windows (one in 2.4 s), not each report.
            end = time.time() + 90
            while time.time() < end:
                reps = [json.loads(l) for l in open(js) if l.endswith("\n")] if os.path.exists(js) else []
                if len(reps) >= 30 or (len(reps) >= 4 and "growing" in at_line(reps[-1])):
                    break
                time.sleep(0.2)
            for line in open(f"/proc/{tool.p.pid}/status"):
                if line.startswith("RssAnon:"):
                    rss.append(int(line.split()[1]) << 10)
            fx.stdin.write(b"s")
            fx.stdin.flush()

        tool, pid = attached_run([PY, script], "--max-overhead", "2", "--json", js, "1", after_go=watch,
                                 after_tool=lambda fx, tool: fx.stdin.write(b"x"))
        reps = [json.loads(l) for l in open(js) if l.strip()]
    check(len(reps) >= 4, f"reports kept coming: {len(reps)}")
    cen = proc(reps[-1], pid)["census"]
    check(cen["python_types_refused"] >= 1 and cen["python_typed"] >= 1000,
          f"the fake type refused, the real objects typed: {({k: v for k, v in cen.items() if k != 'types'})}")
    fakes = [t["name"][:40] for t in cen["types"] if "AAAA" in t["name"]]
    check(not fakes, f"no type named by the fake's tp_name: {fakes}")
    leak = [(r["seq"], v) for r in reps for v in at_line(r)]
    check(any(v == "growing" for _, v in leak), f"the leak at its line, growing: {leak[-4:]}")
    check(rss, "the tool's RssAnon read")
    check_rss("fake type", rss[0])


# Names the target chooses: its script's path, a function's name, its comm and its job id.
EVIL = '</script>"\n\x1b[2J;x y'
NAMES_SCRIPT = r"""import ctypes, sys, time
ctypes.CDLL(None).prctl(15, b'ev"il\x1b[2J<\n\xff', 0, 0, 0)  # PR_SET_NAME: the comm
kept = []
def grow():
    kept.append(bytearray(20000))
NAME = %r + '\udcff'  # a lone surrogate: not UTF-8 once read from the str
grow.__code__ = grow.__code__.replace(co_name=NAME, co_qualname=NAME)
print("ready", flush=True)
sys.stdin.read(1)
for i in range(800):
    grow()
    time.sleep(0.01)
print("done", flush=True)
sys.stdin.read()
""" % EVIL
PY = shutil.which("python3")


def names_run(d, *outs):
    """The script, at a path with every hostile byte, traced with outs; (stdout bytes, the metrics text)."""
    sub = os.path.join(d.encode(), b'a"</script>\x1b[2J\n\xff')
    os.makedirs(sub, exist_ok=True)
    script = os.path.join(sub, b"leak.py")
    with open(script, "w") as f:
        f.write(NAMES_SCRIPT)
    env = dict(os.environb)
    env[b"TORCHELASTIC_RUN_ID"] = b'job"</script>\x1b[2J\\\xff'
    wl = subprocess.Popen([PY.encode(), script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        check(read_line(wl.stdout, 30, "the script ready").startswith("ready"), "the script started")
        tool = subprocess.Popen([TOOL, "--max-overhead", "100", "-p", str(wl.pid), *outs, "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        port = None
        while True:
            line = read_line(tool.stderr, 30, "memleak-ai attached")
            m = re.search(r"metrics on port (\d+)", line)
            port = m.group(1) if m else port
            if "attached to pid" in line:
                break
        wl.stdin.write(b"g")
        wl.stdin.flush()
        check(read_line(wl.stdout, 60, "the script done") == "done", "the script ran its loop")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read() if port else b""
        tool.send_signal(signal.SIGINT)
        out, _ = tool.communicate(timeout=60)
        eq(tool.returncode, 0, "memleak-ai exit status")
        return out, metrics
    finally:
        wl.kill()
        wl.wait()


def string_table(msg):
    """A profile.proto Profile's string_table (field 6): every string a profile holds is there."""
    def varint(i):
        v = sh = 0
        while True:
            v |= (msg[i] & 0x7f) << sh
            sh += 7
            i += 1
            if msg[i - 1] < 0x80:
                return v, i
    out, i = [], 0
    while i < len(msg):
        key, i = varint(i)
        if key & 7 == 0:
            _, i = varint(i)
        elif key & 7 in (1, 5):
            i += 8 if key & 7 == 1 else 4
        else:
            check(key & 7 == 2, f"pprof: wire type {key & 7}")
            n, i = varint(i)
            if key >> 3 == 6:
                out.append(msg[i:i + n])
            i += n
    return out


@test
def hostile_names_in_every_output():
    """A script path, a function name, a comm and a job id holding </script>, a quote, a newline, a terminal
    escape and bytes that are not UTF-8: text escapes them as \\xNN, JSON carries them exactly (U+FFFD for
    what is not UTF-8), the HTML page's scripts are not ended by them, pprof's strings are UTF-8, folded
    lines keep their shape, and the Prometheus text parses. The leak is found at the named function."""
    with tempfile.TemporaryDirectory() as d:
        js, pb, html = (os.path.join(d, n) for n in ("r.json", "r.pb.gz", "r.html"))
        out, metrics = names_run(d, "--json", js, "--pprof", pb, "--html", html, "--metrics-listen", "127.0.0.1:0")
        text = out.decode("utf-8")  # strict: nothing that is not UTF-8 reaches the terminal
        check("\x1b" not in text and "\x9b" not in text, "text: no escape byte")
        at = [l for l in text.splitlines() if l.startswith("    at ")]
        want = '    at %s/a"</script>\\x1b[2J\\x0a\ufffd/leak.py:5 in </script>"\\x0a\\x1b[2J;x y\ufffd' % d
        check(want in at and all(l.startswith(want[:want.index(":")]) for l in at),
              f"text: the at lines, escaped: {at[:3]} want {want!r}")

        raw = open(js, "rb").read()
        reps = [json.loads(l) for l in raw.decode("utf-8").splitlines()]
        name, path = EVIL + "\ufffd", f'{d}/a"</script>\x1b[2J\n\ufffd/leak.py'
        found = [(r["seq"], s["verdict"]) for r in reps for s in r["stacks"]
                 if any((f.get("func"), f.get("file"), f.get("line")) == (name, path, 5) for f in s["frames"])]
        check(any(v == "growing" for _, v in found), f"JSON: the leak, growing at its function and file, exactly: {found}")
        proc = reps[-1]["processes"][0]
        eq((proc["comm"], proc["job"]), ('ev"il\x1b[2J<\n\ufffd', 'job"</script>\x1b[2J\\\ufffd'), "JSON: comm and job")
        check(b"</script>" not in raw and b"\x1b" not in raw, "JSON: </script> and ESC only as escapes")

        page = open(html, "rb").read().decode("utf-8")
        eq(page.count("</script>"), page.count("<script"), "HTML: every </script> ends a script the page opened")
        check("\x1b" not in page, "HTML: no escape byte")

        strings = string_table(gzip.decompress(open(pb, "rb").read()))
        for st in strings:
            st.decode("utf-8")  # strict
        check(any(st.startswith(EVIL.encode()) for st in strings), "pprof: the function's name among its strings")

        mtext = metrics.decode("utf-8")
        series = [l for l in mtext.splitlines() if l and not l.startswith("#")]
        check(series and all(re.fullmatch(r'[a-z_]+(\{([a-z_]+="([^"\\\n]|\\.)*",?)*\})? \S+', l) for l in series),
              f"Prometheus: every series line parses: {[l for l in series if not re.fullmatch(r'[a-z_]+.* [^ ]+', l)][:3]}")

        out, _ = names_run(d, "-f", "folded")
        lines = out.decode("utf-8").splitlines()
        check(lines and all(re.fullmatch(r"[^ ;\x00-\x1f]+(;[^ ;\x00-\x1f]+)* \d+", l) for l in lines),
              f"folded: frames ; frames count, on every line: {[l for l in lines if ' ' not in l][:2]}")
        check(any('</script>"__[2J_x_y\ufffd_(leak.py:5)' in l for l in lines), "folded: the function, flattened")


if __name__ == "__main__":
    main()
