"""The "facts" object of `ncdoc triage --json`: one picture merged from every input.

Top-level keys (the JSON contract): nccl_version, transport ("IB", "Socket" or a plugin's
name), gdr (enabled | disabled | partial | unknown), net_devices (["mlx5_0:1", ...]),
peak_busbw_gbps, wrong (total #wrong), matrix ({row: {column: path}}, SOC written SYS),
ports ([{device, port, state, rate_gbps, link_layer}]), env ({NAME: value}), plus nodes,
gpus_per_node, expected (bandwidth expectation and achieved %), topology and, under
sources, what each input alone said. observed_failures() lists the input lines that show a failure
(WARN/problem lines of a failure kind, repeated connect retries, failed tests, wrong results); the verdict ranks findings that quote one first.
"""

from __future__ import annotations

from collections import Counter
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.nccl.bandwidth import Expectation
from ncdoc.checks.evidence_common import job_nodes, local_gpus
from ncdoc.checks.evidence_tests import one_rank
from ncdoc.engine.rules import Context


def combined_transport(logs) -> tuple[str | None, dict[str, int]]:
    """The transport most ranks used across all logs, and the count per transport."""
    counts: Counter = Counter()
    named: list[str] = []
    for log in logs:
        for t, n in (getattr(log, "transports", None) or {}).items():
            counts[t] += n
        if getattr(log, "transport", None):
            named.append(log.transport)
    if counts and max(counts.values()) > 0:
        return counts.most_common(1)[0][0], dict(counts)
    if named:
        return Counter(named).most_common(1)[0][0], dict(counts)
    return None, dict(counts)


def combined_gdr(logs) -> str:
    states = {getattr(getattr(log, "gdr", None), "state", "unknown") for log in logs} - {"unknown", None}
    if not states:
        return "unknown"
    if len(states) == 1:
        return states.pop()
    return "partial"


def _net_devices(logs) -> list[str]:
    seen: dict[str, None] = {}
    for log in logs:
        for d in getattr(log, "net_devices", ()) or ():
            seen.setdefault(getattr(d, "name", str(d)), None)
    return list(seen)


def normalise_matrix(matrix: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """`nvidia-smi topo -m` of old drivers writes SOC for what newer ones call SYS."""
    return {row: {col: ("SYS" if str(v).upper() == "SOC" else v) for col, v in cols.items()}
            for row, cols in matrix.items()}


def _topology(ctx: Context) -> tuple[dict[str, dict[str, str]], dict[str, Any] | None]:
    snap = ctx.snapshot
    if snap is None:
        return {}, None
    if snap.paths.status.state == "ok" and snap.paths.matrix:
        matrix = normalise_matrix(snap.paths.matrix)
    else:
        matrix = {}
    try:
        topo = ctx.topology
    except Exception:       # a broken topology must not hide the rest of the answer
        topo = None
    if topo is None or not topo.status.known:
        return matrix, None
    tf = topo.facts()
    if not matrix:
        matrix = normalise_matrix(tf.get("matrix", {}))
    return matrix, {k: v for k, v in tf.items() if k != "matrix"}


def _ports(ctx: Context) -> list[dict[str, Any]]:
    snap = ctx.snapshot
    if snap is None or not snap.hcas.status.known:
        return []
    from ncdoc.topology import port_facts
    rows = port_facts(snap)
    for r in rows:
        if r.get("state"):
            r["state"] = str(r["state"]).upper()
    return rows


def _source_facts(obj: Any) -> dict[str, Any]:
    try:
        d = obj.to_facts()
    except Exception as exc:   # one input's summary failing must not lose the others
        return {"error": f"{type(exc).__name__}: {exc}"}
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if k not in ("evidence", "ranks", "rows")}
    return d


def _curve(tests: Any) -> list[list[float]]:
    """[[size, busbw]] per complete results row, the better of out-of-place and in-place (as the peak counts)."""
    out = []
    for r in getattr(tests, "rows", ()) or ():
        vals = [g.busbw for g in (r.oop, r.ip) if g is not None and g.busbw is not None]
        if vals and r.complete:
            out.append([r.size, max(vals)])
    return out


def build_facts(ctx: Context, ev: Any, exp: Expectation) -> dict[str, Any]:
    logs, tests = list(ev.logs), list(ev.tests)
    transport, transports = combined_transport(logs)
    peaks = [t.peak_busbw_gbps for t in tests if getattr(t, "peak_busbw_gbps", None) is not None]
    peak = max(peaks) if peaks else None
    wrong_counts = [t.wrong_total for t in tests if getattr(t, "wrong_total", None) is not None]
    matrix, topology = _topology(ctx)
    expected = exp.to_dict()
    expected["achieved_busbw_gbps"] = peak
    expected["achieved_pct"] = exp.achieved_pct(peak)
    single = [r for r in (one_rank(t) for t in tests) if r]
    if tests and len(single) == len(tests):
        # one rank crosses no link: its busbw is no measure of what the hardware should give
        expected["achieved_pct"] = None
        expected["not_comparable"] = single[0]
    facts: dict[str, Any] = {
        "nccl_version": ctx.nccl_version,
        "transport": transport,
        "transports": transports,
        "gdr": combined_gdr(logs),
        "net_devices": _net_devices(logs),
        "peak_busbw_gbps": peak,
        "wrong": sum(wrong_counts) if wrong_counts else None,
        "nodes": job_nodes(ctx),
        "gpus_per_node": local_gpus(ctx),
        "expected": expected,
        "matrix": matrix,
        "ports": _ports(ctx),
        "env": ctx.env.as_dict() if ctx.env is not None else {},
    }
    if topology:
        facts["topology"] = topology
    facts["sources"] = ([{"path": getattr(x, "source", ""), "kind": "nccl_log", "facts": _source_facts(x)}
                         for x in logs]
                        + [{"path": getattr(x, "source", ""), "kind": "nccl_tests",
                            "facts": {**_source_facts(x), "curve": _curve(x)}} for x in tests]
                        + [{"path": getattr(x, "source", ""), "kind": kind, "facts": _source_facts(x)}
                           for kind, group in (("ras_report", ev.ras), ("nccl_diag", ev.diag), ("host_output", ev.host))
                           for x in group])
    return facts


def observed_failures(ev: Any) -> frozenset[tuple[str, int]]:
    """(file, line) of every failure the evidence shows: a WARN or error line an NCCL log parser named
    as a problem, an nccl-tests failure line, a results row with wrong values."""
    from ncdoc.evidence.nccl_log_errors import is_failure_kind
    out: set[tuple[str, int]] = set()
    for log in ev.logs:
        src = getattr(log, "source", "")
        problems = getattr(log, "problems", ()) or ()
        # NCCL 2.6-2.11 log each failed connect attempt at INFO ("..., retrying"): repeated, they are a failure
        book = getattr(log, "evidence", None) or {}
        if book.get("bootstrap_trace"):         # an error returned up through bootstrap.cc, WARN or not
            out.update((src, e.line) for k in ("bootstrap_trace", "socket_trace") for e in book.get(k, ()) if e.line)
        retried = sum(1 for p in problems if p.kind == "socket_connect_error" and p.level == "INFO") >= 2
        for p in problems:
            cite = getattr(p, "evidence", None)
            if cite is None or not getattr(cite, "line", None) or not is_failure_kind(getattr(p, "kind", "")):
                continue
            if getattr(p, "level", "") != "INFO" or (retried and p.kind == "socket_connect_error"):
                out.add((src, cite.line))
    for t in ev.tests:
        src = getattr(t, "source", "")
        out.update((src, f.line) for f in getattr(t, "failures", ()) or () if f.line)
        for r in getattr(t, "rows", ()) or ():
            if r.line and any(g is not None and (g.wrong or 0) > 0 for g in (r.oop, r.ip)) \
                    and getattr(t, "wrong_kind", None) == "count":
                out.add((src, r.line))
        if getattr(t, "out_of_bounds_ok", None) is False:
            out.update((src, e.line) for e in (getattr(t, "evidence", None) or {}).get("out_of_bounds", ()) if e.line)
    return frozenset(out)
