"""What the report page shows, as plain data: built from the results of the use cases (triage,
doctor's rule run, a tune folder, a cluster grid) and handed to the template.

Nothing here escapes or formats markup: the template does (auto-escaping). The only markup in
the model is SVG this package drew (topology_render, charts), wrapped with page.trusted().
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ncdoc.report.curves import CurveSet


@dataclass(frozen=True)
class Problem:
    where: str                       # the input or the section
    message: str


@dataclass(frozen=True)
class FindingView:
    code: str
    name: str
    severity: str
    stage: str
    stage_title: str
    message: str
    evidence: tuple[tuple[str, str], ...]     # (file:line or source, text)
    fix: str
    env_lines: tuple[str, ...]                # "export NAME=value" / "unset NAME"
    observed: bool = False                    # backed by an observed failure (a WARN line, a failed test)


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    severity: str
    summary: str
    why: str
    fix: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class Chart:
    id: str                                   # safe, made here ("busbw-0")
    title: str
    svg: Any                                  # trusted SVG markup, or None when it could not be drawn
    note: str = ""                            # why there is no picture
    table_head: tuple[str, ...] = ()
    table: tuple[tuple[str, ...], ...] = ()
    points: int = 0                           # markers drawn (what the browser test counts)
    series_points: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopologyView:
    svg: Any = None
    source: str = ""
    gpus: tuple[str, ...] = ()
    nics: tuple[str, ...] = ()
    nic_names: dict[str, str] = field(default_factory=dict)
    pairs: dict[str, dict[str, str]] = field(default_factory=dict)
    rails: tuple[tuple[str, str, str], ...] = ()   # (GPU, NIC, path)
    marks: tuple[tuple[str, str, str], ...] = ()   # (device, problem, state: bad | excluded)
    notes: tuple[str, ...] = ()
    problem: str = ""


@dataclass(frozen=True)
class TuneStory:
    folder: str
    simulated: bool | None
    headline: str
    study_name: str | None
    storage_url: str | None
    metric_names: tuple[str, ...] | None
    dashboard: str
    charts: tuple[Chart, ...]
    recommended: tuple[tuple[str, str], ...]
    unset: tuple[str, ...]
    candidates: tuple[tuple[str, str, str], ...]   # (accepted|rejected, changes, why)
    effects: tuple[tuple[str, str, str, str, str], ...]   # (name, value, change, spread, kept/dropped + why)
    guard_head: tuple[str, ...]
    guard_rows: tuple[tuple[str, ...], ...]
    guard_note: str
    missing: tuple[str, ...]
    failures: tuple[tuple[str, str], ...]
    guard_chart: Chart | None = None
    noise_pct: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    title: str
    kind: str                                 # node | triage | tune | cluster, or a mix ("triage + tune")
    version: str
    verdict: FindingView | None = None
    verdict_known: bool = False               # False: no rules ran (a tune or cluster report alone)
    findings: tuple[FindingView, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    skipped: tuple[tuple[str, str, str], ...] = ()
    inputs: tuple[tuple[str, str, str], ...] = ()      # (path, kind, notes)
    facts: tuple[tuple[str, str], ...] = ()
    topology: TopologyView | None = None
    bandwidth: tuple[Chart, ...] = ()
    bandwidth_note: str = ""
    tune: TuneStory | None = None
    cluster: Any = None                        # ClusterGrid (cluster_grid.py)
    cluster_findings: tuple[FindingView, ...] = ()   # cross-node findings beside a triage's (mixed reports)
    cluster_tests: Any = None                  # ClusterTests: `ncdoc cluster test` results
    conclusion: dict[str, Any] = field(default_factory=dict)   # triage's: state problem | inconclusive | no_problem
    problems: tuple[Problem, ...] = ()
    rules: tuple[RuleDoc, ...] = ()
    simulated: bool = False
    json_findings: int = 0                     # what `--json` of the same run reports (tests compare)


# ---------------------------------------------------------------- findings

def env_lines(patch: Mapping[str, str | None]) -> tuple[str, ...]:
    import shlex
    return tuple(f"export {k}={shlex.quote(v)}" if v is not None else f"unset {k}" for k, v in patch.items())


def finding_view(f: Any, stage: str, observed: bool = False) -> FindingView:
    from ncdoc.engine.rules import STAGE_TITLES
    return FindingView(f.code, f.name, f.severity, stage, STAGE_TITLES.get(stage, stage or "other"), f.message,
                       tuple((e.where(), e.text) for e in f.evidence), (f.fix or "").strip(),
                       env_lines(f.env_patch), observed)


def finding_view_from_dict(d: Mapping[str, Any], stages: Mapping[str, str] | None = None) -> FindingView:
    """A finding as `--json` writes it (ncdoc.findings.Finding.to_dict, plus "stage" where given)."""
    from ncdoc.engine.rules import STAGE_TITLES
    code = str(d.get("code", ""))
    stage = str(d.get("stage") or (stages or {}).get(code, ""))
    ev = []
    for e in d.get("evidence") or ():
        if isinstance(e, dict):
            src, line = str(e.get("source") or ""), e.get("line")
            ev.append((f"{src}:{line}" if src and isinstance(line, int) and line else src, str(e.get("text", ""))))
    patch = d.get("env_patch") if isinstance(d.get("env_patch"), dict) else {}
    sev = str(d.get("severity", "info"))
    return FindingView(code, str(d.get("name", "")), sev if sev in ("error", "warning", "info") else "info", stage,
                       STAGE_TITLES.get(stage, stage or "other"), str(d.get("message", "")), tuple(ev),
                       str(d.get("fix") or "").strip(),
                       env_lines({str(k): None if v is None else str(v) for k, v in patch.items()}))


def rule_docs(codes: Sequence[str]) -> tuple[RuleDoc, ...]:
    """The documentation of each rule that fired, for the page's appendix (what `ncdoc rule CODE` prints)."""
    try:
        from ncdoc.engine.ruleset import load
        rs = load()
    except Exception:       # the findings stand without their docs
        return ()
    out = []
    for code in dict.fromkeys(codes):
        r = rs.find(code)
        if r is not None:
            out.append(RuleDoc(r.code, r.name, r.severity, r.summary, r.why.strip(), r.fix.strip(),
                               tuple(r.references)))
    return tuple(out)


def counts(findings: Sequence[FindingView]) -> dict[str, int]:
    out = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        out[f.severity] = out.get(f.severity, 0) + 1
    return out


# ---------------------------------------------------------------- topology

def topology_view(snapshot: Any, *, ib_hca: str | None = None, nccl_version: str | None = None,
                  title: str = "") -> TopologyView:
    from ncdoc.report.page import trusted
    from ncdoc.report.topology_graph import build_graph
    from ncdoc.report.topology_render import svg
    from ncdoc.topology import classify
    topo = classify(snapshot)
    graph = build_graph(snapshot, topo, ib_hca=ib_hca, nccl_version=nccl_version)
    if not graph.nodes:
        return TopologyView(source=topo.source, problem=graph.status or "no topology known", notes=graph.notes)
    rails = tuple((graph.node(e.a).label, graph.node(e.b).label, e.label) for e in graph.edges if e.kind == "rail")
    marks = tuple((n.label if not n.name or n.name == n.label else f"{n.label} ({n.name})", p,
                   "excluded" if p.startswith("left out") else "bad") for n in graph.nodes for p in n.problems)
    return TopologyView(trusted(svg(graph, title=title)), topo.status.source or topo.source, graph.gpu_labels,
                        graph.nic_labels, graph.nic_names, graph.pairs, rails, marks, graph.notes)


# ---------------------------------------------------------------- charts

def _size(n: int) -> str:
    from ncdoc.report.sparkline import size_text
    return size_text(n)


def bandwidth_charts(sets: Sequence[CurveSet], prefix: str = "busbw") -> tuple[tuple[Chart, ...], str]:
    """One chart per collective, with its data table; (charts, note when charts cannot be drawn)."""
    from ncdoc.report.charts import ChartsUnavailable, busbw_chart
    from ncdoc.report.page import trusted
    out = []
    note = ""
    for i, cs in enumerate(sets):
        cid = f"{prefix}-{i}"
        sizes = sorted({s for ser in cs.series for s, _ in ser.points})
        by = [dict(ser.points) for ser in cs.series]
        table = tuple((_size(s),) + tuple("" if s not in b else f"{b[s]:.2f}" for b in by) for s in sizes)
        head = ("size",) + tuple(f"{ser.label} busbw (GB/s)" for ser in cs.series)
        title = f"{cs.collective}: bus bandwidth by message size"
        try:
            svg = trusted(busbw_chart(cs, cid))
        except ChartsUnavailable as exc:
            svg, note = None, str(exc)
        pts = tuple(len(ser.points) for ser in cs.series)
        out.append(Chart(cid, title, svg, note if svg is None else "", head, table, sum(pts), pts))
    return tuple(out), note


def _pct(x: Any) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x:+.1f} %"


def tune_story(data: Any) -> TuneStory:
    """The tuning section from a TuneData (ncdoc.report.tune_input)."""
    from ncdoc.report.charts import ChartsUnavailable, effects_chart, guard_chart, history_chart
    from ncdoc.report.curves import from_tune
    from ncdoc.report.page import trusted
    s = data.summary or {}
    charts: list[Chart] = []
    metric = (data.metric_names or ("score",))[0]
    noise = s.get("noise_pct") if isinstance(s.get("noise_pct"), (int, float)) else None
    shown = [t for t in data.trials if t.state in ("complete", "failed", "stopped early")]
    if shown:
        table = tuple((str(t.number), t.stage or "-", "-" if t.value is None else f"{t.value:.3f}", t.state,
                       ", ".join(f"{k}={v}" for k, v in sorted(t.params.items()) if v != "unset")[:160] or "-")
                      for t in shown)
        head = ("trial", "stage", metric, "state", "changes tried")
        title = "Trials and best so far"
        try:
            svg = trusted(history_chart([(t.number, t.value, t.state, t.stage) for t in shown], "tune-history",
                                        metric=f"{metric} (1.0 = baseline)"))
            charts.append(Chart("tune-history", title, svg, "", head, table,
                                sum(1 for t in shown if t.state == "complete" and t.value is not None)))
        except ChartsUnavailable as exc:
            charts.append(Chart("tune-history", title, None, str(exc), head, table))
    effects = [e for e in data.effects if e.change_pct is not None]
    if effects:
        rows = tuple((e.name, e.value, _pct(e.change_pct), _spread(e), "kept" if e.kept else "dropped")
                     for e in effects)
        head = ("variable", "value", "change without it", "spread", "verdict")
        title = "Per-variable effect: the score without each variable of the recommended env"
        conf = next((e.confidence for e in effects if e.confidence), "")
        try:
            svg = trusted(effects_chart([(f"{e.name}={e.value}", e.change_pct, e.sd_pct, e.kept, e.bound_pct)
                                         for e in effects], "tune-effects", noise_pct=noise, confidence=conf))
            charts.append(Chart("tune-effects", title, svg, "", head, rows, len(effects)))
        except ChartsUnavailable as exc:
            charts.append(Chart("tune-effects", title, None, str(exc), head, rows))
    if data.sizes:
        sets = from_tune(data.sizes, data.expected)
        bw, _ = bandwidth_charts(sets, prefix="tune-busbw")
        charts.extend(bw)
    guard_head: tuple[str, ...] = ()
    guard_rows: tuple[tuple[str, ...], ...] = ()
    guard_chart_view = None
    if data.guard and all(isinstance(r.get("size"), int) and "collective" in r for r in data.guard):
        rows_g = [(str(r["collective"]), int(r["size"]), r.get("change_pct") if isinstance(r.get("change_pct"),
                   (int, float)) else None, bool(r.get("regression"))) for r in data.guard]
        guard_head = ("collective", "size", "baseline busbw (GB/s)", "tuned busbw (GB/s)", "change", "verdict")
        guard_rows = tuple((str(r["collective"]), _size(int(r["size"])), _cell(r.get("baseline")),
                            _cell(r.get("tuned")), _pct(r.get("change_pct")),
                            "slower beyond noise" if r.get("regression") else
                            ("not measurable" if r.get("change_pct") is None else "ok")) for r in data.guard)
        title = "Guard sweep: the recommended env against the baseline at every size of every collective"
        try:
            svg = trusted(guard_chart(rows_g, "tune-guard", noise_pct=noise))
            guard_chart_view = Chart("tune-guard", title, svg, "", guard_head, guard_rows,
                                     sum(1 for r in rows_g if r[2] is not None))
        except ChartsUnavailable as exc:
            guard_chart_view = Chart("tune-guard", title, None, str(exc), guard_head, guard_rows)
    elif data.guard:
        keys = list(dict.fromkeys(k for r in data.guard for k in r))[:10]
        guard_head = tuple(keys)
        guard_rows = tuple(tuple(_cell(r.get(k)) for k in keys) for r in data.guard)
    gain = s.get("gain") if isinstance(s.get("gain"), dict) else None
    best = s.get("best_trial") if isinstance(s.get("best_trial"), dict) else None
    if gain:
        rounds = gain.get("rounds", gain.get("pairs", "?"))
        headline = (f"Recommended env measured {_pct(gain.get('pct'))} against the baseline "
                    f"(lower confidence bound {_pct(gain.get('lower_bound_pct'))}, {rounds} rounds in shuffled order)")
    elif "gain" in s:
        headline = "No change beat the measured noise: keep the current environment"
    else:
        headline = "Tune results"
    if best and isinstance(best.get("score"), (int, float)):
        headline += f"; best trial #{best.get('number')} scored x{best['score']:.3f}"
    url = data.storage_url
    dashboard = ""
    if url:
        dashboard = f"optuna-dashboard {url}"
    rec = s.get("recommended_env") if isinstance(s.get("recommended_env"), dict) else {}
    base = s.get("baseline_env") if isinstance(s.get("baseline_env"), dict) else {}
    recommended = tuple((str(k), str(v) + ("" if base.get(k) == v else "    # tuned")) for k, v in rec.items())
    cands = tuple(("accepted" if c.get("recommended") else "rejected",
                   ", ".join(f"{k}={v}" for k, v in (c.get("changes") or {}).items()) or "(NCCL defaults)",
                   str(c.get("why", ""))) for c in data.candidates)
    eff_rows = tuple((e.name, e.value, _pct(e.change_pct), _spread(e), e.why or ("kept" if e.kept else "dropped"))
                     for e in data.effects)
    fails = s.get("failures") if isinstance(s.get("failures"), dict) else {}
    return TuneStory(data.folder, data.simulated, headline, data.study_name, url, data.metric_names, dashboard,
                     tuple(charts), recommended, tuple(str(u) for u in s.get("unset") or ()), cands, eff_rows,
                     guard_head, guard_rows, data.guard_note, data.missing,
                     tuple((str(n), str(reason)) for reason, n in fails.items()), guard_chart_view, noise,
                     tuple(str(x) for x in s.get("notes") or () if isinstance(x, str))[:20])


def _spread(e: Any) -> str:
    """An effect's spread: ± its standard deviation where known, else the confidence bound on the drop."""
    if e.sd_pct is not None:
        return f"± {e.sd_pct:.1f} %"
    if e.bound_pct is not None:
        return f"at least {-e.bound_pct:.1f} % ({e.confidence})" if e.bound_pct < 0 else f"{e.bound_pct:+.1f} %"
    return "within noise" if not e.kept else "-"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, (list, dict)):
        import json
        return json.dumps(v)[:120]
    return "-" if v is None else str(v)


__all__ = ["Report", "Problem", "FindingView", "RuleDoc", "Chart", "TopologyView", "TuneStory", "finding_view",
           "rule_docs", "counts", "finding_view_from_dict", "topology_view", "bandwidth_charts", "tune_story", "env_lines"]
