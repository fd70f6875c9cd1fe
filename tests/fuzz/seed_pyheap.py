"""Seeds for fuzz_pyheap from a real CPython: one pymalloc pool of this interpreter (tuples, GC objects after
their GC head; floats, plain objects; floats every other one freed, on the pool's free list), then the type objects its blocks name, each with its tp_name and its
own type, read from memory; pointers into the pool and to those types relocated as the fuzzer's input format
says. Run with each CPython the tool supports: python3.X seed_pyheap.py DIR."""
import ctypes
import os
import struct
import sys

POOL = 16384
TP_READ = 176
MARK = 0xa5000000_00000000


def types_by_address():
    seen, todo = {}, [object, type]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        todo.append(type(t))
        try:
            todo.extend(type.__subclasses__(t))
        except TypeError:
            pass
    return seen


def seed(kind, objs, out_dir):
    pool = id(objs[len(objs) // 2]) & ~(POOL - 1)
    mem = bytearray(ctypes.string_at(pool, POOL))
    known = types_by_address()
    slots, names = {}, bytearray()
    words = [struct.unpack_from("<Q", mem, i)[0] for i in range(0, POOL, 8)]
    named = [known[w] for w in words if w in known]
    for t in named + [type(t) for t in named] + [type]:
        slots.setdefault(id(t), t)
    at = POOL + len(slots) * TP_READ
    name_at = {}
    for a, t in slots.items():
        name_at[a] = at + len(names)
        names += t.__name__.encode() if t.__module__ == "builtins" else ctypes.string_at(
            struct.unpack_from("<Q", ctypes.string_at(a, 32), 24)[0])
        names += b"\0"
    offset = {a: POOL + k * TP_READ for k, a in enumerate(slots)}
    for i in range(0, POOL, 8):
        w = struct.unpack_from("<Q", mem, i)[0]
        if pool <= w < pool + POOL:
            struct.pack_into("<Q", mem, i, MARK | (w - pool))
        elif w in offset:
            struct.pack_into("<Q", mem, i, MARK | offset[w])
    for a, t in slots.items():
        tp = bytearray(ctypes.string_at(a, TP_READ))
        struct.pack_into("<Q", tp, 8, MARK | offset[id(type(t))])
        struct.pack_into("<Q", tp, 24, MARK | name_at[a])
        mem += tp
    mem += names
    with open(os.path.join(out_dir, f"{kind}-pool-3.{sys.version_info[1]}.bin"), "wb") as f:
        f.write(bytes(8) + mem)


def main(out_dir):
    tuples = [(i, -i) for i in range(2000)]
    floats = [float(i) + 0.5 for i in range(2000)]
    seed("tuple", tuples, out_dir)
    seed("float", floats, out_dir)
    del floats[::2]  # every other block freed: a free list through the pool
    seed("float-freed", floats, out_dir)


if __name__ == "__main__":
    main(sys.argv[1])
