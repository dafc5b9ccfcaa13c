"""What a framework says about the NCCL collectives it ran: PyTorch's ProcessGroupNCCL watchdog.

Formats (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, PyTorch 1.13 to 2.9): the work record
`WorkNCCL(SeqNum=%lu, OpType=%s[, NumelIn=%ld, NumelOut=%ld], Timeout(ms)=%ld)` inside
`<prefix>Watchdog caught collective operation timeout: <work> ran for %ld milliseconds before timing
out.`; the progress lines `Exception (either an error or timeout) detected by watchdog at work: %d, last
enqueued NCCL work: %d, last completed NCCL work: %d.`, `Timeout at NCCL work: ...` and `failure detected
by watchdog at work sequence id: %d PG status: last enqueued work: %d, last completed work: %d`; the
heartbeat monitor's `watchdog got stuck for %d seconds`. The log prefix names the rank and process
group: `[Rank N] `, `[PG N Rank N] `, `[PG N (desc) Rank N] `, `[PG ID N PG GUID N(desc) Rank N] `.

Read only for the framework lines the scanner hands over (rare next to NCCL's own lines), into
bounded tallies in the ScanState; nccl_log_merge freezes them into FrameworkFacts.
"""

from __future__ import annotations

from ncdoc.evidence.citation import Citation
from ncdoc.evidence.lazy_re import lazy

WORK = lazy(r"WorkNCCL\(SeqNum=(\d{1,20}(?!\d)), OpType=(\w+)(?:, NumelIn=(-?\d{1,20}(?!\d)), NumelOut=(-?\d{1,20}(?!\d)))?"
                  r"(?:, Timeout\(ms\)=(\d{1,20}(?!\d)))?")
RAN = lazy(r"ran for (\d{1,20}(?!\d)) milliseconds before timing out")
PREFIX_RANK = lazy(r"\[(?:PG (?:ID )?(\w+)[^\]]{0,80}? )?Rank (\d{1,20}(?!\d))\]")
TAG_RANK = lazy(r"\[rank(\d{1,20}(?!\d))\]:")
PROGRESS = lazy(r"(?:detected by watchdog at work: |Timeout at NCCL work: |watchdog at work sequence id: )(\d{1,20}(?!\d))"
                      r"(?:,| PG status:) last enqueued (?:NCCL )?work: (-?\d{1,20}(?!\d)), last completed (?:NCCL )?work: (-?\d{1,20}(?!\d))")
STUCK = lazy(r"watchdog got stuck for (\d{1,20}(?!\d)) seconds")
ENV_NAME = lazy(r"\b((?:TORCH_)?NCCL_(?:ASYNC_ERROR_HANDLING|BLOCKING_WAIT|DESYNC_DEBUG|DUMP_ON_TIMEOUT|"
                      r"ENABLE_MONITORING|HEARTBEAT_TIMEOUT_SEC|TRACE_BUFFER_SIZE|ENABLE_TIMING|"
                      r"AVOID_RECORD_STREAMS|HIGH_PRIORITY|BCAST_UNIQUEID))\b")

MAX_TIMEOUTS = 256


def framework_line(fw: dict, text: str, lineno: int) -> None:
    """Add what one framework line says to `fw` (ScanState.framework)."""
    rank = _rank(text)
    if "Watchdog caught collective operation timeout" in text:
        work = WORK.search(text)
        fw["timeout_lines"] += 1
        if work and "thread terminated" not in text:      # the terminate line repeats the first one
            ran = RAN.search(text, work.end())
            key = (rank[0], rank[1], work.group(1), work.group(2))
            if key not in fw["seen"] and len(fw["timeouts"]) < MAX_TIMEOUTS:
                fw["seen"].add(key)
                fw["timeouts"].append({
                    "rank": rank[1], "pg": rank[0], "seq": int(work.group(1)), "op": work.group(2),
                    "numel_in": int(work.group(3)) if work.group(3) else None,
                    "numel_out": int(work.group(4)) if work.group(4) else None,
                    "timeout_ms": int(work.group(5)) if work.group(5) else None,
                    "ran_ms": int(ran.group(1)) if ran else None, "evidence": Citation.of(lineno, text)})
        if "thread terminated" in text:
            fw["terminated"] += 1
        return
    m = PROGRESS.search(text)
    if m:
        if len(fw["progress"]) < MAX_TIMEOUTS:
            fw["progress"].append({"rank": rank[1], "pg": rank[0], "seq": int(m.group(1)),
                                   "last_enqueued": int(m.group(2)), "last_completed": int(m.group(3)),
                                   "evidence": Citation.of(lineno, text)})
        return
    m = STUCK.search(text)
    if m:
        fw["stuck_s"] = max(fw["stuck_s"] or 0, int(m.group(1)))
        fw["stuck_line"] = fw["stuck_line"] or Citation.of(lineno, text)
        return
    if "NCCL_" in text:
        for name in ENV_NAME.findall(text):
            if len(fw["env_named"]) < 16:
                fw["env_named"].setdefault(name, Citation.of(lineno, text))


def new_tally() -> dict:
    return {"timeouts": [], "seen": set(), "progress": [], "timeout_lines": 0, "terminated": 0, "stuck_s": None,
            "stuck_line": None, "env_named": {}}


def _rank(text: str) -> tuple[str | None, int | None]:
    """(process group, rank) from the c10d log prefix, else the rank of a torchrun tag."""
    m = PREFIX_RANK.search(text)
    if m:
        return m.group(1), int(m.group(2))
    m = TAG_RANK.search(text)
    return None, int(m.group(1)) if m else None


__all__ = ["framework_line", "new_tally", "WORK", "MAX_TIMEOUTS"]
