"""NCCL's own diagnostics reports (2.31+): the `NCCL DIAG` lines of NCCL_RUN_DIAGNOSTICS (active checks at
communicator init: P2P edges verified, ib_write_bw between nodes) and of the RAS diagnostics
(NCCL_RUN_RAS_DIAGNOSTICS, `ncclras -D`: GPU inventory, CUDA driver, ECC, Xid/SXid, NVLink, NCCL
environment, rdma_topo, graphics driver compared across ranks).

Every line is `<host>:<pid> NCCL DIAG ` (the prefix may be missing in pastes) then `[OK]   ` or `[INFO] `
and `<check>: <text>` (src/diagnostics*.cc, src/ras/diagnostics*.cc; rasDiagnosticsReport), or a
header/footer line (`=== NCCL Diagnostics ===`, `... completed in 12.3 ms across 8 ranks`). Each
result line is kept with what it says in one word (its category), so the rules can turn [INFO]
lines into findings; [OK] lines are counted as checks that passed.

    diag = parse_nccl_diag(lines, source="job.log")     # DiagReport; .empty when no DIAG line was there
"""

from __future__ import annotations
from collections.abc import Iterable
from typing import Any

from ncdoc.evidence.citation import Citation
from ncdoc.evidence.lazy_re import lazy
from ncdoc.evidence.report_markers import DIAG_MARKERS
from ncdoc.evidence.wrappers import strip_wrappers
from ncdoc.startup.record import field, record

_BODY = lazy(r"NCCL DIAG (?:\[(OK|INFO)\] *)?(.*\S|)\s*$")
_HOST_PID = lazy(r"([\w.\-]+):\d+")
_CHECK = lazy(r"^([A-Za-z][\w/ ]{0,40}?): (.*)$")
_RANKS = lazy(r"\{([\d,]*)(?:,\.\.\.\} \(N=(\d{1,20}(?!\d))\)|\})")
_COMM = lazy(r"in comm (0x[0-9a-fA-F]+)")
_P2P_COUNT = lazy(r"(?:only )?(\d{1,20}(?!\d))/(\d{1,20}(?!\d)) (?:GPU-to-GPU peer accesses passed verification|directed GPU P2P edges "
                        r"verified)")
# numbers bounded and searched from a token's start only (a run like [\d.]+ retried from each of its characters)
_NET_SUMMARY = lazy(r"(?<![\d.])(\d{1,20}(?:\.\d{1,20})?)/(\d{1,20}(?:\.\d{1,20})?)/(\d{1,20}(?:\.\d{1,20})?) Gbit/s min/median/max ([\w-]+) bw \(across (\d{1,20}(?!\d)) ranks\)")
_NET_OUTLIER = lazy(r"(?<![\w-])([\w-]+) rank (\d{1,20}(?!\d)) \(([^)]*)\): (\d{1,20}(?:\.\d{1,20})?) Gbit/s, >(\d{1,20}(?!\d))% off median (\d{1,20}(?:\.\d{1,20})?) Gbit/s")
_ENV_VALUE = lazy(r"^(NCCL_\w+)=(.*?) on rank\(s\) (\{.*)$")
_ENV_VAR = lazy(r"mismatch across \d+ ranks in comm \S+ for (NCCL_\w+)")
_ENV_COUNT = lazy(r"^(\d{1,20}(?!\d)) NCCL_\* env var\(s\) differ")
_INCOMPLETE = lazy(r"diagnostics incomplete, gathered (\d{1,20}(?!\d))/(\d{1,20}(?!\d)) ranks")
_DONE = lazy(r"diagnostics completed in (\d{1,20}(?:\.\d{1,20})?) ms across (\d{1,20}(?!\d)) (ranks|RAS peers)")

MAX_LINES = 128
MARKERS = DIAG_MARKERS            # what a text must hold for this parser to find anything (report_markers)

_HARDWARE_CHECKS = ("ECC", "Xid/SXid", "NVLink")
_CONFIG_CHECKS = ("NCCL environment", "CUDA driver version", "GPU inventory", "NVIDIA graphics driver version")
_PATH_CHECKS = ("p2p", "rdma_topo check", "PCI", "paths")


@record
class DiagLine:
    check: str                     # "p2p", "net bw", "NCCL environment", "ECC", ...; "" for headers
    tag: str                       # "OK" | "INFO" | "" (header, footer)
    text: str                      # what follows "<check>: "
    category: str                  # ok | notice | config_mismatch | p2p_failed | net_outlier | net_failed |
                                   # hardware | incomplete | unavailable | other
    host: str | None = None
    line: int = 0
    raw: str = ""
    ranks: tuple[int, ...] = ()    # the rank set a line names ({0,1,2,3})
    rank_total: int | None = None  # "(N=...)" when the set was cut short
    comm: str | None = None


@record
class DiagReport:
    source: str = ""
    lines: tuple[DiagLine, ...] = ()
    kinds: tuple[str, ...] = ()    # "active" (NCCL Diagnostics) and/or "ras" (RAS Diagnostics)
    completed: tuple[str, ...] = ()  # the footer lines: "... completed in 245.3 ms across 8 ranks"
    ranks: int | None = None       # from a footer
    env_values: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)  # var -> value -> ranks
    evidence: dict[str, tuple[Citation, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.lines and not self.completed

    def of(self, *categories: str) -> tuple[DiagLine, ...]:
        return tuple(x for x in self.lines if x.category in categories)

    def to_facts(self) -> dict[str, Any]:
        return {
            "diag_kinds": list(self.kinds),
            "diag_ranks": self.ranks,
            "diag_checks_ok": sorted({x.check for x in self.lines if x.category == "ok"}),
            "diag_findings": [{"check": x.check, "tag": x.tag, "category": x.category, "text": x.text,
                               "host": x.host, "ranks": list(x.ranks), "comm": x.comm, "line": x.line}
                              for x in self.lines if x.category != "ok"],
            "diag_env_values": {k: {v: list(r) for v, r in d.items()} for k, d in self.env_values.items()},
            "diag_completed": list(self.completed),
        }


def _category(check: str, tag: str, text: str) -> str:
    if tag == "OK":
        return "ok"
    low = text.lower()
    if "diagnostics incomplete" in low:
        return "incomplete"
    if "unavailable" in low and "mismatch" not in low and "error" not in low:
        return "unavailable"
    if check == "net bw":
        if _NET_OUTLIER.search(text):
            return "net_outlier"
        if "timed out" in low or "unable to complete" in low or "failed" in low:
            return "net_failed"
        return "notice" if _NET_SUMMARY.search(text) else "other"
    if check in _PATH_CHECKS or check.startswith("p2p"):
        if "temporarily enabled" in low or "skipped" in low and "verified" not in low:
            return "notice"
        m = _P2P_COUNT.search(text)
        if m:
            return "p2p_failed" if int(m.group(1)) < int(m.group(2)) else "notice"
        return "p2p_failed"
    if check in _HARDWARE_CHECKS:
        return "hardware"
    if check in _CONFIG_CHECKS or "mismatch" in low or "differ" in low:
        return "config_mismatch"
    return "other"


def parse_nccl_diag(lines: Iterable[str], source: str = "") -> DiagReport:
    """A DiagReport from the `NCCL DIAG` lines among `lines` (a log, stdout, an ncclras -D answer)."""
    return parse_diag_numbered(enumerate(lines, 1), source)


def parse_diag_numbered(numbered: Iterable[tuple[int, str]], source: str = "") -> DiagReport:
    """parse_nccl_diag over (line number, line) pairs."""
    out: list[DiagLine] = []
    kinds: dict[str, None] = {}
    completed: list[str] = []
    ranks_seen: int | None = None
    env_values: dict[str, dict[str, tuple[int, ...]]] = {}
    book: dict[str, list[Citation]] = {}
    for n, raw in numbered:
        if "NCCL DIAG" not in raw:
            continue
        text = strip_wrappers(raw.rstrip("\r\n"))
        at = text.find("NCCL DIAG")
        m = _BODY.match(text, at)
        if not m:
            continue
        before = text[:at].rstrip()
        hm = _HOST_PID.fullmatch(before[before.rfind(" ") + 1:]) if before else None
        host, tag, body = hm.group(1) if hm else None, m.group(1) or "", m.group(2)
        if body.startswith("==="):
            kinds.setdefault("ras" if "RAS" in body else "active", None)
            continue
        done = _DONE.search(body)
        if done and not tag:
            completed.append(body)
            ranks_seen = max(ranks_seen or 0, int(done.group(2)))
            kinds.setdefault("ras" if "RAS" in done.group(3) or body.startswith("RAS") else "active", None)
            continue
        cm = _CHECK.match(body)
        check, rest = (cm.group(1), cm.group(2)) if cm else ("", body)
        cat = _category(check, tag, rest)
        rs = _RANKS.search(rest)
        ranks = tuple(int(x) for x in rs.group(1).split(",") if x) if rs else ()
        comm = _COMM.search(rest)
        if check == "NCCL environment":
            ev = _ENV_VALUE.match(rest)
            if ev:
                env_values.setdefault(ev.group(1), {})[ev.group(2)] = ranks
                cat = "config_mismatch"
        if len(out) < MAX_LINES:
            out.append(DiagLine(check, tag, rest, cat, host, n, text.strip(), ranks,
                                int(rs.group(2)) if rs and rs.group(2) else None, comm.group(1) if comm else None))
        got = book.setdefault(cat, [])
        if len(got) < 8:
            got.append(Citation.of(n, text.strip()))
    return DiagReport(source, tuple(out), tuple(kinds), tuple(completed), ranks_seen, env_values,
                      {k: tuple(v) for k, v in book.items()})


def env_var_of(line: DiagLine) -> str | None:
    """The variable an NCCL-environment line is about ("mismatch ... for NCCL_DEBUG", "NCCL_DEBUG=INFO on ...")."""
    m = _ENV_VAR.search(line.text) or _ENV_VALUE.match(line.text)
    return m.group(1) if m else None


def net_outlier(line: DiagLine) -> tuple[str, int, str, float, float] | None:
    """(mode, rank, host, Gbit/s, median Gbit/s) of a "net bw: cross-nic rank 3 (node0): 265.1 Gbit/s ..." line."""
    m = _NET_OUTLIER.search(line.text)
    return (m.group(1), int(m.group(2)), m.group(3), float(m.group(4)), float(m.group(6))) if m else None


def p2p_counts(line: DiagLine) -> tuple[int, int] | None:
    m = _P2P_COUNT.search(line.text)
    return (int(m.group(1)), int(m.group(2))) if m else None


__all__ = ["MARKERS", "DiagLine", "DiagReport", "parse_nccl_diag", "parse_diag_numbered", "env_var_of", "net_outlier", "p2p_counts"]
