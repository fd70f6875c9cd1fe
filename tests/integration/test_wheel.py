"""PyPI's torch wheel without a GPU: in a process that imported the pinned torch (tests/requirements.txt,
in build/venv/3.12 from scripts/make-venv.sh) and called torch.cuda.is_available(), the probes memleak-ai places
in the wheel's real libraries are found and attached: pytorch:malloc/pytorch:free and the NativeCachingAllocator
methods in torch/lib/libc10_cuda.so, cudaMalloc/cudaFree in nvidia/cu13/lib/libcudart.so.13. A later torch that
moves or renames them fails here. The driver (libcuda.so.1) is not on a machine without a GPU: its entry points
are checked where the target maps it (scripts/gpu-validate.sh on a GPU machine sets MEMLEAK_AI_NEED_DRIVER)."""
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, Fail, attached_run, check, eq, main, test, test_no_asan  # noqa: E402

# MEMLEAK_AI_WHEEL_PY: another interpreter with torch (scripts/gpu-validate.sh passes the GPU machine's).
WHEEL_PY = os.environ.get("MEMLEAK_AI_WHEEL_PY") or os.path.join(ROOT, "build", "venv", "3.12", "bin", "python")

# What the pinned wheel's libc10_cuda.so carries (readelf -n; docs/GPU.md). Per note: location, semaphore,
# argument specs. torch_malloc/torch_free in bpf/probes.bpf.c read them as (ptr, device, size, stream) and (ptr).
PINNED = "2.15.0+cu132"
PINNED_NOTES = {
    "free": [(0x171d5, 0x867c8, "-8@%rdi"), (0x22997, 0x867c8, "-8@%rdi")],
    "malloc": [(0x4a173, 0x867ca, "-8@%rbp -1@%al -8@%r12 -8@56(%rsp)"),
               (0x514ed, 0x867ca, "-8@%rax -1@%dl -8@%r14 -8@-56(%rbp)")],
}
# The argument sizes the BPF programs are written for (a negative size is a signed value).
LAYOUT = {"malloc": [-8, -1, -8, -8], "free": [-8]}

RAW = ["c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_alloc(unsigned long)",
       "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_alloc_with_stream(unsigned long, "
       "CUstream_st*)",
       "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_delete(void*)"]
CUDART = ["cudaMalloc", "cudaFree"]
# c10::Error's constructor, which OutOfMemoryError's calls (2.15) or inlines (2.11): an entry probe whose BPF side
# keeps the CUDA out-of-memory messages.
OOM_ERROR = ("c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, "
             "std::char_traits<char>, std::allocator<char> >)")
DRIVER = ["cuMemCreate", "cuMemMap", "cuMemAlloc_v2"]

TARGET = ("import os, sys, torch\n"
          "avail = torch.cuda.is_available()\n"
          "print('ready', os.getpid(), torch.__version__, 'cuda available:', avail, flush=True)\n"
          "sys.stdin.buffer.read(1)\nprint('done', flush=True)\nsys.stdin.buffer.read(1)\n")


def wheel_py():
    if not os.access(WHEEL_PY, os.X_OK):
        raise Fail(f"{WHEEL_PY} missing: scripts/make-venv.sh builds it with PyPI's torch "
                   "(tests/requirements.txt)")
    return WHEEL_PY


def sdt_notes(path):
    """The SystemTap SDT notes of a 64-bit little-endian ELF file, read here (not by the tool):
    [(provider, name, location, base, semaphore, args)]."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not a 64-bit little-endian ELF")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = shdrs[shstrndx]
    out = []
    for sh in shdrs:
        name = data[strtab[4] + sh[0]:data.index(b"\0", strtab[4] + sh[0])].decode()
        if name != ".note.stapsdt":
            continue
        off, end = sh[4], sh[4] + sh[5]
        while off + 12 <= end:
            namesz, descsz, typ = struct.unpack_from("<III", data, off)
            owner = data[off + 12:off + 12 + namesz]
            desc = off + 12 + (namesz + 3) // 4 * 4
            if typ == 3 and owner == b"stapsdt\0":
                pc, base, sem = struct.unpack_from("<QQQ", data, desc)
                strs = data[desc + 24:desc + descsz].split(b"\0")
                out.append((strs[0].decode(), strs[1].decode(), pc, base, sem, strs[2].decode()))
            off = desc + (descsz + 3) // 4 * 4
    return out


def arg_sizes(args):
    """'-8@%rbp -1@%al' -> [-8, -1]."""
    return [int(a.split("@", 1)[0]) for a in args.split()]


def pytorch_notes(path):
    """{name: [(location, semaphore, args)]} of the pytorch provider's notes in path."""
    notes = {}
    for prov, name, pc, _, sem, args in sdt_notes(path):
        if prov == "pytorch":
            notes.setdefault(name, []).append((pc, sem, args))
    return notes


def site_packages():
    r = subprocess.run([wheel_py(), "-c", "import sysconfig, torch; "
                        "print(torch.__version__, sysconfig.get_paths()['purelib'])"],
                       capture_output=True, text=True, timeout=120)
    eq(r.returncode, 0, f"import torch ({r.stderr[-300:]})")
    version, sp = r.stdout.split()
    return version, sp


@test_no_asan  # reads the file, runs no memleak-ai
def pinned_wheel_notes_unchanged():
    """The SDT notes of the pinned wheel's libc10_cuda.so, read here: the recorded locations, semaphores and
    argument specs. A later torch that moves them, changes their arguments or drops one fails, saying what."""
    version, sp = site_packages()
    c10 = os.path.join(sp, "torch", "lib", "libc10_cuda.so")
    check(os.path.exists(c10), f"torch {version}: no torch/lib/libc10_cuda.so in {sp}")
    notes = pytorch_notes(c10)
    eq(sorted(notes), sorted(PINNED_NOTES), f"torch {version}: pytorch notes in {c10} (recorded: torch {PINNED})")
    for name, want in PINNED_NOTES.items():
        for pc, sem, args in notes[name]:
            check(sem, f"torch {version}: pytorch:{name} at 0x{pc:x} has no semaphore any more")
            eq(arg_sizes(args), LAYOUT[name],
               f"torch {version}: pytorch:{name}'s argument layout at 0x{pc:x} (\"{args}\"), which "
               f"bpf/probes.bpf.c reads as {'(ptr, device, size, stream)' if name == 'malloc' else '(ptr)'}")
        got = [(f"0x{pc:x}", f"0x{sem:x}", args) for pc, sem, args in notes[name]]
        exp = [(f"0x{pc:x}", f"0x{sem:x}", args) for pc, sem, args in want]
        eq(got, exp, f"torch {version}: pytorch:{name} (location, semaphore, args) moved or changed since torch "
           f"{PINNED}: record the new ones in docs/GPU.md and here")
    eq(version, PINNED, "the torch the notes were recorded from (docs/GPU.md)")


@test
def wheel_probes_attach():
    """memleak-ai -v -p on a Python that imported the wheel's torch and called torch.cuda.is_available(): every
    probe found where the wheel has it and attached, with no libbpf warning."""
    seen = {}

    def after_go(fx, tool):
        with open(f"/proc/{fx.pid}/maps") as f:
            seen["maps"] = {l.split(None, 5)[5].strip() for l in f if len(l.split(None, 5)) == 6}

    tool, _ = attached_run([wheel_py(), "-c", TARGET], "-v", "--torch-raw-alloc", "-f", "json", "60",
                           after_go=after_go, ready_timeout=120)
    err = tool.stderr_lines
    bad = [l for l in err if l.startswith("libbpf:") or "cannot attach" in l or "not probed:" in l]
    eq(bad, [], "libbpf warnings or attach errors")
    maps = seen["maps"]
    c10 = next((p for p in maps if p.endswith("/torch/lib/libc10_cuda.so")), None)
    check(c10, "the target maps torch/lib/libc10_cuda.so after torch.cuda.is_available()")
    sp = c10[:-len("/torch/lib/libc10_cuda.so")]

    # pytorch:malloc and pytorch:free: each note's location, argument specs and semaphore, as the tool saw
    # them and as this test reads them from the file itself; libbpf parsed the specs (it attached, silently).
    notes = pytorch_notes(c10)
    eq(sorted(notes), ["free", "malloc"], f"pytorch notes in {c10}")
    for name, locs in notes.items():
        eq([l for l in err if f"USDT pytorch:{name} attached in " in l],
           [f"memleak-ai: USDT pytorch:{name} attached in {c10}: {len(locs)} locations"], f"pytorch:{name} attached")
        for pc, sem, args in locs:
            want = (f"memleak-ai: USDT pytorch:{name} in {c10} at 0x{pc:x}: {len(args.split())} args \"{args}\", "
                    f"semaphore 0x{sem:x}")
            check(want in err, f"the tool's reading of pytorch:{name} at 0x{pc:x}: want {want!r}, its lines: "
                  f"{[l for l in err if 'USDT' in l]}")
            check(sem, f"pytorch:{name} at 0x{pc:x} has a semaphore")
            eq(arg_sizes(args), LAYOUT[name], f"pytorch:{name}'s argument layout at 0x{pc:x}")

    def probed(path, func, layer):
        pat = re.compile(re.escape(f"memleak-ai: {path}: {func} probed at offset 0x") + r"[0-9a-f]+ " +
                         re.escape(f"(layer {layer})") + "$")
        return any(pat.match(l) for l in err)

    def lines(part):
        return [l for l in err if part in l and "probed at" in l]

    for func in RAW:
        check(probed(c10, func, "torch_cuda"), f"{func} probed in {c10}: {lines('libc10_cuda.so')}")
    # The out-of-memory error's base constructor, in libc10.so beside it (entry only: the raise's report).
    lib_c10 = c10.replace("libc10_cuda.so", "libc10.so")
    check(probed(lib_c10, OOM_ERROR, "torch_cuda"), f"{OOM_ERROR} probed in {lib_c10}: {lines('libc10.so')}")
    cudart = os.path.join(sp, "nvidia", "cu13", "lib", "libcudart.so.13")
    check(cudart in maps, f"the target maps {cudart}: {sorted(p for p in maps if 'cudart' in p)}")
    for func in CUDART:
        check(probed(cudart, func, "cuda"), f"{func} probed in {cudart}: {lines('libcudart')}")
    # The driver's file is libcuda.so.1's target: libcuda.so.580.159.04 on the H100 machine.
    driver = [p for p in maps if os.path.basename(p).startswith("libcuda.so.")]
    if driver:
        for func in DRIVER:
            check(probed(driver[0], func, "cuda_map" if func == "cuMemMap" else "cuda"),
                  f"{func} probed in {driver[0]}: {lines('libcuda.so.')}")
    elif os.environ.get("MEMLEAK_AI_NEED_DRIVER"):
        raise Fail("the target maps no libcuda.so.1: is the NVIDIA driver installed?")
    else:
        print("# no libcuda.so.1 here (no GPU): cuMemCreate/cuMemMap/cuMemAlloc_v2 are checked by "
              "scripts/gpu-validate.sh", flush=True)


if __name__ == "__main__":
    sys.exit(main())
