"""Reading evidence text safely: files in bounded blocks of whole lines, and checks that say
in one line why a file cannot be used (missing, a directory, empty, binary).

Parsers work on blocks of bytes (a few MiB of complete lines) rather than on one line at a
time: scanning a block with compiled patterns runs in C, which is what lets a multi-GB log
be read at close to disk speed with flat memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ncdoc.errors import InputError

BLOCK_BYTES = 4 << 20        # bytes handed to a parser at a time
MAX_LINE_BYTES = 1 << 20     # a longer line is cut there (the rest is skipped), so memory stays flat
_SAMPLE = 65536              # bytes looked at to decide whether a file is text

_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b") + b"\x7f"


def binary_reason(sample: bytes) -> str | None:
    """Why `sample` (the head of a file) is not text, or None when it is."""
    if not sample:
        return None
    if b"\x00" in sample:
        return "it is binary (it contains NUL bytes), not text"
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    if controls > max(8, len(sample) // 100):
        return "it is binary (control characters), not text"
    text = sample[:len(sample) - 3].decode("utf-8", "replace") if len(sample) > 3 else sample.decode(
        "utf-8", "replace")
    if text.count("\ufffd") > 4 + len(sample) // 1000:
        return "it is binary or not UTF-8 text"
    return None


def _open(path: str | Path):
    p = Path(path)
    name = str(path)
    try:
        if p.is_dir():
            raise InputError("is a directory, not a file", path=name)
        return p.open("rb")
    except FileNotFoundError:
        raise InputError("no such file", path=name) from None
    except PermissionError:
        raise InputError("permission denied", path=name) from None
    except OSError as exc:
        raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None


def iter_file_blocks(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Yield the file as blocks of whole lines (each block ends with b"\\n").

    Raises InputError before yielding anything when the file is missing or binary, and
    after the last block when it held nothing but whitespace.
    """
    name = str(path)
    with _open(path) as f:
        def read() -> bytes:
            try:
                return f.read(block_bytes)
            except OSError as exc:
                raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None

        chunk = read()
        reason = binary_reason(chunk[:_SAMPLE])
        if reason:
            raise InputError(f"cannot be read as a log: {reason}", path=name)
        seen_text = False
        pending = b""               # a partial line carried to the next read
        skipping = False            # inside the rest of an over-long line
        while chunk:
            if skipping:
                cut = chunk.find(b"\n")
                if cut >= 0:
                    chunk, skipping = chunk[cut + 1:], False
            if not skipping:
                data = pending + chunk if pending else chunk
                end = data.rfind(b"\n")
                block, pending = (data[:end + 1], data[end + 1:]) if end >= 0 else (b"", data)
                if len(pending) > MAX_LINE_BYTES:   # a giant line: keep its head, skip its tail
                    block += pending[:MAX_LINE_BYTES] + b"\n"
                    pending, skipping = b"", True
                if block:
                    seen_text = seen_text or bool(block.strip())
                    yield block
            chunk = read()
        if pending:
            seen_text = seen_text or bool(pending.strip())
            yield pending + b"\n"
        if not seen_text:
            raise InputError("is empty", path=name)


def iter_line_blocks(lines: Iterable[str | bytes], block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Join an iterable of lines into blocks of bytes, one newline per line.

    Lines may or may not end with a newline; bytes are accepted too. Lines are not cut:
    the caller already holds each one in memory.
    """
    buf: list[str] = []
    size = 0
    for line in lines:
        if not isinstance(line, str):
            line = bytes(line).decode("utf-8", "replace") if isinstance(line, (bytes, bytearray)) else str(line)
        buf.append(line)
        size += len(line)
        if not line.endswith("\n"):
            buf.append("\n")
        if size >= block_bytes:
            yield "".join(buf).encode("utf-8", "surrogatepass")
            buf, size = [], 0
    if buf:
        yield "".join(buf).encode("utf-8", "surrogatepass")


def read_text_file(path: str | Path, *, what: str = "file", max_bytes: int = 256 << 20) -> str:
    """The whole text of a (small) evidence file, or an InputError saying why it cannot be used."""
    name = str(path)
    with _open(path) as f:
        try:
            raw = f.read(max_bytes + 1)
        except OSError as exc:
            raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None
    if len(raw) > max_bytes:
        raise InputError(f"is larger than {max_bytes >> 20} MiB; not a {what}", path=name)
    reason = binary_reason(raw[:_SAMPLE])
    if reason:
        raise InputError(f"cannot be read as a {what}: {reason}", path=name)
    text = raw.decode("utf-8", "replace").lstrip("\ufeff")
    if not text.strip():
        raise InputError("is empty", path=name)
    return text
