"""Reading evidence text safely: files in bounded blocks of whole lines, saying in one line why a
file cannot be used (missing, a directory, empty, binary).

Parsers work on blocks of bytes (a few MiB of complete lines) rather than on one line at a
time: scanning a block with compiled patterns runs in C, which is what lets a multi-GB log
be read at close to disk speed with flat memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ncdoc.errors import InputError
# A user's file is opened, and told to be text or not, by the one reader (ncdoc/readers/textfile.py);
# read whole, it is read there too (read_user_text).
from ncdoc.readers.textfile import binary_reason, open_user_file as _open

BLOCK_BYTES = 4 << 20        # bytes handed to a parser at a time
MAX_LINE_BYTES = 1 << 20     # a longer line is cut there (the rest is skipped), so memory stays flat
_SAMPLE = 65536              # bytes looked at to decide whether a file is text


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
