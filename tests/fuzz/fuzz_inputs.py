"""Fuzz inputs: random bytes and text, and mutations of real samples, all from one seeded generator.

The same (seed, reader, index) always gives the same input, so a failure is reproduced by its
number alone. `size` bounds what is generated: "small" keeps every input under about 64 KB (the
suite's pass), "large" lets a mutation add 1-10 MB lines (the campaign in benchmarks/fuzz.py).
"""

from __future__ import annotations

import random

# Characters readers split on, quote with or count: the near misses of real syntax.
SYNTAX = " \t=:,;#\"'`$(){}[]<>|&\\/.-_+*%!?@^~\n"
# Text that looks like a digit, a line end or nothing to one reader and something else to another.
UNICODE = ["\u00b2", "\u0663", "\uff11", "\u2028", "\u2029", "\u0085", "\u00a0", "\u200b", "\ufeff", "\u202e",
           "\U0001f600", "\u00e9", "\u0130", "\ufffd", "\x1b[31m", "\x0b", "\x0c", "\x1c"]
NUMBERS = ["9" * 5000, "-" + "9" * 4400, "1" + "0" * 400, "1e999", "-1e999", "1e-999", "inf", "-inf", "nan", "NaN",
           "Infinity", "-Infinity", "0x" + "f" * 300, "1_000", "٣", "²", "１２", "-0", "00000000000000000000001",
           "18446744073709551616", "9223372036854775808", "-9223372036854775809", "1.7976931348623157e309",
           "3" * 310 + ".5", ".inf", "-.inf", ".nan", "0o777", "0b101", "+1", "1e+400"]
HOSTILE = ["$(touch pwned)", "`touch pwned`", "; touch pwned", "\ntouch pwned\n", "\rtouch pwned", "'\"", "\\",
           "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "| a | b |",
           "# heading", "``", "${IFS}", "../../etc/passwd", "/etc/passwd", "\x00", "%s%n", "{{7*7}}"]
# YAML documents whose size or structure explodes on loading, or that try to construct objects.
YAML_BOMBS = [
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b,"
    " *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b,"
    " *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n? [*d, *d, *d, *d, *d]\n: v\n",
    "? [a, b]\n: c\n", "? {a: b}\n: c\n", "!!python/object/apply:os.system ['touch pwned']\n",
    "a: !!binary AAAA\n", "a: !!timestamp 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\n", "<<: [*x]\n",
    "a: &x {b: 1}\n<<: *x\n<<: *x\n", "%YAML 1.1\n---\na: 1\n---\nb: 2\n", "a: !!set {x, y}\n", "a: 1\na: 2\n",
    "? - a\n  - b\n: c\n", "a: !!float 1e999\n", "a: !!int " + "9" * 5000 + "\n", "{" * 300 + "}" * 300,
    "[" * 5000 + "]" * 5000, "- " * 3000 + "x\n", "a: &a [*a]\n", "&a [*a]\n", "a: !foo bar\n",
]


def _rand_text(rng: random.Random, n: int) -> str:
    pool = rng.choice(["printable", "syntax", "unicode", "lines"])
    if pool == "printable":
        return "".join(chr(rng.randrange(32, 127)) if rng.random() > 0.05 else "\n" for _ in range(n))
    if pool == "syntax":
        return "".join(rng.choice(SYNTAX) if rng.random() > 0.3 else rng.choice("aZ09_") for _ in range(n))
    if pool == "unicode":
        return "".join(rng.choice(UNICODE) if rng.random() < 0.3 else chr(rng.randrange(32, 0x3000))
                       for _ in range(n))
    words = ["NCCL", "INFO", "WARN", "NET/IB", "mlx5_0", "GPU0", "X", "NV18", "PIX", "SYS", "export", "=", "#",
             "size", "float", "sum", "-1", "0", "Channel", "via", "port", "state:", "PORT_ACTIVE", "GID", "-",
             ":", "[0]", "rank", "nranks", "<0>", "\t", "  "] + NUMBERS[:6] + HOSTILE[:4]
    return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(1, 12)))
                     for _ in range(max(1, n // 40)))


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _big_line(rng: random.Random, size: str) -> bytes:
    """A long line: 1-10 MB (large) or up to 64 KB (small) of one repeated character or token."""
    n = rng.randrange(1 << 20, 10 << 20) if size == "large" else rng.randrange(1 << 10, 1 << 16)
    unit = rng.choice([b" ", b"0", b"9", b"=", b'"', b"'", b"a", b"\t", b"-", b"[", b"{", b":", b"x=", b"1 ",
                       b"NCCL_A=", b"\\", b"$(", b"# ", b"mlx5_", b"\xc2\xb2"])
    return (unit * (n // len(unit) + 1))[:n]


def cap(size: str) -> int:
    """The most bytes one input may hold: 16 MB large, 64 KB small (a few big mutations in a row stay bounded)."""
    return (16 << 20) if size == "large" else (64 << 10)


def mutate(rng: random.Random, data: bytes, size: str) -> tuple[str, bytes]:
    """One mutation of `data`, never longer than cap(size): (what was done, the result)."""
    how, out = _mutate(rng, data, size)
    return how, out[:max(cap(size), len(data) if size == "small" else 0)]


def _mutate(rng: random.Random, data: bytes, size: str) -> tuple[str, bytes]:
    how = rng.choice(["flip", "flip", "drop", "dup", "dup_many", "truncate", "number", "nest", "unicode", "nul",
                      "crlf", "bigline", "hostile", "splice", "yaml", "blank", "indent"])
    lines = _lines(data)
    if how == "flip":
        b = bytearray(data or b"x")
        for _ in range(rng.randrange(1, 9)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return how, bytes(b)
    if how == "drop":
        for _ in range(rng.randrange(1, 4)):
            if len(lines) > 1:
                del lines[rng.randrange(len(lines))]
        return how, b"\n".join(lines)
    if how in ("dup", "dup_many"):
        i = rng.randrange(len(lines))
        many = (200_000 if size == "large" else 2_000) if how == "dup_many" else 50
        copies = rng.randrange(1 if how == "dup" else 100, many)
        copies = max(1, min(copies, (cap(size) - len(data)) // (len(lines[i]) + 1)))   # never past the cap
        lines[i:i] = [lines[i]] * copies
        return how, b"\n".join(lines)
    if how == "truncate":
        return how, data[: rng.randrange(len(data) + 1)]
    if how == "number":
        text = data.decode("utf-8", "replace")
        digits = [i for i, c in enumerate(text) if c in "0123456789"]
        for _ in range(rng.randrange(1, 4)):
            if not digits:
                break
            i = rng.choice(digits)
            j = i
            while j < len(text) and text[j] in "0123456789.":
                j += 1
            text = text[:i] + rng.choice(NUMBERS) + text[j:]
            digits = [k for k in digits if k < i]
        return how, text.encode("utf-8", "surrogatepass")
    if how == "nest":
        depth = rng.randrange(50, 60_000 if size == "large" else 5_000)
        opener, closer = rng.choice([(b"[", b"]"), (b"{\"a\":", b"}"), (b"{a: ", b"}"), (b"- ", b""),
                                     (b"<a>", b"</a>"), (b"(", b")"), (b"[1,", b"]")])
        pos = rng.randrange(len(data) + 1)
        if opener == b"- ":
            piece = b"".join(b"  " * k + b"- \n" for k in range(min(depth, 400))) + b"x\n"
        else:
            piece = opener * depth + b"1" + closer * depth
        return how, data[:pos] + piece + data[pos:]
    if how == "unicode":
        text = data.decode("utf-8", "replace")
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(UNICODE) + text[i + 1:]
        return how, text.encode("utf-8", "surrogatepass")
    if how == "nul":
        b = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            b.insert(rng.randrange(len(b) + 1), 0)
        return how, bytes(b)
    if how == "crlf":
        return how, data.replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\r", b"\r\r\n"]))
    if how == "bigline":
        i = rng.randrange(len(lines) + 1)
        line = _big_line(rng, size)
        if rng.random() < 0.5 and lines and i < len(lines):
            line = lines[i] + line          # a real line's start, then the flood
        lines.insert(i, line)
        return how, b"\n".join(lines)
    if how == "hostile":
        text = data.decode("utf-8", "replace")
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(HOSTILE) + text[i:]
        return how, text.encode("utf-8", "surrogatepass")
    if how == "splice":
        a, b = sorted(rng.randrange(len(lines) + 1) for _ in range(2))
        return how, b"\n".join(lines[:a] + lines[b:] + lines[a:b])
    if how == "yaml":
        return how, data + b"\n" + rng.choice(YAML_BOMBS).encode()
    if how == "blank":
        i = rng.randrange(len(lines) + 1)
        n = rng.randrange(1000, 200_000 if size == "large" else 20_000)
        lines.insert(i, rng.choice([b"", b" ", b"\t", b"  \r"]) * 1 + b"\n" * n)
        return how, b"\n".join(lines)
    # indent: shift a block of lines to provoke the YAML/indentation readers
    a = rng.randrange(len(lines))
    for k in range(a, min(len(lines), a + rng.randrange(1, 20))):
        lines[k] = b" " * rng.randrange(0, 9) + lines[k].lstrip()
    return how, b"\n".join(lines)


def one_input(seeds: list[tuple[str, bytes]], seed: int, reader: str, index: int,
              size: str = "small") -> tuple[str, str | None, bytes]:
    """Input number `index` for `reader`: (a label saying how it was made, the seed's file name or None, its bytes).
    `seeds` are (file name, bytes) samples of what the reader reads."""
    rng = random.Random(f"{seed}:{reader}:{index}")
    roll = rng.random()
    if roll < 0.08 or not seeds:
        n = rng.randrange(0, 4096)
        return "bytes", None, bytes(rng.randrange(256) for _ in range(n))
    if roll < 0.20:
        return "text", None, _rand_text(rng, rng.randrange(1, 4096)).encode("utf-8", "surrogatepass")
    name, data = rng.choice(seeds)
    if roll < 0.22 and size != "large":
        return "seed", name, data
    label = []
    if size == "large":        # a large input always holds its 1-10 MB line, among real lines
        lines = _lines(data)
        lines.insert(rng.randrange(len(lines) + 1), _big_line(rng, size))
        data = b"\n".join(lines)
        label.append("bigline")
    for _ in range(1 if rng.random() < 0.6 else rng.randrange(2, 4)):
        how, data = mutate(rng, data, size)
        label.append(how)
    return "+".join(label), name, data


__all__ = ["one_input", "mutate", "NUMBERS", "UNICODE", "HOSTILE", "YAML_BOMBS"]
