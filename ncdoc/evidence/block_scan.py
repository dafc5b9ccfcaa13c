"""One block of a run file, classified: everything the run parsers need from it, found by one pure function.

`classify_block(block) -> BlockScan` is the per-block work of reading run output, and the only part that
depends on the bytes: the C regex passes of the NCCL log scanner (VIA counts channel tails, AGG counts
the messages every rank repeats, SCAN finds the lines read one by one, each kept as an event with its
line), and the candidate lines of the other parsers (nccl-tests, launch settings, RAS / DIAG / host
reports, pasted node listings). Nothing in it depends on what came before the block, so blocks can be
classified in any order, by any process, and applied in file order by the stateful readers
(nccl_log_scan.LogScanner.apply, run_scan.RunScanner) with the same result as one pass.
The optional native scanner (nccl_log_native, native/) does its two passes, log_passes and line_passes,
with the same values; the rest stays here.

A block holds whole lines (ends with b"\\n"); line indexes count from 0 at its first line.

Lines are of two sorts. A plain NCCL line (`host:pid:tid [dev] NCCL INFO|WARN|TRACE ...`, a launcher tag
without spaces allowed in front) is read by the log scanner alone: the nccl-tests reader only counts it,
launch settings are never read from it, NCCL wrote it in full. Every other line ("other") goes to the
other readers. Finding the other lines is one C pass; in a log of NCCL's own lines there are few.
"""

from __future__ import annotations

from collections import Counter

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.nccl_log_native import NATIVE as _NATIVE
from ncdoc.startup.compiled_patterns import precompiled

# The shape NCCL prints its lines in: a host token (a launcher tag without a space may be glued to it), the
# device, the level. A line of this shape is never a pasted body (bare_line leaves it), a launch setting, an
# nccl-tests line nor a node listing line.
_PLAIN = precompiled(rb"\S{1,200} \[\d+\] NCCL (?:INFO|WARN|TRACE) ")
_OTHER = precompiled(rb"\n(?!\S{1,200} \[\d+\] NCCL (?:INFO|WARN|TRACE) )")
_RAS_INFO = b"NCCL INFO RAS "        # NCCL's RAS subsystem lines: the RAS report reader reads those that say
# a peer is dead, a connection retry or a collective timed out (ras_report's log lines); the rest say nothing to it
_RAS_EVENTS = (b"RAS declaring peer", b"RAS connection from peer", b"RAS connect retry", b"RAS collective")
_TEST = b"Test "                    # an nccl-tests failure line another process's NCCL line ran into

HEAD_LINES = 8           # lines kept from a block's start: a follow-up begun in the block before reads them
FOLLOW_LINES = 8         # lines kept after a line that starts a follow-up (it reads at most FOLLOW_UP + 1)
LOOK_BACK = 2048         # bytes above a "Last error:" line searched for the ncclXxxError line
CACHEABLE = 512          # longer messages are read each time rather than kept as the scanner's cache keys
_GDR_KEYS = 128          # rank keys kept per block for GDR-off channels (twice the scanner's bound)

# events (the lines SCAN picks, in order), as tuples led by their kind
INFO, WARN, FRAMEWORK, LAST_ERROR = 0, 1, 2, 3

RAS, DIAG, HOST = 1, 2, 4            # report kinds, as bits of a marked line


class BlockScan:
    """What classify_block found in one block. Byte strings are the file's bytes (lines without b"\\n").

    nlines        lines in the block
    tail, short   its last LOOK_BACK bytes, and whether it is shorter than that (the scanner keeps the bytes
                  above a block's first lines from the blocks before)
    head          its first HEAD_LINES lines
    tails         VIA: channel tail -> count, first seen first
    agg           AGG: message -> count, first seen first
    events        SCAN (a list, or an ncdoc_fast.Events: the same tuples, kept as offsets into the block and
                  pickled as the list): (INFO|WARN, line, prefix, message, text or None) - text None: prefix + b"NCCL INFO " +
                  message; (FRAMEWORK, line, text, next lines or None); (LAST_ERROR, line, text, the bytes above,
                  whether they start the block, next lines or None). "Next lines" follow a line that starts a
                  follow-up (a framework "NCCL error", an empty "Last error:").
    other         (line, text) of the lines that are not plain NCCL lines
    cont          (line, text) of plain lines that continue an other line ending with a backslash
    test_plain    (line, text) of plain lines holding "Test "
    marked        (line, text, report bits) of the lines the report readers take
    ras_whole     every line of the block, when it holds an ncclras report (its sections need them all), else None
    tail_first, agg_first, gdr_off, block: how the scanner finds the first line of a channel tail or message
                  new to it, and the GDR-off channels' ranks. In one process `block` (the bytes the log passes
                  ran on) answers; a BlockScan sent to another process carries them (prepare_transfer).
    offset        where the block starts in its file (-1: not from a file), so it can be read again
    size          its length in bytes
    """

    __slots__ = ("bare", "nlines", "tail", "short", "head", "tails", "agg", "events", "other", "cont", "test_plain", "marked",
                 "ras_whole", "tail_first", "agg_first", "gdr_off", "block", "offset", "size")

    def __init__(self) -> None:
        self.tail_first: dict | None = None
        self.agg_first: dict | None = None
        self.gdr_off = None
        self.block: bytes | None = None
        self.offset = -1
        self.size = 0

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            setattr(self, k, v)


# ---------------------------------------------------------------- the one function

def classify_block(block: bytes, bare: bool = False, markers: "Markers | None" = None) -> BlockScan:
    """Classify one block of whole lines (see BlockScan). `bare`: the log passes read message bodies pasted
    without NCCL's prefix as NCCL prints them (nccl_log_patterns.bare_line), as triage reads a run file."""
    bs = BlockScan()
    bs.size = len(block)
    bs.nlines, other, test_plain, ras_plain = _LINE_PASSES(block)
    bs.head = _lines_from(block, 0, HEAD_LINES)
    bs.other = other
    bs.bare = bare
    log_block = _bare_rewritten(block, other) if bare else block
    bs.block = log_block
    bs.tail, bs.short = log_block[-LOOK_BACK:], len(log_block) < LOOK_BACK
    bs.tails, bs.agg, bs.events, warns, _ = _CLASSIFY_PASSES(log_block)
    other_at = {n for n, _ in other}
    bs.cont = _continuations(block, other, other_at)
    bs.test_plain = test_plain
    markers = markers or _markers()
    marked: dict[int, tuple] = {}
    for n, text in other:
        bits = markers.kinds(text)
        if bits:
            marked[n] = (n, text, bits)
    for n, text in warns:
        if n not in marked and n not in other_at:
            bits = markers.kinds(text)
            if bits:
                marked[n] = (n, text, bits)
    for n, text in ras_plain:
        if n not in marked and any(w in text for w in _RAS_EVENTS):
            marked[n] = (n, text, markers.kinds(text) | RAS)
    bs.marked = [marked[n] for n in sorted(marked)]
    bs.ras_whole = None
    if any(bits & RAS and markers.report(text) for _, text, bits in bs.marked):
        bs.ras_whole = block.split(b"\n")[:-1]
    return bs


def classify_log(block: bytes) -> BlockScan:
    """What the NCCL log scanner alone needs of a block (LogScanner.feed: parse_nccl_log and its file twin):
    classify_block's fields for it, the same values; the other readers' candidate lines are not looked for
    (other, cont, test_plain, marked and ras_whole are None)."""
    bs = BlockScan()
    bs.size = len(block)
    bs.head = _lines_from(block, 0, HEAD_LINES)
    bs.bare = False
    bs.block = block
    bs.tail, bs.short = block[-LOOK_BACK:], len(block) < LOOK_BACK
    bs.tails, bs.agg, bs.events, _, bs.nlines = _LOG_PASSES(block)
    bs.other = bs.cont = bs.test_plain = bs.marked = bs.ras_whole = None
    return bs


def log_passes(block: bytes) -> tuple[Counter, Counter, list[tuple], list[tuple[int, bytes]], int]:
    """The log scanner's passes over a block: VIA's counts, AGG's counts, SCAN's events, the (line, text)
    of the WARN events, and the block's newlines (the reference)."""
    return _passes(block) + (block.count(b"\n"),)


def _passes(block: bytes) -> tuple[Counter, Counter, list[tuple], list[tuple[int, bytes]]]:
    events = scan_events(block)
    return (Counter(P.VIA.findall(block)), Counter(P.AGG.findall(block)), events,
            [(ev[1], ev[4]) for ev in events if ev[0] == WARN])


def _classify_passes(block: bytes) -> tuple:
    """log_passes without the newline count, which classify_block has from line_passes (the same block's
    lines: bare rewriting keeps them): a count of the block is a fifth of a ranks log's C passes."""
    return _passes(block) + (None,)


def _native_passes(block: bytes) -> tuple:
    """log_passes by the native scanner (nccl_log_native): the same values, the events kept as offsets into
    the block (ncdoc_fast.Events: a list of the same tuples to Python, pickled as one)."""
    tails, agg, events, warns, nlines = _NATIVE.classify_block(block, P.MAX_MESSAGE)
    return Counter(tails), Counter(agg), events, warns, nlines


# ---------------------------------------------------------------- the candidate lines

def line_passes(block: bytes) -> tuple[int, list, list, list]:
    """The block's newlines, its other lines, and the plain lines holding "Test " and NCCL's RAS lines
    (the reference; each a list of (line, text)). The lines of all three are numbered in one count of the block
    (_other_counted and _plain_with each count it: a ranks log's RAS lines, a few per rank, were a count of
    their own)."""
    find, count = block.find, block.count
    end = len(block) - 1             # the block's last newline
    other_starts = [] if _PLAIN.match(block) is not None else [0]
    for m in _OTHER.finditer(block):
        at = m.start()
        if at >= end:
            break
        other_starts.append(at + 1)
    test_lines, ras_lines = _needle_lines(block, _TEST), _needle_lines(block, _RAS_INFO)
    number: dict[int, int] = {}
    line = counted = 0
    for ls in sorted({*other_starts, *(ls for ls, _ in test_lines), *(ls for ls, _ in ras_lines)}):
        line += count(b"\n", counted, ls)
        counted = ls
        number[ls] = line
    nlines = line + count(b"\n", counted)
    other = [(number[ls], block[ls:find(b"\n", ls)]) for ls in other_starts]
    other_at = {n for n, _ in other}
    return nlines, other, _numbered_plain(block, test_lines, number, other_at), \
        _numbered_plain(block, ras_lines, number, other_at)


def _needle_lines(block: bytes, needle: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line holding `needle`, found as _plain_with finds them."""
    out = []
    find, rfind = block.find, block.rfind
    at = find(needle)
    while at >= 0:
        le = find(b"\n", at)
        out.append((rfind(b"\n", 0, at) + 1, le))
        at = find(needle, le)
    return out


def _numbered_plain(block: bytes, lines: list[tuple[int, int]], number: dict[int, int],
                    other_at: set) -> list[tuple[int, bytes]]:
    """_plain_with's answer from _needle_lines and the line numbers of their starts."""
    out = []
    last = -1
    for ls, le in lines:
        line = number[ls]
        if line != last and line not in other_at:
            out.append((line, block[ls:le]))
        last = line
    return out


def _native_lines(block: bytes) -> tuple[int, list, list, list]:
    """line_passes by the native scanner: the same values."""
    return _NATIVE.line_passes(block, _TEST, _RAS_INFO)


def _other_lines(block: bytes) -> list[tuple[int, bytes]]:
    """(line, text) of every line that is not a plain NCCL line."""
    return _other_counted(block)[0]


def _other_counted(block: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """_other_lines, and the block's newlines (counted on from where finding them stopped: one count of the block)."""
    out = []
    find, count = block.find, block.count
    end = len(block) - 1             # the block's last newline
    if _PLAIN.match(block) is None:
        le = find(b"\n")
        out.append((0, block[:le]))
    line, counted = 0, 0
    for m in _OTHER.finditer(block):
        at = m.start()
        if at >= end:
            break
        line += count(b"\n", counted, at + 1)
        counted = at + 1
        le = find(b"\n", at + 1)
        out.append((line, block[at + 1:le]))
    return out, line + count(b"\n", counted)


def _plain_with(block: bytes, needle: bytes, other_at: set) -> list[tuple[int, bytes]]:
    """(line, text) of the plain lines holding `needle`."""
    out = []
    at = block.find(needle)
    counted = line = 0
    last = -1
    while at >= 0:
        ls = block.rfind(b"\n", 0, at) + 1
        le = block.find(b"\n", at)
        line += block.count(b"\n", counted, ls)
        counted = ls
        if line != last and line not in other_at:
            out.append((line, block[ls:le]))
        last = line
        at = block.find(needle, le)
    return out


def _continuations(block: bytes, other: list, other_at: set) -> list[tuple[int, bytes]]:
    """The plain lines a shell line continues into (a line ending with a backslash)."""
    out = []
    lines = None
    for n, text in other:
        if not text.rstrip(b"\r").endswith(b"\\"):
            continue
        if lines is None:
            lines = block.split(b"\n")
        k = n + 1
        while k < len(lines) - 1 and k not in other_at:
            out.append((k, lines[k]))
            if not lines[k].rstrip(b"\r").endswith(b"\\"):
                break
            k += 1
    return sorted(set(out))


def log_bytes(block: bytes, bare: bool) -> bytes:
    """The bytes the log passes of classify_block run on (BlockScan.block), for a block read again."""
    return _bare_rewritten(block, _other_lines(block)) if bare else block


def _bare_rewritten(block: bytes, other: list) -> bytes:
    """The block with pasted NCCL message bodies written as NCCL prints them (nccl_log_patterns.bare_line), for
    the log passes. Only other lines can be such bodies; the line count is unchanged."""
    changed = []
    for n, raw in other:
        text = raw.decode("utf-8", "surrogateescape")
        bare = P.bare_line(text)
        if bare != text:
            changed.append((n, bare.encode("utf-8", "surrogateescape")))
    if not changed:
        return block
    lines = block.split(b"\n")
    for n, new in changed:
        lines[n] = new
    return b"\n".join(lines)


# ---------------------------------------------------------------- SCAN: the lines read one by one

def scan_events(block: bytes) -> list[tuple]:
    """The lines SCAN picks in a block, as events (see BlockScan.events), in order.

    Where a follow-up (the lines after a framework "NCCL error" or an empty "Last error:") will consume lines
    is for the scanner to decide (it may begin in the block before); their events are here, and it drops them."""
    events: list[tuple] = []
    append = events.append
    finditer, find, rfind, count = P.SCAN.finditer, block.find, block.rfind, block.count
    counted = nl = 0
    end = len(block)
    pos = 0
    limit = P.MAX_MESSAGE + 10
    matches = finditer(block)
    while True:
        # SCAN's matches in order, each looked for from where the last line read ended (a match that starts
        # inside one already read is passed over; when reading ends inside a match, look again from there)
        for m in matches:
            at = m.start()
            if at >= pos:
                break
        else:
            break
        if block[at + 1] == 97:                     # "a": a "Last error:" line, whoever printed it
            ls = rfind(b"\n", 0, at) + 1
            if ls < pos:
                ls = pos
            le = find(b"\n", at)
            if le < 0:
                le = end
            nl += count(b"\n", counted, ls)
            counted = ls
            # the lines after it go along whatever follows "Last error:" (the scanner decides whether it reads them)
            append((LAST_ERROR, nl, block[ls:le], block[max(0, ls - LOOK_BACK):ls], ls < LOOK_BACK,
                    _lines_from(block, le + 1, FOLLOW_LINES)))
            pos = le + 1
            if pos < m.end():
                matches = finditer(block, pos)
            continue
        s = at - 3                                  # SCAN matches from the "L" of "NCCL"
        if s < 0 or block[s:at] != b"NCC":          # an "L INFO" that is not the end of "NCCL"
            pos = at + 1
            matches = finditer(block, pos)
            continue
        ls = rfind(b"\n", 0, s) + 1
        if ls < pos:                                # the rest of a line two writers merged
            ls = pos
        le = find(b"\n", s)
        if le < 0:
            le = end
        stop = le
        nxt = find(b" NCCL ", s + 9, le)
        if nxt >= 0 and block[nxt + 6:nxt + 11] in (b"INFO ", b"WARN "):
            j = rfind(b" [", s, nxt)                # the [dev] of the second line
            k = rfind(b" ", s, j) if j > s else -1
            stop = k + 1 if k > s else (j + 1 if j > s else nxt + 1)
        pos = stop if stop < le else le + 1
        if pos <= at:                               # text that only looks like a merged line: always advance
            pos = at + 1
        if pos < m.end():
            matches = finditer(block, pos)
        nl += count(b"\n", counted, ls)
        counted = ls
        level = block[s + 5]
        if level == 73:                             # "I": NCCL INFO
            mend = s + limit if stop > s + limit else stop
            if ls >= s - 256 and mend == le:        # the whole line is the prefix, "NCCL INFO " and the message
                append((INFO, nl, block[ls:s], block[s + 10:mend], None))
            else:
                append((INFO, nl, block[max(ls, s - 256):s], block[s + 10:mend], block[ls:le]))
            continue
        if level == 87:                             # "W": NCCL WARN
            mend = s + limit if stop > s + limit else stop
            append((WARN, nl, block[max(ls, s - 256):s], block[s + 10:mend], block[ls:le]))
            continue
        if block[s:s + 4] != b"NCCL":
            continue
        text = block[ls:le]
        append((FRAMEWORK, nl, text, _lines_from(block, le + 1, FOLLOW_LINES) if b"NCCL error" in text else None))
    return events


def _lines_from(block: bytes, start: int, k: int) -> tuple[bytes, ...]:
    """Up to `k` whole lines of the block from offset `start` (a line start), without their newlines."""
    out = []
    end = len(block)
    while len(out) < k and start < end:
        le = block.find(b"\n", start)
        if le < 0:
            le = end
        out.append(block[start:le])
        start = le + 1
    return tuple(out)


def info_text(ev: tuple) -> bytes:
    """The whole line of an INFO event."""
    return ev[4] if ev[4] is not None else ev[2] + b"NCCL INFO " + ev[3]


# ---------------------------------------------------------------- first lines, found when wanted

def first_agg(block: bytes, msg: bytes) -> tuple[int, int, bytes, bytes]:
    """(offset of "L" of "NCCL", line, prefix bytes, line text) of the first line AGG counted `msg` on."""
    at, end = block.find(b"NCCL INFO " + msg), 10 + len(msg)
    while at >= 0 and block[at + end:at + end + 1] not in (b"\r", b"\n", b""):
        at = block.find(b"NCCL INFO " + msg, at + 1)
    ls = block.rfind(b"\n", 0, at) + 1
    le = block.find(b"\n", at)
    at += 3
    return (at, block.count(b"\n", 0, ls), block[max(ls, at - 259):at - 3], block[ls:le if le >= 0 else len(block)])


def first_aggs(block: bytes, msgs) -> dict[bytes, tuple[int, int, bytes, bytes]]:
    """first_agg of each of `msgs`, the newlines counted once between the lines in file order (first_agg counts
    them from the block's start each time: a block's seventy new messages were seventy counts of 4 MiB)."""
    found = []
    for msg in msgs:
        needle, end = b"NCCL INFO " + msg, 10 + len(msg)
        at = block.find(needle)
        while at >= 0 and block[at + end:at + end + 1] not in (b"\r", b"\n", b""):
            at = block.find(needle, at + 1)
        found.append((block.rfind(b"\n", 0, at) + 1, at, msg))
    found.sort()
    out = {}
    count = block.count
    line = counted = 0
    for ls, at, msg in found:
        line += count(b"\n", counted, ls)
        counted = ls
        le = block.find(b"\n", at)
        at += 3
        out[msg] = (at, line, block[max(ls, at - 259):at - 3], block[ls:le if le >= 0 else len(block)])
    return out


def first_tail(block: bytes, tail: bytes) -> tuple[int, bytes] | None:
    """(line, text) of the first channel line ending in " via " + `tail`."""
    needle = b" via " + tail
    at = block.find(needle)
    while at >= 0 and block[at + len(needle):at + len(needle) + 1] not in (b" ", b"\r", b"\n", b""):
        at = block.find(needle, at + 1)              # "NET/IB/0" is also the start of "NET/IB/0/GDRDMA"
    if at < 0:
        return None
    ls = block.rfind(b"\n", 0, at) + 1
    le = block.find(b"\n", at)
    return block.count(b"\n", 0, ls), block[ls:le if le >= 0 else len(block)]


def gdr_off_channels(block: bytes, limit: int = _GDR_KEYS) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ranks (first `limit` distinct) and directions of the NET channels connected without GDRDMA."""
    keys: dict[str, None] = {}
    dirs: dict[str, None] = {}
    for m in P.NET_CHANNEL.finditer(block):
        if m.group(4) == b"Socket" or b"/GDRDMA" in m.group(6):
            continue
        if len(keys) < limit:
            ls = block.rfind(b"\n", 0, m.start()) + 1
            pre = P.parse_prefix(block[ls:m.start()].decode("utf-8", "replace").split("NCCL INFO")[0].rstrip())
            if pre.rank_key:
                keys.setdefault(pre.rank_key, None)
        dirs.setdefault(m.group(3).decode(), None)
        if len(keys) >= limit and len(dirs) == 2:
            break
    return tuple(keys), tuple(dirs)


def prepare_transfer(bs: BlockScan, seen: "TransferMemo") -> BlockScan:
    """`bs` made ready for another process: the first lines of what is new to this range of the file found now
    (the reader applying it has read the rest of the range before, so it knows the others), the block dropped."""
    block = bs.block
    # a message too long to be a cache key is read again each time it is seen: its first line always goes along
    bs.agg_first = first_aggs(block, [msg for msg in bs.agg if seen.new_msg(msg) or len(msg) > CACHEABLE])
    bs.tail_first = {}
    off = False
    for tail in bs.tails:
        info = P.tail_info(tail)
        if info[0] == "NET" and info[2] != "Socket":
            if seen.new_tail(tail):
                bs.tail_first[tail] = first_tail(block, tail)
            off = off or not info[3]
    if off and seen.gdr_keys < 64:
        bs.gdr_off = gdr_off_channels(block)
        seen.gdr_keys += sum(1 for k in bs.gdr_off[0] if seen.new_key(k))
    bs.block = None
    return bs


class TransferMemo:
    """What one worker has already sent of its range (a hint: the applying reader reads the block again from
    the file when it needs something the hint left out)."""

    _MAX = 1 << 16
    gdr_keys = 0             # distinct ranks with GDR-off channels sent so far (the reader keeps 64)

    def __init__(self) -> None:
        self.msgs: set[bytes] = set()
        self.tails: set[bytes] = set()
        self.keys: set[str] = set()

    def new_msg(self, msg: bytes) -> bool:
        if msg in self.msgs:
            return False
        if len(self.msgs) >= self._MAX:
            self.msgs.clear()
        self.msgs.add(msg)
        return True

    def new_tail(self, tail: bytes) -> bool:
        if tail in self.tails:
            return False
        self.tails.add(tail)
        return True

    def new_key(self, key: str) -> bool:
        if key in self.keys:
            return False
        self.keys.add(key)
        return True


# ---------------------------------------------------------------- the report readers' markers

class Markers:
    """The words a line must hold for each report reader (RAS, DIAG, host output) to take it: the readers'
    own MARKERS, as bytes."""

    def __init__(self, ras: tuple, diag: tuple, host: tuple, report: tuple) -> None:
        self._kinds = [(RAS, tuple(m.encode() for m in ras)), (DIAG, tuple(m.encode() for m in diag)),
                       (HOST, tuple(m.encode() for m in host))]
        self._report = tuple(m.encode() for m in report)

    def kinds(self, text: bytes) -> int:
        bits = 0
        for bit, words in self._kinds:
            for w in words:
                if w in text:
                    bits |= bit
                    break
        return bits

    def report(self, text: bytes) -> bool:
        """Whether a line belongs to an ncclras report's sections (not only a RAS line of a log)."""
        return any(m in text for m in self._report)


_MARKERS: Markers | None = None


def _markers() -> Markers:
    global _MARKERS
    if _MARKERS is None:
        from ncdoc.evidence.report_markers import DIAG_MARKERS, HOST_MARKERS, RAS_MARKERS, RAS_REPORT_MARKERS
        _MARKERS = Markers(RAS_MARKERS, DIAG_MARKERS, HOST_MARKERS, RAS_REPORT_MARKERS)
    return _MARKERS


_LOG_PASSES = log_passes if _NATIVE is None else _native_passes
_CLASSIFY_PASSES = _classify_passes if _NATIVE is None else _native_passes
_LINE_PASSES = line_passes if _NATIVE is None else _native_lines

__all__ = ["BlockScan", "classify_block", "classify_log", "log_passes", "line_passes", "scan_events", "info_text", "first_agg", "first_aggs", "first_tail", "gdr_off_channels",
           "log_bytes", "prepare_transfer", "TransferMemo", "Markers", "INFO", "WARN", "FRAMEWORK", "LAST_ERROR", "RAS", "DIAG",
           "HOST", "HEAD_LINES", "FOLLOW_LINES", "LOOK_BACK"]
