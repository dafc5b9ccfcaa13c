"""What nccl-tests output says, as frozen records: rows, devices, failure lines and the facts of a whole
output (NcclTestsFacts), and their JSON view, the object `ncdoc triage --json` carries under "facts".

Keys: collective, peak_busbw_gbps, peak_size, peak_group, peak_algbw_gbps, wrong (total
#wrong, None when not checked), wrong_kind, wrong_rows, max_error, validation_off,
avg_busbw_gbps (the footer line, small sizes included), out_of_bounds, out_of_bounds_ok,
ranks (device lines), hosts, n (ranks), nthread, ngpus, config, rows ({size, count, type,
redop, root, busbw_oop, busbw_ip, algbw_oop, algbw_ip, time_oop, time_ip, wrong_oop,
wrong_ip, complete, run, line}), runs, run_summaries, headers, table_headers, summaries, device_listings,
duplicate_ranks, truncated, truncation, header_missing, bus_factor, n_implied, tests_version,
nccl_version, test_env, errors, format, nccl_lines, failures ({kind: cuda|nccl|test, host, pid,
location "file:line" of nccl-tests' source, error, last_error, error_name, meaning, line}, at most
nccl_tests_text.MAX_FAILURES), failures_seen (all failure lines), failure_note ({line, text}: the free
text that explains the first failure, e.g. "Invalid number of GPUs: ...", or None).
"""

from __future__ import annotations

from ncdoc.startup.record import field, record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence.citation import Citation


@record
class GroupResult:
    time_us: float | None = None       # per op; "cputime" with -C
    algbw: float | None = None         # GB/s
    busbw: float | None = None         # GB/s
    wrong: float | None = None         # #wrong (count) or the old `error` column (max error); None = N/A
    per_iter: dict[str, float | None] | None = None   # -I: i_min, i_max, i_p99 (us), i_cv% (%)


@record
class Row:
    size: int                          # bytes
    count: int | None
    type: str | None
    redop: str | None                  # "sum", "none" (non-reducing tests); None in old outputs without it
    root: int | None                   # -1 for rootless tests; None in old outputs without it
    oop: GroupResult | None
    ip: GroupResult | None
    timestamp: str | None = None       # -S
    run: int = 0                       # which run (header) of the file it belongs to
    line: int = 0
    complete: bool = True              # False: the line was cut short

    @property
    def busbw(self) -> float | None:
        vals = [g.busbw for g in (self.oop, self.ip) if g is not None and g.busbw is not None]
        return max(vals) if vals else None


@record
class Device:
    rank: int
    host: str
    pid: int | None = None
    group: int | None = None
    device: int | None = None
    bus_id: str | None = None          # "0000:18:00" or old "0x18"
    name: str = ""                     # "NVIDIA H100 80GB HBM3"
    run: int = 0
    line: int = 0


@record
class Failure:
    """One failure line of nccl-tests (src/common.h CUDACHECK, NCCLCHECK, TESTCHECK)."""
    kind: str                          # "cuda" | "nccl" | "test" (TESTCHECK: relayed up the call stack)
    host: str                          # hostname up to its first dot, as getHostName gives it
    pid: int | None                    # TESTCHECK lines only
    file: str                          # nccl-tests source file: "common.cu"
    source_line: int                   # line in that source file
    error: str = ""                    # cudaGetErrorString / ncclGetErrorString text
    last_error: str = ""               # ncclGetLastError (NCCL >= 2.13), "" when empty or absent
    error_name: str | None = None      # "cudaErrorMemoryAllocation", "ncclSystemError" (error_codes tables)
    meaning: str = ""                  # a CUDA error's one-line meaning from error_codes, else ""
    line: int = 0                      # line in the output
    text: str = ""                     # the line, launcher tag removed

    @property
    def location(self) -> str:
        return f"{self.file}:{self.source_line}"


@record
class NcclTestsFacts:
    source: str = ""
    format: str = "text"               # "text" | "json"
    collective: str | None = None      # "all_reduce", "sendrecv", ...
    collective_source: str | None = None   # "header" | "footer" | "json" | None
    tests_version: str | None = None
    nccl_version: str | None = None    # from nccl-library=NNNNN (or the JSON's nccl_version)
    config: dict[str, Any] = field(default_factory=dict)
    nthread: int | None = None
    ngpus: int | None = None
    devices: tuple[Device, ...] = ()
    hosts: tuple[str, ...] = ()
    nranks: int | None = None          # distinct ranks listed in the device lines
    rows: tuple[Row, ...] = ()
    peak_busbw_gbps: float | None = None
    peak_size: int | None = None
    peak_group: str | None = None      # "oop" | "ip"
    peak_algbw_gbps: float | None = None
    wrong_kind: str | None = None      # "count" (#wrong) | "max_error" (old `error` column)
    wrong_total: float | None = None   # sum of #wrong over rows and groups; None when none was checked
    wrong_rows: int = 0
    max_error: float | None = None
    validation_off: bool = False       # #wrong printed N/A (-c 0)
    avg_busbw_gbps: float | None = None    # the "Avg bus bandwidth" line (small sizes included)
    avg_busbw_lines: tuple[float, ...] = ()
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    runs: int = 0                      # runs seen (a "# nThread" header, or a table with no header)
    headers: int = 0                   # "# nThread ..." lines
    table_headers: int = 0             # "#  size  count  type ..." lines
    summaries: int = 0                 # "# Avg bus bandwidth" lines
    device_listings: int = 0           # "# Using devices" lines
    duplicate_ranks: tuple[int, ...] = ()   # rank numbers listed more than once
    truncated: bool = False
    truncation: tuple[str, ...] = ()
    header_missing: bool = False       # result rows with no table header before them
    columns: tuple[str, ...] = ()
    per_iter_timing: bool = False
    timestamps: bool = False
    cputime: bool = False
    errors: tuple[str, ...] = ()       # "# error: ..." lines
    bus_factor: float | None = None    # median busbw/algbw: 2(n-1)/n all_reduce, (n-1)/n gathers, 1 bcast
    n_implied: dict[str, int] = field(default_factory=dict)   # {"all_reduce": 16}: ranks the factor implies
    nccl_lines: int = 0                # interleaved NCCL INFO/WARN lines, left to the log parser
    env: dict[str, str] = field(default_factory=dict)   # JSON output: the NCCL_* environment of the run
    run_summaries: tuple[dict[str, Any], ...] = ()      # per run: ranks, hosts, pids, rows, peak, average
    failures: tuple[Failure, ...] = ()  # "Test CUDA/NCCL failure" and " .. Test failure" lines, in order
    failures_seen: int = 0             # all failure lines, also those not kept in `failures`
    failure_note: Citation | None = None   # the free-text line that explains the first failure
    command: dict[str, Any] = field(default_factory=dict)   # the command line pasted with it: test, ngpus, nthreads,
                                                            # per_host (processes per host), line, text
    evidence: dict[str, tuple[Citation, ...]] = field(default_factory=dict)

    def to_facts(self) -> dict[str, Any]:
        """The JSON object `ncdoc triage` copies into its "facts" (keys in the module docstring)."""
        return tests_facts_dict(self)


_ROWS_OUT = 2000


def tests_facts_dict(f: NcclTestsFacts) -> dict[str, Any]:
    def g(group, attr):
        return getattr(group, attr) if group is not None else None

    return {
        "format": f.format,
        "collective": f.collective,
        "peak_busbw_gbps": f.peak_busbw_gbps,
        "peak_size": f.peak_size,
        "peak_group": f.peak_group,
        "peak_algbw_gbps": f.peak_algbw_gbps,
        "wrong": f.wrong_total,
        "wrong_kind": f.wrong_kind,
        "wrong_rows": f.wrong_rows,
        "max_error": f.max_error,
        "validation_off": f.validation_off,
        "avg_busbw_gbps": f.avg_busbw_gbps,
        "avg_busbw_lines": list(f.avg_busbw_lines),
        "out_of_bounds": f.out_of_bounds,
        "out_of_bounds_ok": f.out_of_bounds_ok,
        "ranks": [{"rank": d.rank, "host": d.host, "pid": d.pid, "device": d.device, "bus_id": d.bus_id,
                   "gpu": d.name, "run": d.run} for d in f.devices],
        "hosts": list(f.hosts),
        "n": f.nranks,
        "nthread": f.nthread,
        "ngpus": f.ngpus,
        "config": dict(f.config),
        "rows": [{"size": r.size, "count": r.count, "type": r.type, "redop": r.redop, "root": r.root,
                  "busbw_oop": g(r.oop, "busbw"), "busbw_ip": g(r.ip, "busbw"),
                  "algbw_oop": g(r.oop, "algbw"), "algbw_ip": g(r.ip, "algbw"),
                  "time_oop": g(r.oop, "time_us"), "time_ip": g(r.ip, "time_us"),
                  "wrong_oop": g(r.oop, "wrong"), "wrong_ip": g(r.ip, "wrong"),
                  "complete": r.complete, "run": r.run, "line": r.line} for r in f.rows[:_ROWS_OUT]],
        "runs": f.runs,
        "run_summaries": [dict(r) for r in f.run_summaries],
        "headers": f.headers,
        "table_headers": f.table_headers,
        "summaries": f.summaries,
        "device_listings": f.device_listings,
        "duplicate_ranks": list(f.duplicate_ranks),
        "truncated": f.truncated,
        "truncation": list(f.truncation),
        "header_missing": f.header_missing,
        "bus_factor": f.bus_factor,
        "n_implied": dict(f.n_implied),
        "per_iter_timing": f.per_iter_timing,
        "timestamps": f.timestamps,
        "cputime": f.cputime,
        "tests_version": f.tests_version,
        "nccl_version": f.nccl_version,
        "test_env": dict(f.env),
        "errors": list(f.errors),
        "nccl_lines": f.nccl_lines,
        "failures": [{"kind": x.kind, "host": x.host, "pid": x.pid, "location": x.location, "error": x.error,
                      "last_error": x.last_error, "error_name": x.error_name, "meaning": x.meaning, "line": x.line}
                     for x in f.failures],
        "failures_seen": f.failures_seen,
        "failure_note": f.failure_note.to_dict() if f.failure_note is not None else None,
        "command": dict(f.command),
        "evidence": {k: [e.to_dict() for e in v] for k, v in f.evidence.items()},
    }
