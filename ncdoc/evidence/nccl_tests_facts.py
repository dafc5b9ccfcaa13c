"""NcclTestsFacts as the JSON object `ncdoc triage --json` carries under "facts".

Keys: collective, peak_busbw_gbps, peak_size, peak_group, peak_algbw_gbps, wrong (total
#wrong, None when not checked), wrong_kind, wrong_rows, max_error, validation_off,
avg_busbw_gbps (the footer line, small sizes included), out_of_bounds, out_of_bounds_ok,
ranks (device lines), hosts, n (ranks), nthread, ngpus, config, rows ({size, count, type,
redop, root, busbw_oop, busbw_ip, algbw_oop, algbw_ip, time_oop, time_ip, wrong_oop,
wrong_ip, complete, run, line}), runs, run_summaries, headers, table_headers, summaries, device_listings,
duplicate_ranks, truncated, truncation, header_missing, bus_factor, n_implied, tests_version,
nccl_version, test_env, errors, format, nccl_lines, failures ({kind: cuda|nccl|test, host, pid,
location "file:line" of nccl-tests' source, error, last_error, error_name, meaning, line}, at most
MAX_FAILURES), failures_seen (all failure lines), failure_note ({line, text}: the free text that explains
the first failure, e.g. "Invalid number of GPUs: ...", or None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ncdoc.evidence.nccl_tests import NcclTestsFacts

_ROWS_OUT = 2000


def tests_facts_dict(f: "NcclTestsFacts") -> dict[str, Any]:
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
        "evidence": {k: [e.to_dict() for e in v] for k, v in f.evidence.items()},
    }
