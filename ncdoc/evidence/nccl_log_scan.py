"""The streaming scanner behind parse_nccl_log: blocks of log in, bounded summaries out.

Each block is classified first (block_scan.classify_block: three passes in C - VIA counts the
per-channel transport lines by their tail, AGG counts the messages every rank repeats (env, plugins,
GDR decisions...) so each distinct one is read once, SCAN finds the lines read one by one: WARNs,
versions, network choices, comm lifecycle, error traces, and the error text frameworks print around
NCCL's: "NCCL error", ncclXxxError names, "Last error:"), then applied here in file order with the
rank that printed each line. Classifying needs nothing from the blocks before, so it can run in other
processes (run_scan); applying is what needs the order. Everything kept is bounded (ranks, hosts,
evidence, problems, caches), so memory stays flat whatever the log size.

The facts read go into one ScanState (nccl_log_state), which the line handlers receive; the
scanner keeps only what reading needs: its caches, the follow-up lines still due, the tail of the
previous block.
"""

from __future__ import annotations

from ncdoc.evidence import block_scan as B
from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.nccl_log_framework import framework_line
from ncdoc.evidence.nccl_log_info import channel_tails, handle_info
from ncdoc.evidence.nccl_log_merge import build_facts
from ncdoc.evidence.nccl_log_model import LogFacts
from ncdoc.evidence.nccl_log_native import NATIVE as _NATIVE
from ncdoc.evidence.nccl_log_net import SEEN as _SEEN
from ncdoc.evidence.nccl_log_net import apply_cached as _apply
from ncdoc.evidence.nccl_log_state import ScanState
from ncdoc.evidence.wrappers import drop_repeat_suffix

_CACHEABLE = B.CACHEABLE  # longer messages are read each time rather than kept as cache keys


class LogScanner:
    """Feed blocks of whole lines (bytes ending in a newline), or apply their BlockScans in file order;
    call result() at the end. `reread(offset, size)` gives a block's bytes again when a BlockScan made in
    another process left out a first line the scanner needs (block_scan.prepare_transfer)."""

    def __init__(self, reread=None) -> None:
        self.state = ScanState()                     # the facts read so far
        self.pre_cache: dict[bytes, tuple] = {}      # raw prefix -> (Prefix, RankTally | None)
        self.msg_cache: dict[bytes, tuple] = {}      # INFO message already read -> what to re-apply
        self.cite_cached = {"no_device": "ib_no_device", "using": "transport", "version": "nccl_version",
                            "bootstrap": "bootstrap", "ib_using": "net_devices", "socket": "socket_devices"}
        self.follow = 0                              # framework follow-up lines still to read
        self.result_line = 0                         # the line an ncclXxxError name was last counted from
        self.tail = b""                              # the last bytes of the previous blocks
        self.follow_last_error = False
        self.reread = reread

    # ------------------------------------------------------------ blocks

    def feed(self, block: bytes) -> None:
        self.apply(B.classify_log(block))

    def apply(self, bs: B.BlockScan) -> None:
        st = self.state
        base = st.lines
        done = -1                                    # events on lines up to this one were read by a follow-up
        if self.follow:                              # begun at the end of the block before
            done = self._follow_up(bs.head, base + 1) - 1
        if bs.tails:
            channel_tails(st, bs.tails, lambda tail: self._first_tail(bs, tail), lambda: self._gdr_off(bs), base)
        if bs.agg:
            self._aggregated(bs, base)
        if _NATIVE is not None:         # the optional native scanner (nccl_log_native): the same loop, same facts
            matched = _NATIVE.apply_events(self, bs.events, done, base)
        else:
            matched = self._events(bs.events, done, base)
        st.recognised += matched
        st.lines = base + bs.nlines
        self.tail = bs.tail if not bs.short else (self.tail + bs.tail)[-_LOOK_BACK:]

    def _events(self, events: list, done: int, base: int) -> int:
        """A block's SCAN events read in order (those on lines up to `done` were read by a follow-up begun in
        the block before); how many were read. native/src/apply.rs is its twin."""
        pre_cache, msg_cache, cite_cached = self.pre_cache, self.msg_cache, self.cite_cached
        st = self.state
        info, seen, trace = B.INFO, _SEEN, st.trace
        matched = 0
        for ev in events:
            line = ev[1]
            if line <= done:
                continue
            matched += 1
            kind = ev[0]
            if kind == info:
                got = pre_cache.get(ev[2])
                if got is None:
                    got = self._prefix(ev[2])
                cached = msg_cache.get(ev[3])
                if cached is not None:                  # read before: skip parsing it again
                    if cached is not seen:
                        what = cached[0]
                        if what == "trace":
                            trace(got[0], cached[1])
                            continue
                        _apply(st, got[1], cached)
                        cite = cite_cached.get(what)
                        if cite is not None:            # quote a few more ranks' lines
                            st.book.add(cite, base + line + 1, B.info_text(ev).decode("utf-8", "replace"))
                            if not st.book.wants(cite):
                                del cite_cached[what]
                    continue
                self._info(got, ev[3], B.info_text(ev), base + line + 1)
            elif kind == B.WARN:
                raw = ev[2]
                self._warn(pre_cache.get(raw) or self._prefix(raw), ev[3], ev[4], base + line + 1)
            elif kind == B.FRAMEWORK:
                self._framework(ev[2].decode("utf-8", "replace").rstrip("\r"), base + line + 1)
                if self.follow:
                    done = line + self._follow_up(ev[3] or (), base + line + 2)
            else:                                       # a "Last error:" line, whoever printed it
                self._result_before(ev, base + line + 1)
                self._last_error(ev[2].decode("utf-8", "replace").strip(), base + line + 1)
                if self.follow:
                    done = line + self._follow_up(ev[5], base + line + 2)
        return matched

    # ------------------------------------------------------------ first lines (in the BlockScan or the block)

    def _block(self, bs: B.BlockScan) -> bytes:
        if bs.block is None:
            if self.reread is None or bs.offset < 0:
                raise RuntimeError("a classified block without its first lines and no way to read it again")
            bs.block = B.log_bytes(self.reread(bs.offset, bs.size), bs.bare)
        return bs.block

    def _first_tail(self, bs: B.BlockScan, tail: bytes):
        if bs.tail_first is not None and tail in bs.tail_first:
            return bs.tail_first[tail]
        return B.first_tail(self._block(bs), tail)

    def _gdr_off(self, bs: B.BlockScan):
        return bs.gdr_off if bs.gdr_off is not None else B.gdr_off_channels(self._block(bs))

    def _first_agg(self, bs: B.BlockScan, msg: bytes):
        if bs.agg_first is not None and msg in bs.agg_first:
            return bs.agg_first[msg]
        return B.first_agg(self._block(bs), msg)

    def _aggregated(self, bs: B.BlockScan, base: int) -> None:
        """Messages counted by AGG: read each distinct one once, then only count it."""
        st, msg_cache = self.state, self.msg_cache
        fresh = []
        for msg, n in bs.agg.items():
            st.recognised += n
            cached = msg_cache.get(msg)
            if cached is None:
                fresh.append((msg, n))
            elif cached is not _SEEN:
                _apply(st, None, cached, n)
        if not fresh:
            return
        if bs.agg_first is None:                     # classified here: the first lines of all found in one pass
            firsts = B.first_aggs(self._block(bs), [msg for msg, _ in fresh])
            fresh = [(firsts[msg], msg, n) for msg, n in fresh]
        else:
            fresh = [(self._first_agg(bs, msg), msg, n) for msg, n in fresh]
        for (_, line, raw, text), msg, n in sorted(fresh, key=lambda f: f[0][0]):
            got = self.pre_cache.get(raw) or self._prefix(raw)
            cached = handle_info(st, got[0], got[1], msg[:P.MAX_MESSAGE].decode("utf-8", "replace"),
                                 base + line + 1, text.decode("utf-8", "replace").rstrip("\r"))
            cached = _SEEN if cached is None else cached
            if len(msg_cache) > 16384:
                msg_cache.clear()
            if len(msg) <= _CACHEABLE:
                msg_cache[msg] = cached
            if n > 1 and cached is not _SEEN:
                _apply(st, None, cached, n - 1)

    def _prefix(self, raw: bytes) -> tuple:
        """(Prefix, RankTally or None) for the text before "NCCL INFO|WARN", cached per distinct prefix."""
        if len(self.pre_cache) > 8192:
            self.pre_cache.clear()
        pre = P.parse_prefix(raw.decode("utf-8", "replace"))
        got = self.pre_cache[raw] = (pre, self.state.rank_of(pre))
        return got

    def _info(self, got: tuple, msg_raw: bytes, line: bytes, lineno: int) -> None:
        msg = msg_raw.decode("utf-8", "replace").rstrip("\r")
        text = line.decode("utf-8", "replace").rstrip("\r")
        cache_as = handle_info(self.state, got[0], got[1], msg, lineno, text)
        if cache_as is not None and len(msg_raw) <= _CACHEABLE:
            if len(self.msg_cache) > 16384:
                self.msg_cache.clear()
            self.msg_cache[msg_raw] = cache_as

    def _warn(self, got: tuple, msg_raw: bytes, line: bytes, lineno: int) -> None:
        pre, rank = got
        self.state.warns += 1
        if rank:
            rank.warns += 1
        msg = drop_repeat_suffix(msg_raw.decode("utf-8", "replace").rstrip("\r"))
        text = line.decode("utf-8", "replace").rstrip("\r")
        self.state.problem(P.classify_error(msg) or _UNCLASSIFIED, msg, "WARN", pre, rank, lineno, text)

    def _follow_up(self, lines, lineno: int) -> int:
        """Read the lines after a framework "NCCL error" or an empty "Last error:" line (`lines`, the first at
        `lineno`): the message ncclGetLastError gave, and the ncclXxxError name. Returns how many it read."""
        n = 0
        while self.follow and n < len(lines):
            raw = lines[n]
            if raw.find(b"NCCL") >= 0:                  # a line of its own kind: leave it to SCAN
                self.follow = 0
                break
            line = raw.decode("utf-8", "replace").strip()
            self.follow -= 1
            named = self._result_name(line, lineno)
            if line and self.follow_last_error:
                self.follow_last_error = False
                self._last_error_text(P.untag(line), line, lineno)
            elif "Last error:" in line:
                self._last_error(line, lineno)
            elif line and not named:        # ncclGetLastError's text without its "Last error:" line
                cls = P.classify_error(P.untag(line))
                if cls is not None and cls.kind != "nccl_error":
                    self.state.problem(cls, P.untag(line), "last_error", P.Prefix(), None, lineno, line)
            n, lineno = n + 1, lineno + 1
        return n

    def _last_error(self, line: str, lineno: int) -> None:
        """A "Last error:" line: the message follows on the same line, or on the next one."""
        rest = line[line.find("Last error:") + len("Last error:"):].strip()
        if rest:
            self._last_error_text(rest, line, lineno)
        else:
            self.follow, self.follow_last_error = max(self.follow, _LAST_ERROR_LINES), True

    def _last_error_text(self, msg: str, text: str, lineno: int) -> None:
        # ncclGetLastError is the last WARN's message: kept even when no pattern names it
        self.state.problem(P.classify_error(msg) or _UNCLASSIFIED, msg, "last_error", P.Prefix(), None, lineno, text)

    def _result_before(self, ev: tuple, lineno: int) -> None:
        """The ncclXxxError line a framework prints just before "Last error:" (one of the two lines above)."""
        head = ev[3]
        if ev[4]:
            head = self.tail + head                     # the previous blocks' last bytes
        if b"ncc" in head:
            for back, raw in enumerate(reversed(head.split(b"\n")[-3:-1]), 1):
                if self._result_name(raw.decode("utf-8", "replace").strip(), lineno - back):
                    return

    def _result_name(self, line: str, lineno: int) -> bool:
        """Count the ncclResult_t name a framework line starts its message with ("ncclInternalError: ...")."""
        m = P.RESULT_NAME.search(line, 0, 256) if "ncc" in line else None
        if m is None:
            return False
        if lineno != self.result_line:      # read as a follow-up and again above a "Last error:"
            self.result_line = lineno
            self.state.results[m.group(1)] += 1
            self.state.book.add("nccl_result", lineno, line)
        return True

    # ------------------------------------------------------------ per-line facts

    def _framework(self, text: str, lineno: int) -> None:
        m = P.VERSION.search(text)
        if m and "Mismatched" not in text:
            self.state.version(None, m, lineno, text)
        cls = P.classify_error(text)
        if cls and cls.kind != "warn":
            self.state.problem(cls, text.strip(), "framework", P.Prefix(), None, lineno, text)
        if "atchdog" in text or "NCCL work" in text or "NCCL_" in text:
            framework_line(self.state.framework, text, lineno)
        if "NCCL error" in text:
            self.follow, self.follow_last_error = P.FOLLOW_UP, False

    # ------------------------------------------------------------ the end

    def result(self, source: str = "") -> LogFacts:
        return build_facts(self.state, source)


_UNCLASSIFIED = P.Classified("warn", "an NCCL warning")
_LAST_ERROR_LINES = 1     # an empty "Last error:" line: its message is the next line
_LOOK_BACK = B.LOOK_BACK  # bytes above a "Last error:" line searched for the ncclXxxError line
