"""Reading evidence text safely: files in bounded blocks of whole lines, saying in one line why a
file cannot be used (missing, a directory, empty, binary); lines read again by their number.

Parsers work on blocks of bytes (a few MiB of complete lines) rather than on one line at a
time: scanning a block with compiled patterns runs in C, which is what lets a multi-GB log
be read at close to disk speed with flat memory.

Where a block ends depends only on the file, never on where reading started: a block ends at the
last newline before a multiple of the block size (a line longer than MAX_LINE_BYTES is a block of
its own, cut there). So a reader that starts at any block boundary (block_start) meets the same
blocks as one that read the file from its first byte: byte ranges of a file can be scanned apart,
by several processes, and give what one pass gives.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from collections.abc import Iterable, Iterator

from ncdoc.errors import InputError
# A user's file is opened, and told to be text or not, by the one reader (ncdoc/readers/textfile.py);
# read whole, it is read there too (read_user_text).
from ncdoc.readers.textfile import binary_reason, open_user_file as _open

BLOCK_BYTES = 4 << 20        # bytes handed to a parser at a time
MAX_LINE_BYTES = 1 << 20     # a longer line is cut there (the rest is skipped), so memory stays flat
_SAMPLE = 65536              # bytes looked at to decide whether a file is text
_BACK = 65536                # bytes read at a time when looking back for a line start


def _reader(f, name: str):
    def read(n: int) -> bytes:
        try:
            return f.read(n)
        except OSError as exc:
            raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None
    return read


def read_blocks(f, start: int = 0, end: int | None = None, block_bytes: int = BLOCK_BYTES,
                name: str = "") -> Iterator[tuple[int, bytes]]:
    """(offset, block) for the blocks of the open binary file `f` from `start` (a block boundary: 0, a
    block_start, or an offset this gave) to `end` (a block boundary; None: the end of the file). A block is a
    run of whole lines ending with b"\\n"; `offset` is where it starts in the file."""
    read = _reader(f, name)
    f.seek(start)
    pos = start              # where the next read starts
    carry = b""              # the line begun before the chunk
    skipping = False         # inside the rest of an over-long line
    while end is None or pos < end:
        mark = (pos // block_bytes + 1) * block_bytes
        chunk = read((mark if end is None else min(mark, end)) - pos)
        if not chunk:
            break
        at = pos                 # where the chunk starts
        pos += len(chunk)
        if skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            chunk, at, skipping = chunk[cut + 1:], at + cut + 1, False
        data_at = at - len(carry)
        cut = chunk.rfind(b"\n")          # (the carried bytes hold no newline)
        if cut >= 0:
            # one copy per block at most: a fresh bytes object costs page faults as well as the copy
            if carry:
                block = b"".join((carry, memoryview(chunk)[:cut + 1]))
            else:
                block = chunk if cut + 1 == len(chunk) else chunk[:cut + 1]
            yield data_at, block
            carry, data_at = chunk[cut + 1:], data_at + len(block)
        else:
            carry = carry + chunk
        if len(carry) > MAX_LINE_BYTES:          # a giant line: its head, as a block of its own
            yield data_at, carry[:MAX_LINE_BYTES] + b"\n"
            carry, skipping = b"", True
    if carry:
        yield pos - len(carry), carry + b"\n"


def block_at(path: str | Path, offset: int, block_bytes: int = BLOCK_BYTES) -> bytes:
    """The block that starts at `offset` (an offset read_blocks gave), read again."""
    with _open(path) as f:
        for _, block in read_blocks(f, offset, None, block_bytes, str(path)):
            return block
    return b""


def block_start(f, offset: int, file_size: int) -> int:
    """The block boundary at or before `offset` (a multiple of the block size): the byte after the last
    newline before it, 0 when there is none. A boundary inside an over-long line is that line's start."""
    if offset >= file_size:
        return file_size
    at = offset
    while at > 0:
        lo = max(0, at - _BACK)
        f.seek(lo)
        got = f.read(at - lo)
        cut = got.rfind(b"\n")
        if cut >= 0:
            return lo + cut + 1
        at = lo
    return 0


def iter_file_blocks(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Yield the file as blocks of whole lines (each block ends with b"\\n").

    Raises InputError before yielding anything when the file is missing or binary, and
    after the last block when it held nothing but whitespace.
    """
    name = str(path)
    with _open(path) as f:
        head = _reader(f, name)(_SAMPLE)
        reason = binary_reason(head)
        if reason:
            raise InputError(f"cannot be read as a log: {reason}", path=name)
        seen_text = False
        for _, block in read_blocks(f, 0, None, block_bytes, name):
            seen_text = seen_text or not block.isspace()
            yield block
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


# A wanted line at most this many lines on is walked to, newline by newline (a C search each); one farther is
# first counted to: counting costs a pass over every byte, walking a call per line, and the lines quoted are
# mostly near a block's start (counting a 4 MiB block to quote its 27th line was most of the re-reading).
_WALK_LINES = 512


def lines_at(path: str | Path, numbers: Iterable[int], block_bytes: int = BLOCK_BYTES) -> dict[int, str]:
    """The lines of a file at these 1-based numbers (as the block readers count them: one line per
    b"\\n", an over-long line as its head), read again in one pass that stops after the last one wanted."""
    want = sorted({n for n in numbers if n >= 1})
    out: dict[int, str] = {}
    if not want:
        return out
    name = str(path)
    i, line = 0, 0          # the next wanted number's index; lines before the current block
    with _open(path) as f:
        for _, block in read_blocks(f, 0, None, block_bytes, name):
            find = block.find
            pos, at = 0, line + 1            # the start of line `at` in this block
            rest = None                      # the newlines from pos on, once counted
            while i < len(want):
                if want[i] - at > _WALK_LINES:
                    rest = block.count(b"\n", pos)
                if rest is not None and want[i] > at - 1 + rest:
                    end = -1                 # its newline is in a later block
                else:
                    rest = None
                    end = find(b"\n", pos)
                    while end >= 0 and at < want[i]:
                        pos, at = end + 1, at + 1
                        end = find(b"\n", pos)
                if end < 0:
                    break
                out[want[i]] = block[pos:end].decode("utf-8", "replace").rstrip("\r")
                i += 1
            if i == len(want):
                break
            line = at - 1 + (block.count(b"\n", pos) if rest is None else rest)
    return out
