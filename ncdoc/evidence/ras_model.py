"""What NCCL's RAS subsystem reports about a running job, as frozen records, and their JSON view.

Read from the `ncclras` client's text report (NCCL 2.24+, src/ras/client_support.cc), its
`-f json` report (2.28.7+), and the RAS lines a job's log carries (NCCL_DEBUG_SUBSYS=RAS: peers
declared dead, collectives timing out; `ncclras -m` monitor events). Facts only; what they mean
is for the rules (ncdoc/checks/evidence_ras.py).

JSON keys of RasReport.to_facts: ras_format, nccl_version, cuda_build, cuda_runtime, cuda_driver,
ras_nodes, ras_processes, ras_gpus, outlier_nodes, query_seconds, comm_groups (table rows),
no_comm_data, missing_processes, dead_processes, comm_issues, timeouts, events, evidence.
"""

from __future__ import annotations
from typing import Any

from ncdoc.evidence.citation import Citation
from ncdoc.startup.record import field, record

# The states a communicator's ranks report (Status column; NOCOMM was UNKNOWN before 2.26)
TRANSITIONAL = frozenset({"INIT", "RUNNING", "FINALIZE", "NOCOMM", "UNKNOWN"})


@record
class RasProcess:
    """A job process RAS names: "Process 3487984 on node 172.16.64.213 managing GPU 5"."""
    pid: int | None
    node: str | None
    gpus: str = ""
    state: str = ""                    # "missing" | "dead" | "unresponsive" (JSON) | "outlier"
    line: int = 0


@record
class RasRank:
    """One rank of a communicator RAS lists ("Rank 21 -- GPU 5 managed by process 3487984 on node ...")."""
    rank: int
    gpu: str = ""
    pid: int | None = None
    node: str | None = None
    value: str = ""                    # its status, operation count or reported error, when the line says
    line: int = 0


@record
class RasGroup:
    """"30 ranks have launched up to operation 640", "26 ranks have status UNKNOWN"."""
    count: int
    value: str                         # the operation count ("640", "none") or the status ("UNKNOWN")
    members: tuple[RasRank, ...] = ()  # the ranks listed under it (RAS lists small groups only)


@record
class RasCommIssue:
    """One communicator entry of the Errors or Warnings section: "#0-0 (cf264af53edbe986) INCOMPLETE"."""
    comm: str                          # "#0-0": group 0, communicator 0 in it
    comm_hash: str                     # the commHash NCCL INFO logs print too
    kind: str                          # "INCOMPLETE" | "ERROR" | "MISMATCH"
    what: str = ""                     # "status", "AllGather operation counts", "collective operation counts",
                                       # "Initialization error", "Asynchronous error"
    missing: int = 0                   # INCOMPLETE: ranks without data
    groups: tuple[RasGroup, ...] = ()
    ranks: tuple[RasRank, ...] = ()    # ranks named on their own line
    lines: tuple[str, ...] = ()        # the entry's lines, as printed
    line: int = 0


@record
class RasCommRow:
    """A row of the Communicators table."""
    group: int
    comms: int
    nodes: int
    ranks_per_node: str                # "8" or a range "7-8"
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str                        # "OK", "INCOMPLETE", "MISMATCH", "ERROR,MISMATCH", ...
    line: int = 0


@record
class RasEvent:
    """A RAS line of a job's log or a monitor event: a peer declared dead, a collective that timed out."""
    kind: str                          # "peer_dead" | "peer_new" | "collective_timeout" | "connect_timeout"
    peer: str = ""
    text: str = ""
    line: int = 0


@record
class RasReport:
    source: str = ""
    format: str = "text"               # "text" | "json" | "log" (RAS lines of a job's log only)
    nccl_version: str | None = None
    cuda_build: str | None = None      # "12.9" of "compiled with CUDA 12.9"
    cuda_runtime: int | None = None    # 12090
    cuda_driver: int | None = None     # 12040
    nodes: int | None = None           # Job summary totals
    processes: int | None = None
    gpus: int | None = None
    outlier_nodes: tuple[RasProcess, ...] = ()
    query_seconds: float | None = None   # "Communicators... (2.05s)": seconds RAS waited for the answers
    comm_rows: tuple[RasCommRow, ...] = ()
    no_comm_data: bool = False         # "No communicator data collected!"
    missing_processes: tuple[RasProcess, ...] = ()   # INCOMPLETE: no data from these job processes
    missing_count: int = 0             # how many the report says (it may list fewer)
    dead_processes: tuple[RasProcess, ...] = ()
    dead_count: int = 0
    comm_issues: tuple[RasCommIssue, ...] = ()
    timeouts: int = 0                  # "Encountered N communication timeouts while gathering ..."
    events: tuple[RasEvent, ...] = ()
    evidence: dict[str, tuple[Citation, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.nccl_version or self.comm_rows or self.no_comm_data or self.missing_count
                    or self.dead_count or self.comm_issues or self.timeouts or self.events or self.nodes)

    def to_facts(self) -> dict[str, Any]:
        return ras_facts_dict(self)


def _proc(p: RasProcess) -> dict[str, Any]:
    return {"pid": p.pid, "node": p.node, "gpus": p.gpus, "state": p.state, "line": p.line}


def _rank(r: RasRank) -> dict[str, Any]:
    return {"rank": r.rank, "gpu": r.gpu, "pid": r.pid, "node": r.node, "value": r.value, "line": r.line}


def ras_facts_dict(r: RasReport) -> dict[str, Any]:
    return {
        "ras_format": r.format,
        "nccl_version": r.nccl_version,
        "cuda_build": r.cuda_build,
        "cuda_runtime": r.cuda_runtime,
        "cuda_driver": r.cuda_driver,
        "ras_nodes": r.nodes,
        "ras_processes": r.processes,
        "ras_gpus": r.gpus,
        "outlier_nodes": [_proc(p) for p in r.outlier_nodes],
        "query_seconds": r.query_seconds,
        "comm_groups": [{"group": c.group, "comms": c.comms, "nodes": c.nodes, "ranks_per_node": c.ranks_per_node,
                         "ranks_per_comm": c.ranks_per_comm, "ranks_in_group": c.ranks_in_group,
                         "status": c.status, "errors": c.errors, "line": c.line} for c in r.comm_rows],
        "no_comm_data": r.no_comm_data,
        "missing_processes": [_proc(p) for p in r.missing_processes],
        "missing_count": r.missing_count,
        "dead_processes": [_proc(p) for p in r.dead_processes],
        "dead_count": r.dead_count,
        "comm_issues": [{"comm": i.comm, "hash": i.comm_hash, "kind": i.kind, "what": i.what, "missing": i.missing,
                         "groups": [{"count": g.count, "value": g.value, "members": [_rank(m) for m in g.members]}
                                    for g in i.groups],
                         "ranks": [_rank(x) for x in i.ranks], "line": i.line} for i in r.comm_issues],
        "timeouts": r.timeouts,
        "events": [{"kind": e.kind, "peer": e.peer, "text": e.text, "line": e.line} for e in r.events],
        "evidence": {k: [e.to_dict() for e in v] for k, v in r.evidence.items()},
    }


__all__ = ["TRANSITIONAL", "RasProcess", "RasRank", "RasGroup", "RasCommIssue", "RasCommRow", "RasEvent",
           "RasReport", "ras_facts_dict"]
