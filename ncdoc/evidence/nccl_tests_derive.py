"""What both nccl-tests readers (text and -J JSON) work out the same way: the facts derived from the
rows and device lines they read (peak, #wrong totals, ranks and hosts, bus factor, per-run
summaries), and the names both read (the collective from the binary's name, NCCL's version code).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence.citation import CitationBook
from ncdoc.evidence.nccl_tests_model import Device, NcclTestsFacts, Row


def collective_name(program: str) -> str:
    """"./build/all_reduce_perf" -> "all_reduce" (also *_perf_mpi)."""
    name = program.rsplit("/", 1)[-1]
    for suffix in ("_perf_mpi", "_perf"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def nccl_version_from_code(code: int) -> str | None:
    """NCCL_VERSION_CODE -> "2.30.7" (major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before)."""
    if code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def derive(f: dict, rows: list[Row], devices: list[Device], columns: tuple, per_iter: bool, timestamps: bool,
           cputime: bool, book: CitationBook, source: str, fmt: str, wrong_hint: str | None) -> NcclTestsFacts:
    """The facts every reader shares: peak, #wrong totals, ranks and hosts, bus factor."""
    peak = (None, None, None, None)
    wrong_vals: list[float] = []
    na = False
    ratios = []
    for r in rows:
        for name, g in (("oop", r.oop), ("ip", r.ip)):
            if g is None:
                continue
            if g.busbw is not None and (peak[0] is None or g.busbw > peak[0]):
                peak = (g.busbw, r.size, name, g.algbw)
            if g.wrong is not None:
                wrong_vals.append(g.wrong)
            elif g.busbw is not None:
                na = True
            if g.algbw and g.busbw and g.algbw >= 1.0:
                ratios.append(g.busbw / g.algbw)
    kind = wrong_hint
    if kind is None and wrong_vals:
        raw_tokens_float = any(v != int(v) for v in wrong_vals)
        kind = "max_error" if raw_tokens_float else "count"
    if kind is None and f.get("_wrong_json"):
        kind = "count"
    total = sum(wrong_vals) if kind == "count" and wrong_vals else (0.0 if kind == "count" and not na else None)
    wrong_rows = sum(1 for r in rows if any(g is not None and g.wrong for g in (r.oop, r.ip)))
    ranks = [d.rank for d in devices]
    dup = sorted({x for x in ranks if ranks.count(x) > 1}) if len(ranks) < 4096 else []
    hosts = tuple(dict.fromkeys(d.host for d in devices))
    cfg = f.get("config", {})
    factor = round(_median(ratios), 4) if ratios else None
    return NcclTestsFacts(
        source=source, format=fmt, collective=f.get("collective"), collective_source=f.get("collective_source"),
        tests_version=f.get("tests_version"), nccl_version=f.get("nccl_version"), config=dict(cfg),
        nthread=cfg.get("nthread"), ngpus=cfg.get("ngpus"), devices=tuple(devices), hosts=hosts,
        nranks=len(set(ranks)) or None, rows=tuple(rows), peak_busbw_gbps=peak[0], peak_size=peak[1],
        peak_group=peak[2], peak_algbw_gbps=peak[3], wrong_kind=kind, wrong_total=total if kind == "count" else None,
        wrong_rows=wrong_rows if kind == "count" else 0,
        max_error=max(wrong_vals) if kind == "max_error" and wrong_vals else None,
        validation_off=na and not wrong_vals, avg_busbw_gbps=f["avg"][-1] if f["avg"] else None,
        avg_busbw_lines=tuple(f["avg"]), out_of_bounds=f.get("oob"), out_of_bounds_ok=f.get("oob_ok"),
        runs=f["runs"], headers=f["headers"], table_headers=f["table_headers"], summaries=f["summaries"],
        device_listings=f["device_listings"], duplicate_ranks=tuple(dup), truncated=bool(f["truncation"]),
        truncation=tuple(dict.fromkeys(f["truncation"]))[:16], header_missing=bool(f.get("header_missing")),
        columns=columns, per_iter_timing=per_iter, timestamps=timestamps, cputime=cputime,
        errors=tuple(f["errors"]), bus_factor=factor, n_implied=_n_implied(factor),
        nccl_lines=f["nccl_lines"], env=dict(f.get("env", {})), run_summaries=_run_summaries(f, rows, devices),
        failures=tuple(f.get("failures", ())), failures_seen=f.get("failures_seen", 0),
        failure_note=f.get("failure_note"), command=dict(f.get("command") or {}), evidence=book.freeze())


def _run_summaries(f: dict, rows: list[Row], devices: list[Device]) -> tuple[dict[str, Any], ...]:
    """Per run (header): its ranks, hosts, pids, rows, peak and average; separate jobs show here."""
    out = []
    for run in range(max(f["runs"], 1) if (rows or devices) else f["runs"]):
        devs = [d for d in devices if d.run == run]
        rs = [r for r in rows if r.run == run]
        peaks = [r.busbw for r in rs if r.busbw is not None]
        out.append({"run": run, "ranks": len({d.rank for d in devs}), "hosts": sorted({d.host for d in devs}),
                    "pids": len({d.pid for d in devs}), "rows": len(rs), "peak_busbw_gbps": max(peaks, default=None),
                    "avg_busbw_gbps": f.get("avg_runs", {}).get(run)})
    return tuple(out)


def _n_implied(factor: float | None) -> dict[str, int]:
    """Rank counts the bus factor implies: 2(n-1)/n for all_reduce, (n-1)/n for the gather family."""
    if factor is None or abs(factor - 1.0) < 0.01:
        return {}
    n = 2 / (2 - factor) if factor > 1 else 1 / (1 - factor)
    if n > 65536 or abs(n - round(n)) > 0.15 * max(1.0, n / 16):
        return {}
    family = "all_reduce" if factor > 1 else "all_gather/reduce_scatter/alltoall"
    return {family: int(round(n))}


def _median(values: list[float]) -> float:
    """statistics.median, without importing statistics (and fractions, decimal) for one number."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
