"""Reading NCCL's RAS reports: the `ncclras` text report and its `-f json` form, and the RAS lines of a
job's log (NCCL_DEBUG_SUBSYS=RAS, `ncclras -m` monitor events). The records are in ras_model.

Formats are the client's format strings (src/ras/client_support.cc, NCCL 2.24 to 2.31): the version
lines, "Job summary", "Communicators... (%.3fs)" and its table, the Errors section (INCOMPLETE,
DEAD, per-communicator INCOMPLETE / ERROR) and the Warnings section (TIMEOUT, per-communicator
MISMATCH of status or of operation counts), with the rank and process lines under each. A report
pasted in parts (only its Errors section, a table row and its Warnings) reads the same; launcher
prefixes are ignored. Every pattern starts with a literal or is anchored: linear time.

    report = parse_ras_text(lines, source="ras.txt")       # RasReport, .empty when none was there
    report = parse_ras_json(data, source="ras.json")
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ncdoc.evidence.citation import CitationBook
from ncdoc.evidence.lazy_re import lazy
from ncdoc.evidence.ras_model import RasCommIssue, RasCommRow, RasEvent, RasGroup, RasProcess, RasRank, RasReport
from ncdoc.evidence.report_markers import RAS_MARKERS, RAS_REPORT_MARKERS
from ncdoc.evidence.wrappers import strip_wrappers

_VERSION = lazy(r"^NCCL version (\d+\.\d+\.\d+)\S* compiled with CUDA (\d+\.\d+)")
_RUNTIME = lazy(r"^CUDA runtime version (\d{1,20}(?!\d)), driver version (\d{1,20}(?!\d))")
_INTS = lazy(r"^\s*(\d{1,20}(?:\s+\d{1,20}){2,4})\s*$")      # counts: 20 digits at most each
_OUTLIER = lazy(r"^\s*Node (\S+) running process(?:es)? ([\d, ]+)")
_QUERY = lazy(r"^Communicators\.\.\.(?: \((\d{1,20}(?:\.\d{1,20})?)s\))?")
_ROW = lazy(r"^\s*(\d{1,20}(?!\d))\s+(\d{1,20}(?!\d))\s+(\d{1,20}(?!\d))\s+(\d+(?:-\d+)?)\s+(\d{1,20}(?!\d))\s+(\d{1,20}(?!\d))\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_MISSING_PROCS = lazy(r"^\s*Missing communicator data from (\d{1,20}(?!\d)) job process")
_DEAD = lazy(r"^\s*(\d{1,20}(?!\d)) job process(?:es)? (?:is|are) considered dead")
_PROCESS = lazy(r"^\s*Process (\d{1,20}(?!\d)) on node (\S+) managing GPUs? ([\d, ]+)")
_NO_INFO = lazy(r"^\s*\[could not find information on (\d{1,20}(?!\d)) process")
_COMM = lazy(r"^#(\d+-\d+) \(([0-9a-fA-F]{1,16})\) ([A-Z,]+)")
_MISSING_RANKS = lazy(r"^\s*Missing communicator data from (\d{1,20}(?!\d)) rank")
_THE_MISSING = lazy(r"^\s*The missing ranks?: ([\d, ]+)")
_RANK_LINE = lazy(r"^\s*Rank (\d{1,20}(?!\d))(?: (?:has status (\S+)|has launched up to operation (\d{1,20}(?!\d))|reported (.+?)))?"
                        r" -- GPU (\S+) managed by process (\d{1,20}(?!\d)) on node (\S+)")
_DIFFERENT = lazy(r"^\s*Communicator ranks have different (.*\S|.)\s*$")
_GROUP = lazy(r"^\s*(\d{1,20}(?!\d)) ranks? (?:have|has) (?:status (\S+)|launched up to operation (\d{1,20}(?!\d))|(not launched any "
                    r"operations))")
_ERRORS_ON = lazy(r"^\s*(Initialization|Asynchronous) errors? on (\d{1,20}(?!\d)) ranks?")
_REPORTED = lazy(r"^\s*(\d{1,20}(?!\d)) ranks? reported (.*\S|.)\s*$")
_TIMEOUTS = lazy(r"^\s*Encountered (\d{1,20}(?!\d)) communication timeouts?")
_MISSING_DATA = lazy(r"Warning: missing data from (\d{1,20}(?!\d)) process(?:es)? \(received from (\d{1,20}(?!\d)), expected (\d{1,20}(?!\d))\)")
# RAS lines of a job's log (src/ras/*.cc) and monitor events ("[%s] %s: %s")
_DEAD_PEER = lazy(r"RAS declaring peer (\S+) as DEAD")
_DEAD_CONN = lazy(r"RAS connection from peer (\S+) that is considered dead")
_COLL_TIMEOUT = lazy(r"RAS collective (\S+) timeout error \((\d{1,20}(?!\d))s\) -- giving up on (\d{1,20}(?!\d)) missing")
_CONNECT_TIMEOUT = lazy(r"RAS connect retry timeout \((\d{1,20}(?!\d))s\) on socket connection with (\S+)")
_MONITOR = lazy(r"^(?:\[[^\]]{4,40}\] )?(PEER_DEAD|PEER_NEW|PEER_CONNECTING): (.*)$")

MAX_ITEMS = 64            # processes, ranks, issues kept: a 4096-rank report stays small


def _pids(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"(?<!\d)\d{1,20}(?!\d)", text)][:MAX_ITEMS]


class _Reader:
    def __init__(self) -> None:
        self.book = CitationBook()
        self.f: dict[str, Any] = {"nccl_version": None, "cuda_build": None, "cuda_runtime": None, "cuda_driver": None,
                                  "nodes": None, "processes": None, "gpus": None, "query_seconds": None,
                                  "no_comm_data": False, "missing_count": 0, "dead_count": 0, "timeouts": 0}
        self.outliers: list[RasProcess] = []
        self.rows: list[RasCommRow] = []
        self.missing: list[RasProcess] = []
        self.dead: list[RasProcess] = []
        self.issues: list[dict] = []
        self.events: list[RasEvent] = []
        self.section = ""          # "summary" | "comms" | "errors" | "warnings"
        self.process_state = ""    # what the Process lines below belong to: "missing" | "dead"
        self.issue: dict | None = None
        self.summary_head = ""     # the Job summary table's header, to tell per-node rows from totals
        self.summary_rows = 0
        self.seen = 0

    def line(self, n: int, raw: str) -> None:
        text = strip_wrappers(raw.rstrip("\r\n"))
        s = text.strip()
        if not s:
            return
        if s.startswith("=") and s.strip("=") == "":
            return
        if "RAS " in s or "PEER_" in s:
            if self._log_line(n, s):
                return
        m = _VERSION.match(s)
        if m:
            self.f["nccl_version"], self.f["cuda_build"] = m.group(1), m.group(2)
            self.book.add("version", n, text)
            self.seen += 1
            return
        m = _RUNTIME.match(s)
        if m:
            self.f["cuda_runtime"], self.f["cuda_driver"] = int(m.group(1)), int(m.group(2))
            self.book.add("version", n, text)
            return
        if s == "Job summary":
            self.section, self.summary_head, self.summary_rows = "summary", "", 0
            return
        m = _QUERY.match(s)
        if m:
            self.section = "comms"
            if m.group(1):
                self.f["query_seconds"] = float(m.group(1))
                self.book.add("query", n, text)
            return
        if s in ("Errors", "Warnings"):
            self.section, self.issue, self.process_state = s.lower(), None, ""
            return
        if s.startswith("Group") and "Comms" in s:
            self.section = "comms"
            return
        if self.section == "summary":
            self._summary(n, s, text)
            return
        m = _ROW.match(s)
        if m and (self.section in ("comms", "") or self.issue is None):
            g = m.groups()
            self.rows.append(RasCommRow(int(g[0]), int(g[1]), int(g[2]), g[3], int(g[4]), int(g[5]), g[6], g[7], n))
            self.book.add("comm_row", n, text)
            self.seen += 1
            return
        if s.startswith("No communicator data collected"):
            self.f["no_comm_data"] = True
            self.book.add("no_comm_data", n, text)
            self.seen += 1
            return
        self._errors_and_warnings(n, s, text)

    # ------------------------------------------------------------ sections

    def _summary(self, n: int, s: str, text: str) -> None:
        m = _INTS.match(s)
        if not m:
            if self.summary_rows:
                self.summary_head, self.summary_rows = "", 0      # the next table's header
            self.summary_head += " " + s
            if "outlier node" in s:
                self.section = ""
            return
        self.summary_rows += 1
        nums = [int(x) for x in m.group(1).split()]
        if len(nums) == 5:
            self.f["nodes"], self.f["processes"], self.f["gpus"] = nums[0], nums[3], nums[4]
        elif len(nums) == 3 and "(total)" in self.summary_head and "per node" not in self.summary_head:
            self.f["nodes"], self.f["processes"], self.f["gpus"] = nums
        self.book.add("summary", n, text)
        self.seen += 1

    def _errors_and_warnings(self, n: int, s: str, text: str) -> None:
        m = _OUTLIER.match(s)
        if m:
            for pid in _pids(m.group(2)):
                if len(self.outliers) < MAX_ITEMS:
                    self.outliers.append(RasProcess(pid, m.group(1), "", "outlier", n))
            self.book.add("outlier", n, text)
            return
        if s in ("INCOMPLETE", "DEAD", "TIMEOUT"):
            self.issue, self.process_state = None, {"INCOMPLETE": "missing", "DEAD": "dead"}.get(s, "")
            return
        m = _MISSING_PROCS.match(s)
        if m:
            self.f["missing_count"] += int(m.group(1))
            self.process_state = "missing"
            self.book.add("missing", n, text)
            self.seen += 1
            return
        m = _DEAD.match(s)
        if m:
            self.f["dead_count"] += int(m.group(1))
            self.process_state = "dead"
            self.book.add("dead", n, text)
            self.seen += 1
            return
        m = _PROCESS.match(s)
        if m and self.issue is None:
            target = self.dead if self.process_state == "dead" else self.missing
            if len(target) < MAX_ITEMS:
                target.append(RasProcess(int(m.group(1)), m.group(2), m.group(3).strip(), self.process_state or
                                         "missing", n))
            self.book.add(self.process_state or "missing", n, text)
            return
        if _NO_INFO.match(s):
            self.book.add(self.process_state or "missing", n, text)
            return
        m = _TIMEOUTS.match(s)
        if m:
            self.f["timeouts"] += int(m.group(1))
            self.book.add("timeouts", n, text)
            self.seen += 1
            return
        m = _MISSING_DATA.search(s)
        if m:
            self.book.add("missing_data", n, text)
            return
        m = _COMM.match(s)
        if m:
            self.issue = {"comm": "#" + m.group(1), "hash": m.group(2), "kind": m.group(3), "what": "", "missing": 0,
                          "groups": [], "ranks": [], "lines": [s], "line": n}
            if len(self.issues) < MAX_ITEMS:
                self.issues.append(self.issue)
            self.book.add("comm_" + m.group(3).split(",")[0].lower(), n, text)
            self.seen += 1
            return
        if self.issue is not None:
            self._issue_line(n, s)

    def _issue_line(self, n: int, s: str) -> None:
        issue = self.issue
        if len(issue["lines"]) < 24:
            issue["lines"].append(s)
        m = _MISSING_RANKS.match(s)
        if m:
            issue["missing"] = int(m.group(1))
            return
        m = _THE_MISSING.match(s)
        if m:
            for r in _pids(m.group(1)):
                issue["ranks"].append(RasRank(r, line=n))
            return
        m = _DIFFERENT.match(s)
        if m:
            issue["what"] = m.group(1)
            return
        m = _ERRORS_ON.match(s)
        if m:
            issue["what"] = f"{m.group(1)} error"
            issue["missing"] = max(issue["missing"], int(m.group(2)))
            return
        m = _GROUP.match(s)
        if m:
            value = m.group(2) or m.group(3) or "none"
            issue["groups"].append({"count": int(m.group(1)), "value": value, "members": []})
            return
        m = _REPORTED.match(s)
        if m and not s.lstrip().startswith("Rank"):
            issue["groups"].append({"count": int(m.group(1)), "value": m.group(2), "members": []})
            return
        m = _RANK_LINE.match(s)
        if m:
            value = m.group(2) or m.group(3) or (m.group(4) or "")
            rank = RasRank(int(m.group(1)), m.group(5), int(m.group(6)), m.group(7), value, n)
            if value or not issue["groups"]:
                if len(issue["ranks"]) < MAX_ITEMS:
                    issue["ranks"].append(rank)     # a rank with its own value: "Rank 7 has launched up to ..."
            elif len(issue["groups"][-1]["members"]) < MAX_ITEMS:
                issue["groups"][-1]["members"].append(rank)

    def _log_line(self, n: int, s: str) -> bool:
        for rx, kind in ((_DEAD_PEER, "peer_dead"), (_DEAD_CONN, "peer_dead"), (_CONNECT_TIMEOUT, "connect_timeout")):
            m = rx.search(s)
            if m:
                peer = m.group(m.lastindex)
                self._event(kind, peer, s, n)
                return True
        m = _COLL_TIMEOUT.search(s)
        if m:
            self._event("collective_timeout", m.group(1), s, n)
            return True
        m = _MONITOR.match(s)
        if m:
            self._event({"PEER_DEAD": "peer_dead", "PEER_NEW": "peer_new"}.get(m.group(1), "peer_connecting"),
                        m.group(2).strip(), s, n)
            return True
        return False

    def _event(self, kind: str, peer: str, s: str, n: int) -> None:
        if len(self.events) < MAX_ITEMS:
            self.events.append(RasEvent(kind, peer, s[:200], n))
        self.book.add("event_" + kind, n, s)
        self.seen += 1

    def result(self, source: str, fmt: str = "text") -> RasReport:
        issues = tuple(RasCommIssue(i["comm"], i["hash"], i["kind"], i["what"], i["missing"],
                                    tuple(RasGroup(g["count"], g["value"], tuple(g["members"])) for g in i["groups"]),
                                    tuple(i["ranks"]), tuple(i["lines"]), i["line"]) for i in self.issues)
        structured = self.seen - len(self.events)
        f = self.f
        return RasReport(source=source, format=fmt if structured else "log", nccl_version=f["nccl_version"],
                         cuda_build=f["cuda_build"], cuda_runtime=f["cuda_runtime"], cuda_driver=f["cuda_driver"],
                         nodes=f["nodes"], processes=f["processes"], gpus=f["gpus"],
                         outlier_nodes=tuple(self.outliers), query_seconds=f["query_seconds"],
                         comm_rows=tuple(self.rows), no_comm_data=f["no_comm_data"],
                         missing_processes=tuple(self.missing), missing_count=f["missing_count"],
                         dead_processes=tuple(self.dead), dead_count=f["dead_count"], comm_issues=issues,
                         timeouts=f["timeouts"], events=tuple(self.events), evidence=self.book.freeze())


def parse_ras_text(lines: Iterable[str], source: str = "") -> RasReport:
    """A RasReport from the lines of an ncclras text report, or of a log holding RAS lines."""
    return parse_ras_numbered(enumerate(lines, 1), source)


def parse_ras_numbered(numbered: Iterable[tuple[int, str]], source: str = "") -> RasReport:
    """parse_ras_text over (line number, line) pairs: the blocks of a large file that hold RAS lines."""
    reader = _Reader()
    for n, line in numbered:
        reader.line(n, line)
    return reader.result(source)


# ---------------------------------------------------------------- -f json

def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _version_text(code: Any) -> int | None:
    return _int(code)


def parse_ras_json(data: Any, source: str = "") -> RasReport:
    """A RasReport from `ncclras -f json` output (NCCL 2.28.7+): communicators with their ranks (status,
    collective counts) and missing ranks (unresponsive, considered dead)."""
    if not isinstance(data, dict):
        return RasReport(source=source, format="json")
    missing: list[RasProcess] = []
    dead: list[RasProcess] = []
    issues: list[RasCommIssue] = []
    for c in data.get("communicators") or ():
        if not isinstance(c, dict):
            continue
        comm_hash = str(c.get("hash") or "")
        gone = [m for m in c.get("missing_ranks") or () if isinstance(m, dict)]
        for m in gone:
            st = m.get("status") if isinstance(m.get("status"), dict) else {}
            state = "dead" if st.get("considered_dead") else "unresponsive" if st.get("unresponsive") else "missing"
            proc = RasProcess(_int(m.get("pid")), str(m.get("host") or "") or None, str(m.get("cuda_dev", "")), state)
            (dead if state == "dead" else missing).append(proc)
        if gone or (_int(c.get("missing_ranks_count")) or 0) > 0:
            ranks = tuple(RasRank(_int(m.get("rank")) or 0, str(m.get("cuda_dev", "")), _int(m.get("pid")),
                                  str(m.get("host") or "") or None,
                                  "considered dead" if (m.get("status") or {}).get("considered_dead") else
                                  "unresponsive" if (m.get("status") or {}).get("unresponsive") else "")
                          for m in gone[:MAX_ITEMS])
            issues.append(RasCommIssue("", comm_hash, "INCOMPLETE", "", _int(c.get("missing_ranks_count")) or len(gone),
                                       ranks=ranks))
        issues.extend(_json_rank_issues(c, comm_hash))
    ras = data.get("ras") if isinstance(data.get("ras"), dict) else {}
    version = data.get("nccl_version")
    return RasReport(source=source, format="json", nccl_version=str(version) if version else None,
                     cuda_runtime=_version_text(data.get("cuda_runtime_version")),
                     cuda_driver=_version_text(data.get("cuda_driver_version")),
                     missing_processes=tuple(missing[:MAX_ITEMS]), missing_count=len(missing),
                     dead_processes=tuple(dead[:MAX_ITEMS]), dead_count=len(dead), comm_issues=tuple(issues[:MAX_ITEMS]),
                     timeouts=_int(ras.get("timeouts_count")) or 0,
                     query_seconds=ras.get("collection_time_sec") if isinstance(ras.get("collection_time_sec"),
                                                                                 (int, float)) else None,
                     no_comm_data=isinstance(data.get("communicators"), list) and not data["communicators"])


def _json_rank_issues(c: dict, comm_hash: str) -> list[RasCommIssue]:
    """Errors and count mismatches among the ranks that answered (what the text report prints as ERROR and
    MISMATCH entries)."""
    ranks = [r for r in c.get("ranks") or () if isinstance(r, dict)]
    out: list[RasCommIssue] = []
    errs = []
    for r in ranks:
        st = r.get("status") if isinstance(r.get("status"), dict) else {}
        init, err = _int(st.get("init_state")) or 0, _int(st.get("async_error")) or 0
        if (init and init != 7) or err or st.get("abort_flag"):
            errs.append(RasRank(_int(r.get("rank")) or 0, str(r.get("cuda_dev", "")), _int(r.get("pid")),
                                str(r.get("host") or "") or None,
                                f"init_state {init}" if init and init != 7 else f"async_error {err}" if err else "abort"))
    if errs:
        out.append(RasCommIssue("", comm_hash, "ERROR", "Asynchronous error" if any("async" in e.value for e in errs)
                                else "Initialization error", len(errs), ranks=tuple(errs[:MAX_ITEMS])))
    counts: dict[str, dict[int, list[RasRank]]] = {}
    for r in ranks:
        cc = r.get("collective_counts") if isinstance(r.get("collective_counts"), dict) else {}
        for coll, v in cc.items():
            if _int(v) is not None:
                counts.setdefault(coll, {}).setdefault(v, []).append(
                    RasRank(_int(r.get("rank")) or 0, str(r.get("cuda_dev", "")), _int(r.get("pid")),
                            str(r.get("host") or "") or None, str(v)))
    for coll, by_value in counts.items():
        if len(by_value) > 1:
            groups = tuple(RasGroup(len(v), str(k), tuple(v[:MAX_ITEMS]))
                           for k, v in sorted(by_value.items(), key=lambda kv: -len(kv[1])))
            out.append(RasCommIssue("", comm_hash, "MISMATCH", f"{coll} operation counts", groups=groups))
    return out


# Cheap tests for whether a text can hold a RAS report or RAS log lines at all (report_markers)
REPORT_MARKERS, MARKERS = RAS_REPORT_MARKERS, RAS_MARKERS


def has_ras(text: str) -> bool:
    return any(m in text for m in MARKERS)


__all__ = ["parse_ras_text", "parse_ras_numbered", "parse_ras_json", "has_ras", "MARKERS", "REPORT_MARKERS",
           "MAX_ITEMS"]
