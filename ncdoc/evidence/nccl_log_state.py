"""What the NCCL log scanner has read so far: one ScanState, written by the scanner and the handlers
of each kind of line (nccl_log_info, nccl_log_net), read at the end by nccl_log_merge.

The state is plain mutable fields (counters, small dicts used as ordered sets, per-rank and
per-comm tallies) plus the few updates several readers make the same way (a rank's tally, a
version, a problem, an error trace). Everything is bounded, so memory stays flat whatever the
log size.
"""

from __future__ import annotations

import re
from collections import Counter

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.citation import PER_KIND, Citation, CitationBook
from ncdoc.evidence.nccl_log_framework import new_tally

MAX_RANKS = 4096
MAX_HOSTS = 4096


class RankTally:
    __slots__ = ("host", "pid", "dev", "ranks", "version", "using", "assigned", "ib_devices", "bootstrap",
                 "init_start", "init_complete", "warns", "socket", "no_device")

    def __init__(self, host: str, pid: str | None, dev: int | None):
        self.host, self.pid, self.dev = host, pid, dev
        self.ranks: set[int] = set()
        self.version = self.using = self.assigned = self.bootstrap = None
        self.ib_devices: list[str] = []
        self.init_start = self.init_complete = self.warns = 0
        self.socket = self.no_device = False


class CommTally:
    __slots__ = ("nranks", "nnodes", "local_ranks", "start", "complete", "destroyed", "started", "completed")

    def __init__(self, nranks: int):
        self.nranks = nranks
        self.nnodes = self.local_ranks = None
        self.start = self.complete = self.destroyed = 0
        self.started: set[int] = set()
        self.completed: set[int] = set()


class ScanState:
    """The facts read so far; the only object the line handlers write."""

    def __init__(self) -> None:
        self.lines = self.recognised = self.warns = 0
        self.book = CitationBook()
        self.versions: Counter[str] = Counter()
        self.cuda_build: str | None = None
        self.cuda_driver: str | None = None
        self.ranks: dict[str, RankTally] = {}
        self.procs: dict[str, RankTally] = {}          # host:pid -> first rank seen of that process
        self.hosts: dict[str, None] = {}
        self.extra_hosts = 0
        self.using: Counter[str] = Counter()
        self.ib_devices: dict[str, dict] = {}
        self.socket_devices: dict[str, dict] = {}
        self.ib_speed: dict[str, int] = {}
        self.relaxed: bool | None = None
        self.no_device_hosts: dict[str, None] = {}
        self.no_device = 0
        self.plugin: dict = {"requested": None, "missing": [], "loaded": {}, "collnet": {}, "paths": {},
                             "initialized": {}, "assigned": {}, "failed": {}, "internal": None, "ofi_version": None,
                             "ofi_provider": None, "ofi_nics": None}
        self.ifaces: dict[tuple, dict] = {}
        self.env: dict[str, str] = {}
        self.env_values: dict[str, dict[str, None]] = {}
        self.tails: Counter[bytes] = Counter()
        self.tail_info: dict[bytes, tuple] = {}
        self.gdr_ranks_off: dict[str, None] = {}
        self.gdr_dirs_off: dict[str, None] = {}
        self.hca_gdr: dict[str, bool] = {}           # NCCL's per-HCA GDR decision
        self.hca_gdr_claimed: dict[str, bool] = {}   # a net plugin's own per-HCA lines ("(DMABUF) enabled")
        self.pairs_seen: dict[str, bool] = {}     # distinct per GPU/NIC GDR decisions
        self.off_reasons: dict[str, None] = {}
        self.ring_gdr: Counter[str] = Counter()
        self.dma_buf: bool | None = None
        self.nchannels: int | None = None
        self.channel_summary: tuple | None = None
        self.nvls: bool | None = None
        self.comms: dict[str, CommTally] = {}
        self.comm_ptrs: dict[tuple, str] = {}       # (host, pid, comm pointer) -> commId
        self.problems: dict[str, list] = {}
        self.problem_counts: Counter[str] = Counter()
        self.last_problem: dict[tuple, dict] = {}
        self.results: Counter[str] = Counter()
        self.trace_seen: set[tuple] = set()
        self.result_sources: dict[str, dict[str, int]] = {}   # result -> source file of its first trace
        self.algo_env: dict[str, str] = {}
        self.algo_matrix = False
        self.algo_picks: Counter[str] = Counter()
        self.gid_index: Counter[str] = Counter()
        self.mtu: Counter[str] = Counter()
        self.cross_nic: set[int] = set()
        self.nvswitch: dict[str, None] = {}
        self.framework = new_tally()                   # a framework's watchdog lines (nccl_log_framework)

    def rank_of(self, pre: P.Prefix) -> RankTally | None:
        """The tally of the process and GPU a line came from (None without a host, or past MAX_RANKS)."""
        if not pre.host:
            return None
        key = pre.rank_key
        rank = self.ranks.get(key)
        if rank is None:
            if pre.host not in self.hosts:
                if len(self.hosts) < MAX_HOSTS:
                    self.hosts[pre.host] = None
                else:
                    self.extra_hosts += 1
            if len(self.ranks) >= MAX_RANKS:
                return None
            rank = self.ranks[key] = RankTally(pre.host, pre.pid, pre.dev)
            self.procs.setdefault(f"{pre.host}:{pre.pid}", rank)
        return rank

    def version(self, rank: RankTally | None, m: re.Match, lineno: int, text: str) -> None:
        self.versions[m.group(1)] += 1
        if m.group(3) and not self.cuda_build:
            self.cuda_build = m.group(3)
        if rank:
            rank.version = m.group(1)
        self.book.add("nccl_version", lineno, text)

    def problem(self, cls: P.Classified, msg: str, level: str, pre: P.Prefix, rank: RankTally | None,
                 lineno: int, text: str) -> None:
        self.problem_counts[cls.kind] += 1
        kept = self.problems.setdefault(cls.kind, [])
        if len(kept) < PER_KIND:
            details = dict(cls.details)
            if level in ("WARN", "last_error", "framework"):
                details["before_init_complete"] = not any(c.complete for c in self.comms.values())
            entry = {"kind": cls.kind, "meaning": cls.meaning, "message": msg.strip()[:300], "level": level,
                     "code": cls.code, "code_name": cls.code_name, "details": details, "host": pre.host,
                     "rank": pre.rank_key, "source_file": pre.file, "evidence": Citation.of(lineno, text)}
            kept.append(entry)
            if pre.host:
                if len(self.last_problem) > 4096:
                    self.last_problem.clear()
                self.last_problem[(pre.host, pre.pid, pre.tid)] = entry
        if pre.file and "nvls" in pre.file.lower():
            self.nvswitch.setdefault(f"{cls.kind} in {pre.file}", None)

    def trace(self, pre: P.Prefix, tr: tuple[str, int, int]) -> None:
        """`file.cc:123 -> 2`: the error a call returned, traced up the stack."""
        path, code = tr[0], tr[2]
        key = (pre.host, pre.pid, pre.tid, code)
        if key not in self.trace_seen and len(self.trace_seen) < 65536:
            self.trace_seen.add(key)
            name = P.NCCL_RESULT.get(code, (f"ncclResult {code}", ""))[0]
            self.results[name] += 1
            where = self.result_sources.setdefault(name, {})
            if len(where) < 16:
                where[path] = where.get(path, 0) + 1
        entry = self.last_problem.get((pre.host, pre.pid, pre.tid))
        if entry is not None and "bootstrap" in path.lower():
            entry["details"]["phase"] = "bootstrap"
