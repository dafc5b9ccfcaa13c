"""The streaming scanner behind parse_nccl_log: blocks of log in, bounded summaries out.

Per block, three passes in C: VIA counts the per-channel transport lines by their tail, AGG
counts the messages every rank repeats (env, plugins, GDR decisions...) so each distinct one
is read once, and SCAN finds the lines read one by one with the rank that printed them
(WARNs, versions, network choices, comm lifecycle, error traces, and the error text frameworks
print around NCCL's: "NCCL error", ncclXxxError names, "Last error:"). Everything kept is
bounded (ranks, hosts, evidence, problems, caches), so memory stays flat whatever the log size.

The facts read go into one ScanState (nccl_log_state), which the line handlers receive; the
scanner keeps only what reading needs: its caches, the follow-up lines still due, the tail of the
previous block.
"""

from __future__ import annotations

from collections import Counter

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.nccl_log_framework import framework_line
from ncdoc.evidence.nccl_log_info import channel_tails, handle_info
from ncdoc.evidence.nccl_log_merge import build_facts
from ncdoc.evidence.nccl_log_model import LogFacts
from ncdoc.evidence.nccl_log_net import SEEN as _SEEN
from ncdoc.evidence.nccl_log_net import apply_cached as _apply
from ncdoc.evidence.nccl_log_state import ScanState
from ncdoc.evidence.wrappers import drop_repeat_suffix

_CACHEABLE = 512          # longer messages are read each time rather than kept as cache keys


class LogScanner:
    """Feed blocks of whole lines (bytes ending in a newline); call result() at the end."""

    def __init__(self) -> None:
        self.state = ScanState()                     # the facts read so far
        self.pre_cache: dict[bytes, tuple] = {}      # raw prefix -> (Prefix, RankTally | None)
        self.msg_cache: dict[bytes, tuple] = {}      # INFO message already read -> what to re-apply
        self.cite_cached = {"no_device": "ib_no_device", "using": "transport", "version": "nccl_version",
                            "bootstrap": "bootstrap", "ib_using": "net_devices", "socket": "socket_devices"}
        self.follow = 0                              # framework follow-up lines still to read
        self.result_line = 0                         # the line an ncclXxxError name was last counted from
        self.tail = b""                              # the last bytes of the previous blocks
        self.follow_last_error = False

    # ------------------------------------------------------------ blocks

    def feed(self, block: bytes) -> None:
        st = self.state
        base = st.lines
        pos = self._follow_up(block, 0, base + 1) if self.follow else 0
        tails = Counter(P.VIA.findall(block))
        if tails:
            channel_tails(st, tails, block, base)
        agg = Counter(P.AGG.findall(block))
        if agg:
            self._aggregated(agg, block, base)
        search, find, rfind, count = P.SCAN.search, block.find, block.rfind, block.count
        pre_cache, msg_cache = self.pre_cache, self.msg_cache
        counted = nl = matched = 0
        end = len(block)
        while True:
            m = search(block, pos)
            if m is None:
                break
            if block[m.start() + 1] == 97:              # "a": a "Last error:" line, whoever printed it
                ls = max(rfind(b"\n", 0, m.start()) + 1, pos)
                le = find(b"\n", m.start())
                le = end if le < 0 else le
                nl += count(b"\n", counted, ls)
                counted = ls
                matched += 1
                self._result_before(block, ls, base + nl + 1)
                self._last_error(block[ls:le].decode("utf-8", "replace").strip(), base + nl + 1)
                pos = self._follow_up(block, le + 1, base + nl + 2) if self.follow else le + 1
                continue
            s = m.start() - 3                           # SCAN matches from the "L" of "NCCL"
            if s < 0 or block[s:s + 3] != b"NCC":       # an "L INFO" that is not the end of "NCCL"
                pos = m.start() + 1
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
            if pos <= m.start():                        # text that only looks like a merged line: always advance
                pos = m.start() + 1
            matched += 1
            level = block[s + 5]
            if level == 73:                             # "I": NCCL INFO
                raw = block[max(ls, s - 256):s]          # the host token is right before "NCCL"
                got = pre_cache.get(raw)
                if got is None:
                    got = self._prefix(raw)
                msg = block[s + 10:min(stop, s + 10 + P.MAX_MESSAGE)]
                cached = msg_cache.get(msg)
                if cached is not None:                  # read before: skip parsing it again
                    if cached is not _SEEN:
                        if cached[0] == "trace":
                            st.trace(got[0], cached[1])
                            continue
                        _apply(st, got[1], cached)
                        cite = self.cite_cached.get(cached[0])
                        if cite is not None:            # quote a few more ranks' lines
                            nl += count(b"\n", counted, ls)
                            counted = ls
                            st.book.add(cite, base + nl + 1, block[ls:le].decode("utf-8", "replace"))
                            if not st.book.wants(cite):
                                del self.cite_cached[cached[0]]
                    continue
                nl += count(b"\n", counted, ls)
                counted = ls
                self._info(got, msg, block, ls, le, base + nl + 1)
                continue
            if block[s:s + 4] != b"NCCL":
                matched -= 1
                continue
            nl += count(b"\n", counted, ls)
            counted = ls
            if level == 87:                             # "W": NCCL WARN
                raw = block[max(ls, s - 256):s]
                self._warn(pre_cache.get(raw) or self._prefix(raw), block[s + 10:min(stop, s + 10 + P.MAX_MESSAGE)],
                           block, ls, le, base + nl + 1)
            else:
                self._framework(block[ls:le].decode("utf-8", "replace").rstrip("\r"), base + nl + 1)
                if self.follow:
                    pos = self._follow_up(block, le + 1, base + nl + 2)
        st.recognised += matched
        st.lines = base + count(b"\n")
        self.tail = block[-_LOOK_BACK:] if len(block) >= _LOOK_BACK else (self.tail + block)[-_LOOK_BACK:]

    def _aggregated(self, agg: Counter, block: bytes, base: int) -> None:
        """Messages counted by AGG: read each distinct one once, then only count it."""
        st, msg_cache = self.state, self.msg_cache
        fresh = []
        for msg, n in agg.items():
            st.recognised += n
            cached = msg_cache.get(msg)
            if cached is None:
                at, end = block.find(b"NCCL INFO " + msg), 10 + len(msg)
                while at >= 0 and block[at + end:at + end + 1] not in (b"\r", b"\n", b""):
                    at = block.find(b"NCCL INFO " + msg, at + 1)
                fresh.append((at + 3, msg, n))        # + 3: the "L" of "NCCL", where SCAN's offsets point
            elif cached is not _SEEN:
                _apply(st, None, cached, n)
        counted = nl = 0
        for at, msg, n in sorted(fresh):
            ls = block.rfind(b"\n", 0, at) + 1
            le = block.find(b"\n", at)
            nl += block.count(b"\n", counted, ls)
            counted = ls
            raw = block[max(ls, at - 259):at - 3]
            got = self.pre_cache.get(raw) or self._prefix(raw)
            text = block[ls:le if le >= 0 else len(block)].decode("utf-8", "replace").rstrip("\r")
            cached = handle_info(st, got[0], got[1], msg[:P.MAX_MESSAGE].decode("utf-8", "replace"),
                                 base + nl + 1, text)
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

    def _info(self, got: tuple, msg_raw: bytes, block: bytes, ls: int, le: int, lineno: int) -> None:
        msg = msg_raw.decode("utf-8", "replace").rstrip("\r")
        text = block[ls:le].decode("utf-8", "replace").rstrip("\r")
        cache_as = handle_info(self.state, got[0], got[1], msg, lineno, text)
        if cache_as is not None and len(msg_raw) <= _CACHEABLE:
            if len(self.msg_cache) > 16384:
                self.msg_cache.clear()
            self.msg_cache[msg_raw] = cache_as

    def _warn(self, got: tuple, msg_raw: bytes, block: bytes, ls: int, le: int, lineno: int) -> None:
        pre, rank = got
        self.state.warns += 1
        if rank:
            rank.warns += 1
        msg = drop_repeat_suffix(msg_raw.decode("utf-8", "replace").rstrip("\r"))
        text = block[ls:le].decode("utf-8", "replace").rstrip("\r")
        self.state.problem(P.classify_error(msg) or _UNCLASSIFIED, msg, "WARN", pre, rank, lineno, text)

    def _follow_up(self, block: bytes, pos: int, lineno: int) -> int:
        """Read the lines after a framework "NCCL error" or an empty "Last error:" line: the message
        ncclGetLastError gave, and the ncclXxxError name."""
        while self.follow and pos < len(block):
            le = block.find(b"\n", pos)
            le = len(block) if le < 0 else le
            if block.find(b"NCCL", pos, le) >= 0:     # a line of its own kind: leave it to SCAN
                self.follow = 0
                break
            line = block[pos:le].decode("utf-8", "replace").strip()
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
            pos, lineno = le + 1, lineno + 1
        return pos

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

    def _result_before(self, block: bytes, ls: int, lineno: int) -> None:
        """The ncclXxxError line a framework prints just before "Last error:" (one of the two lines above)."""
        head = block[max(0, ls - _LOOK_BACK):ls]
        if ls < _LOOK_BACK:
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
_LOOK_BACK = 2048         # bytes above a "Last error:" line searched for the ncclXxxError line
