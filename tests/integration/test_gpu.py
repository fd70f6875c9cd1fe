"""Integration tests of the GPU and PyTorch layers: stand-in CUDA/PyTorch libraries (no GPU here), the real CUDA
13 runtime, and real PyTorch on CPU."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import test_no_asan, FIX, ROOT, Fail, Fixture, Tool, attached_run, by_func, check, eq, main, read_line, run_tool, test, torch_py  # noqa: E402

GPU = os.path.join(FIX, "gpu")


def wait_stderr(tool, text, timeout=10):
    """A line of the tool's stderr with text, among those read already (the libraries a dlopen brings are
    announced in the order they are found) or the next ones."""
    for line in tool.stderr_lines:
        if text in line:
            return line
    while True:
        line = read_line(tool.p.stderr, timeout, text)
        tool.stderr_lines.append(line)
        if text in line:
            return line


def run_gpu_app(*tool_args, libdir=GPU, raw=True):
    fx = Fixture("gpu/gpu_app", libdir)
    tool = Tool("-p", str(fx.pid), "-f", "json", "--top", "1000", *(["--torch-raw-alloc"] if raw else []), *tool_args,
                "60")
    try:
        tool.wait_attached()
        fx.go()  # dlopen the libraries now, after attach
        check(read_line(fx.p.stdout, 10, "loaded") == "loaded", "fixture loaded its libraries")
        want = [l for l in ("torch_cuda", "cuda", "cuda_host", "cuda_map") if not tool_args or l in tool_args[-1].split(",")]
        for layer in want:
            wait_stderr(tool, f"layer {layer} now active")
        # A layer is announced by the first object that brings it; the same rescan goes on to the dlopen's
        # other libraries (libcudart after libcuda) for a few milliseconds more.
        time.sleep(0.5)
        fx.go()
        fx.wait_done()
        tool.p.send_signal(signal.SIGINT)  # final report while the target still holds everything
        eq(tool.finish(), 0, "exit status")
        return tool.reports()[-1], tool
    finally:
        tool.kill()
        fx.kill()


def torch_cuda_trail(rep, tool):
    """What a miscount of the tensor layer needs to be read (CI once saw the USDT blocks missing): its probe
    hits, its layer's events, the budget's modes and what the tool said of libc10_cuda.so."""
    said = [l for l in tool.stderr_lines if "libc10_cuda" in l or "USDT" in l or "budget" in l]
    return json.dumps({"hits": rep["stats"]["hits"].get("torch_cuda"), "layer": rep["stats"]["layers"].get("torch_cuda"),
                       "modes": rep.get("modes"), "said": said})


CUDA_BYTES = 3 * (1 << 20) + 2 * (2 << 20) + 65536 + 12288 + 10240 + 8192 + 5000 + 3000 + 896


@test
def command_mode_probes_a_dlopened_library_before_its_first_call():
    """-c: a program dlopens the CUDA runtime after start and calls cudaMalloc at once, 80 times 30 ms apart
    (import torch, then the model's weights): the loader's report stops it until the library is probed, so
    every call is in the cuda layer, none seen only as the C heap's malloc inside cudaMalloc."""
    rc, out, err = run_tool("-f", "json", "-c", f"{GPU}/dlopen_burst {GPU}", "60", timeout=60)
    eq(rc, 0, f"exit status ({err[-300:]})")
    rep = [json.loads(l) for l in out.splitlines()][-1]
    eq((rep["totals"]["cuda"]["bytes"], rep["totals"]["cuda"]["count"]), (80 * 4096 + 79 * 80 // 2, 80),
       "every cudaMalloc in the cuda layer, exact bytes")
    eq(rep["stats"]["layers"]["cuda"]["allocs"], 80, "80 calls seen")


@test
def gpu_layers_exact_bytes_after_late_dlopen():
    rep, tool = run_gpu_app()
    t = rep["totals"]
    eq((t["cuda"]["bytes"], t["cuda"]["count"]), (CUDA_BYTES, 12),
       "cuda: runtime+driver allocations, failed ones and frees excluded, runtime->driver counted once")
    eq((t["cuda_map"]["bytes"], t["cuda_map"]["count"]), (2 << 20, 1), "cuMemMap'd range (the other one unmapped)")
    eq((t["cuda_host"]["bytes"], t["cuda_host"]["count"]), (3000 + 700 + 900, 3), "pinned host memory")
    eq((t["torch_cuda"]["bytes"], t["torch_cuda"]["count"]), (4 * 512 + 2048 + 1536, 6),
       "tensor blocks: USDT malloc/free and raw_alloc/raw_delete " + torch_cuda_trail(rep, tool))
    check(rep["stats"]["events"]["failed_allocs"] >= 2, "failed cudaMalloc and cuMemMap counted")
    lay = rep["stats"]["layers"]
    eq((lay["cuda_map"]["allocs"], lay["cuda_map"]["frees"]), (2, 1), "cuMemMap twice, cuMemUnmap once")
    eq(lay["cuda_host"]["frees"], 2, "cudaFreeHost and cuMemFreeHost")
    cuda = by_func(rep, "cuda")
    eq(cuda.get("main"), (CUDA_BYTES - (2 << 20), 11), "allocations made by main")
    eq(cuda.get("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::carve(unsigned long)"),
       (2 << 20, 1), "the caching allocator's segment, reached from inside raw_alloc/allocate")
    tc = by_func(rep, "torch_cuda")
    eq(tc.get("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long, signed char)"),
       (2048, 4), "USDT-announced blocks (frame 0: the probe site)")
    devs = {d["device"]: d for d in rep["devices"]}
    eq((devs[1]["reserved_bytes"], devs[1]["allocated_bytes"], devs[1]["cached_bytes"]),
       (2 << 20, 4 * 512 + 2048 + 1536, (2 << 20) - (4 * 512 + 2048 + 1536)),
       "device 1: the segment holding its tensors, reserved vs allocated")
    eq((devs[2]["reserved_bytes"], devs[2]["allocated_bytes"]), (2 << 20, 0),
       "device 2: cuMemCreate's physical memory, device read from its CUmemAllocationProp")
    eq(devs[None]["reserved_bytes"], CUDA_BYTES - 2 * (2 << 20), "segments of unknown device")
    eq(rep["stats"]["events"]["frees_unknown"], 0, "releases nested in cudaFree/cudaFreeHost not counted twice")
    check(any("layer cuda now active" in l and ("libcudart.so.13" in l or "libcuda.so.1" in l) for l in tool.stderr_lines),
          "late library announced (by the runtime or the driver, whichever the rescan met first)")


@test
def raw_alloc_needs_opt_in():
    rep, tool = run_gpu_app(raw=False)
    eq((rep["totals"]["torch_cuda"]["bytes"], rep["totals"]["torch_cuda"]["count"]), (4 * 512, 4),
       "without --torch-raw-alloc only USDT-announced blocks (no return probes on C++ code)")
    eq(rep["stats"]["events"]["frees_unknown"], 1, "raw_delete (always probed, entry only) of a block not recorded")


@test
def stripped_pytorch_build_degrades_with_notice():
    rep, tool = run_gpu_app(libdir=os.path.join(FIX, "gpu-stripped"))
    notes = [l for l in tool.stderr_lines if "no raw_alloc/raw_delete symbols" in l]
    eq(len(notes), 1, f"one notice: {tool.stderr_lines}")
    check("libc10_cuda.so" in notes[0], notes[0])
    eq((rep["totals"]["torch_cuda"]["bytes"], rep["totals"]["torch_cuda"]["count"]), (4 * 512, 4),
       "USDT-announced blocks still seen, raw_alloc ones not")


@test
def cuda_runtime_linked_into_another_library():
    fx = Fixture("gpu/ext_app")
    tool = Tool("-p", str(fx.pid), "-f", "json", "-v", "60")
    try:
        tool.wait_attached()
        fx.go()
        fx.wait_done()
        tool.p.send_signal(signal.SIGINT)
        eq(tool.finish(), 0, "exit status")
        rep = tool.reports()[-1]
        check(any("probing 11 functions in" in l and "libtorchext.so" in l for l in tool.stderr_lines),
              f"found cudaMalloc in libtorchext.so's .symtab: {tool.stderr_lines}")
        eq((rep["totals"]["cuda"]["bytes"], rep["totals"]["cuda"]["count"]), (3 * 4096, 3), "cuda totals")
    finally:
        tool.kill()
        fx.kill()


@test
def command_mode_probes_linked_libraries_before_they_run():
    from harness import run_tool
    rc, out, err = run_tool("-f", "json", "-c", os.path.join(GPU, "early_app"), "60")
    eq(rc, 0, f"exit status ({err})")
    rep = [json.loads(l) for l in out.splitlines()][-1]
    eq((rep["totals"].get("cuda", {}).get("bytes"), rep["totals"].get("cuda", {}).get("count")), (3 * 65536, 3),
       "allocations in main's first microseconds, through libcudart.so.13 mapped by the loader")


@test
def layers_option_limits_probes():
    rep, tool = run_gpu_app("--layers", "torch_cuda")
    eq(sorted(rep["totals"]), ["torch_cuda"], "only the requested layer")
    eq(rep["totals"]["torch_cuda"]["bytes"], 4 * 512 + 2048 + 1536, "same tensor bytes")
    check(not any("layer cuda now active" in l for l in tool.stderr_lines), "cuda not probed")


@test
def layers_option_rejects_unknown():
    from harness import run_tool
    rc, out, err = run_tool("-p", "1", "--layers", "libc,gpu")
    eq(rc, 2, "usage error")
    check("invalid --layers 'libc,gpu'" in err, err)


@test
def real_cuda_runtime_without_gpu():
    if not os.path.exists(os.path.join(GPU, "cuda_real")):
        raise Fail("cuda_real not built: the CUDA 13 toolkit is expected on the build machines")
    fx = Fixture("gpu/cuda_real")
    tool = Tool("-p", str(fx.pid), "-f", "json", "-v", "60")
    try:
        tool.wait_attached()
        fx.go()
        line = read_line(fx.p.stdout, 30, "done")
        eq(line, "done 6", "every real CUDA allocation failed (no GPU)")
        tool.p.send_signal(signal.SIGINT)
        eq(tool.finish(), 0, "exit status")
        rep = tool.reports()[-1]
        check(any("layer cuda active" in l and "libcudart.so.13" in l for l in tool.stderr_lines),
              f"real libcudart.so.13 probed: {tool.stderr_lines}")
        eq(rep["totals"].get("cuda", {}).get("bytes", 0), 0, "nothing recorded for failed calls")
        eq(rep["totals"].get("cuda_host", {}).get("bytes", 0), 0, "nothing recorded for failed pinned allocations")
        check(rep["stats"]["events"]["failed_allocs"] >= 6, f"failures counted: {rep['stats']['events']}")
    finally:
        tool.kill()
        fx.kill()


def torch_run(mode):
    script = os.path.join(ROOT, "tests", "fixtures", "torch_loop.py")
    tool, _ = attached_run([torch_py(), script, mode], "-f", "json", "--layers", "torch_cpu", "--top", "50", "0.5")
    return tool.reports()


@test_no_asan
def pytorch_cpu_exception_through_alloc_cpu_is_safe():
    """alloc_cpu throws when memory runs out; an exception through a return probe would kill the job."""
    code = ("import torch, sys\n"
            "sys.stdin.buffer.read(1)\n"
            "try:\n    torch.empty(1 << 60, dtype=torch.uint8)\nexcept RuntimeError:\n    print('caught', flush=True)\n"
            "keep = [torch.ones(1000) for _ in range(10)]\nprint('done', flush=True)\nsys.stdin.buffer.read(1)\n")
    # torch imported before "ready": libc10 is probed at attach, not by a rescan racing the tensors (a flake)
    fx = subprocess.Popen([torch_py(), "-c", "import os, torch; print('ready', os.getpid(), flush=True)\n" + code],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        read_line(fx.stdout, 60, "ready")
        tool = Tool("-p", str(fx.pid), "-f", "json", "--layers", "torch_cpu", "60")
        try:
            tool.wait_attached()
            fx.stdin.write(b"g")
            fx.stdin.flush()
            eq(read_line(fx.stdout, 60, "caught"), "caught", "the job caught its out-of-memory error")
            eq(read_line(fx.stdout, 60, "done"), "done", "and went on")
            tool.p.send_signal(signal.SIGINT)
            eq(tool.finish(), 0, "exit status")
            rep = tool.reports()[-1]
            f = by_func(rep, "torch_cpu")
            check(sum(c for b, c in f.values()) >= 10, f"the ten tensors after it are recorded: {f}")
            check(fx.poll() is None, "target alive")
        finally:
            tool.kill()
    finally:
        fx.kill()
        fx.wait()


@test_no_asan
def pytorch_cpu_kept_losses_grow():
    keep = torch_run("keep")
    item = torch_run("item")
    kb = keep[-1]["totals"].get("torch_cpu", {}).get("bytes", 0)
    ib = item[-1]["totals"].get("torch_cpu", {}).get("bytes", 0)
    # 400 steps, each keeping its graph: the fixture's activations alone are 64 x 256 floats per step.
    check(kb >= 400 * 64 * 256 * 4, f"losses.append(loss) keeps graphs: torch_cpu holds {kb} bytes")
    check(ib < kb / 10, f"loss.item() keeps nothing: torch_cpu holds {ib} bytes vs {kb}")
    growing = [r["totals"]["torch_cpu"]["growth_bytes"] for r in keep[1:-1] if "torch_cpu" in r["totals"]]
    check(growing and sum(1 for g in growing if g > 0) >= len(growing) * 0.7,
          f"kept losses grow report after report: {growing}")
    steady = [r["totals"]["torch_cpu"]["growth_bytes"] for r in item[2:-1] if "torch_cpu" in r["totals"]]
    check(steady and all(abs(g) < 1 << 20 for g in steady), f"item() loop stays flat: {steady}")
    growing = [s for s in keep[-2]["stacks"] if s["layer"] == "torch_cpu" and s["verdict"] == "growing"]
    check(growing and sum(s["bytes"] for s in growing) >= kb / 2,
          f"kept losses: the torch_cpu stacks holding them are leak candidates: {[s['verdict'] for s in keep[-2]['stacks']]}")
    eq([s["verdict"] for s in item[-2]["stacks"] if s["verdict"] == "growing"], [], "item() loop: no leak candidate")
    first = next((r["seq"] for r in keep if any(s["layer"] == "torch_cpu" and s["verdict"] == "growing"
                                                 for s in r["stacks"])), None)
    check(first is not None and first <= 6, f"kept losses flagged within a few reports: report {first}")


if __name__ == "__main__":
    sys.exit(main())
