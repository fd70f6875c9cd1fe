"""Seeds for fuzz_pyframes from a real CPython: a training step's code object with its file name, qualified name
and line table, read from this interpreter's memory, their pointers to each other and to their types relocated
as the fuzzer's input format says. Run with each CPython the tool supports: python3.X seed_pyframes.py DIR."""
import ctypes
import os
import struct
import sys


def train_step(model, batch):
    loss = model(batch).sum()
    loss.backward()
    return loss


def raw(obj):
    return bytearray(ctypes.string_at(id(obj), obj.__sizeof__()))


def main(out_dir):
    code = train_step.__code__
    parts = [code, code.co_filename, code.co_qualname, code.co_linetable]
    images, offs, at = [], [], 0
    for obj in parts:
        offs.append(at)
        images.append(raw(obj))
        at = (at + len(images[-1]) + 15) & ~15
    marks = {id(o): 0xa5000000_00000000 | off for o, off in zip(parts, offs)}
    marks.update({id(type(code)): 0xa6000000_00000000, id(str): 0xa6000000_00000001, id(bytes): 0xa6000000_00000002})
    mem = bytearray(at)
    for img, off in zip(images, offs):
        for i in range(0, len(img) - 7, 8):
            w = struct.unpack_from("<Q", img, i)[0]
            if w in marks:
                struct.pack_into("<Q", img, i, marks[w])
        mem[off:off + len(img)] = img
    layout = {11: 0, 12: 1, 13: 2}[sys.version_info[1]]
    head = struct.pack("<BIQ", layout, 10, marks[id(code.co_linetable)])
    name = os.path.join(out_dir, f"train-step-3.{sys.version_info[1]}.bin")
    with open(name, "wb") as f:
        f.write(head + mem)


if __name__ == "__main__":
    main(sys.argv[1])
