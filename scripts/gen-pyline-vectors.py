#!/usr/bin/env python3
"""Test vectors for the CPython location-table parser (user/python/pyline.c), taken from real interpreters.

Run with one interpreter and no arguments, it compiles the sample source below and prints a C header fragment:
one initializer per code object, with the interpreter version, co_firstlineno, the co_linetable bytes and the
line of every code unit as runs of (count, line), None written as -1. The lines come from co_positions() and are
checked against co_lines() before anything is printed.

Given interpreters as arguments, it runs itself under each of them, with and without -X no_debug_ranges (which
makes the compiler write the column-less entry kind), and prints the whole tests/unit/pyline_vectors.h:

    python3 scripts/gen-pyline-vectors.py /root/.pyenv/versions/3.11.7/bin/python3.11 \\
        /root/.pyenv/versions/3.12.1/bin/python3.12 /root/.pyenv/versions/3.13.0/bin/python3.13 \\
        >tests/unit/pyline_vectors.h

Fragments identical to one already printed (same version family, same tables) are left out.
"""
import subprocess
import sys

# Varied shapes: loops and jumps back, multi-line expressions, nesting, decorators, exception handling (whose
# cleanup code has no line), generators, comprehensions, columns past 127 (long form) and, at the end, a
# function whose lines are past 1000.
SAMPLE = '''\
import functools


def loop(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        while total < i:
            total += 1
    return total


def multiline(a, b,
              c=3):
    x = (a +
         b *
         c)
    y = [
        a, b,
        c,
    ]
    return foo(x,
               y)[
        0]


def outer(k):
    def inner(m):
        return lambda z: z + m + k
    return inner(k)


def deco(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)
    return wrapper


@deco
@functools.lru_cache(
    maxsize=None)
def decorated(q):
    return q * 2


def handlers(path):
    try:
        with open(path) as fh:
            data = fh.read()
    except (OSError, ValueError) as e:
        data = str(e)
    finally:
        path = None
    return data


def gen(n):
    for i in range(n):
        yield i
    yield from range(3)


async def coro(a):
    async with a as b:
        await b
    async for c in a:
        pass


def comps(xs):
    return [x for x in xs if x], {k: v for k, v in xs}, sum(x * x for x in xs)


def wide(xs):
    return xs.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccccccccccccccc(xs).ddddddddddddddddddddddddddd(1)


def matcher(v):
    match v:
        case [a, b]:
            return a
        case {"k": w}:
            return w
        case _:
            return None


class Klass:
    attr = 1

    def method(self):
        return self.attr
''' + '\n' * 1000 + '''\
def far(a):
    if a:
        return a + \\
            1
''' + '\n' * 300 + '''\
    return (a,
            far(a - 1))
'''


def c_str(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def lines_of(code):
    """Line of each code unit from co_positions(), checked against co_lines() (byte offsets)."""
    n = len(code.co_code) // 2
    pos = [p[0] for p in code.co_positions()]
    if len(pos) != n:
        raise SystemExit('%s: co_positions() gave %d entries for %d code units' % (code.co_name, len(pos), n))
    from_lines = ['not covered'] * n
    for start, end, line in code.co_lines():
        for i in range(start // 2, end // 2):
            from_lines[i] = line
    for i in range(n):
        if from_lines[i] != pos[i]:
            raise SystemExit('%s: unit %d: co_lines() says %r, co_positions() %r' %
                             (code.co_name, i, from_lines[i], pos[i]))
    return [-1 if line is None else line for line in pos]


def runs(values):
    out = []
    for v in values:
        if out and out[-1][1] == v:
            out[-1][0] += 1
        else:
            out.append([1, v])
    return out


def walk(code, prefix):
    name = prefix + code.co_name
    yield name, code
    for c in code.co_consts:
        if hasattr(c, 'co_linetable'):
            yield from walk(c, name + '.')


def wrap(items, indent='\t\t'):
    """Comma-separated items, wrapped under 120 columns (tabs counted as 8)."""
    out, line = [], ''
    for item in items:
        if line and 16 + len(line) + len(item) + 2 > 118:
            out.append(indent + line.rstrip())
            line = ''
        line += item + ', '
    if line:
        out.append(indent + line.rstrip().rstrip(','))
    return '\n'.join(out)


def fragment():
    version = '%d.%d.%d' % sys.version_info[:3]
    nodebug = 'no_debug_ranges' in sys._xoptions
    tag = version + (' no_debug_ranges' if nodebug else '')
    out = ['\t/* %s */' % tag]
    for name, code in walk(compile(SAMPLE, 'sample.py', 'exec'), ''):
        table = code.co_linetable
        r = runs(lines_of(code))
        out.append('\t{ %s, %s, %d, %d, (const uint8_t[]){\n%s },\n\t  %d, (const int[]){\n%s } },' %
                   (c_str(tag), c_str(name), code.co_firstlineno, len(table),
                    wrap('0x%02x' % b for b in table), len(r), wrap('%d, %d' % (n, line) for n, line in r)))
    return '\n'.join(out) + '\n'


def header(interpreters):
    body = []
    seen = set()
    for py in interpreters:
        for flags in ([], ['-X', 'no_debug_ranges']):
            text = subprocess.run([py] + flags + [__file__], check=True, capture_output=True, text=True).stdout
            # The same tables from another patch release add nothing: compare without the version tag.
            tag = text.split('"', 2)[1]
            version = tag.split()[0]
            key = (version.rsplit('.', 1)[0], tag.replace(version, ''),
                   text.split('\n', 1)[1].replace('"%s' % version, '"'))
            if key in seen:
                continue
            seen.add(key)
            body.append(text)
    return ('/* Generated by scripts/gen-pyline-vectors.py from real interpreters: do not edit. */\n'
            '/* One initializer per code object: version, name, co_firstlineno, co_linetable (length, bytes), then\n'
            '   the line of every code unit as runs of (count, line), -1 for none. */\n'
            + ''.join(body))


if __name__ == '__main__':
    if len(sys.argv) > 1:
        sys.stdout.write(header(sys.argv[1:]))
    else:
        sys.stdout.write(fragment())
