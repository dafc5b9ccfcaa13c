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
    cluster: Any = None                        # ClusterGrid
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
    from ncdoc.report.charts import ChartsUnavailable, effects_chart, history_chart
    from ncdoc.report.curves import from_tune
    from ncdoc.report.page import trusted
    s = data.summary or {}
    charts: list[Chart] = []
    metric = (data.metric_names or ("score",))[0]
    done = [(t.number, t.value, t.state) for t in data.trials if t.state in ("complete", "failed", "pruned")]
    if done:
        table = tuple((str(n), "-" if v is None else f"{v:.3f}", st) for n, v, st in done)
        try:
            svg = trusted(history_chart(done, "tune-history", metric=f"{metric} (1.0 = baseline)"))
            charts.append(Chart("tune-history", "Trials and best so far", svg, "", ("trial", metric, "state"), table,
                                sum(1 for _, v, st in done if st == "complete" and v is not None)))
        except ChartsUnavailable as exc:
            charts.append(Chart("tune-history", "Trials and best so far", None, str(exc), ("trial", metric, "state"),
                                table))
    effects = [e for e in data.effects if e.change_pct is not None]
    if effects:
        rows = tuple((e.name, e.value, _pct(e.change_pct), "-" if e.sd_pct is None else f"± {e.sd_pct:.1f} %",
                      "kept" if e.kept else "dropped") for e in effects)
        try:
            svg = trusted(effects_chart([(f"{e.name}={e.value}", e.change_pct, e.sd_pct, e.kept) for e in effects],
                                        "tune-effects"))
            charts.append(Chart("tune-effects", "Per-variable effect (score change without it)", svg, "",
                                ("variable", "value", "change without it", "spread", "verdict"), rows, len(effects)))
        except ChartsUnavailable as exc:
            charts.append(Chart("tune-effects", "Per-variable effect", None, str(exc),
                                ("variable", "value", "change without it", "spread", "verdict"), rows))
    if data.sizes:
        sets = from_tune(data.sizes, data.expected)
        bw, _ = bandwidth_charts(sets, prefix="tune-busbw")
        charts.extend(bw)
    guard_head: tuple[str, ...] = ()
    guard_rows: tuple[tuple[str, ...], ...] = ()
    if data.guard:
        keys = list(dict.fromkeys(k for r in data.guard for k in r))[:10]
        guard_head = tuple(keys)
        guard_rows = tuple(tuple(_cell(r.get(k)) for k in keys) for r in data.guard)
    gain = s.get("gain") if isinstance(s.get("gain"), dict) else None
    best = s.get("best_trial") if isinstance(s.get("best_trial"), dict) else None
    if gain:
        headline = (f"Recommended env measured {_pct(gain.get('pct'))} against the baseline "
                    f"(lower bound {_pct(gain.get('lower_bound_pct'))}, {gain.get('pairs', '?')} interleaved rounds)")
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
    eff_rows = tuple((e.name, e.value, _pct(e.change_pct), "-" if e.sd_pct is None else f"± {e.sd_pct:.1f} %",
                      e.why or ("kept" if e.kept else "dropped")) for e in data.effects)
    fails = s.get("failures") if isinstance(s.get("failures"), dict) else {}
    return TuneStory(data.folder, data.simulated, headline, data.study_name, url, data.metric_names, dashboard,
                     tuple(charts), recommended, tuple(str(u) for u in s.get("unset") or ()), cands, eff_rows,
                     guard_head, guard_rows, data.guard_note, data.missing,
                     tuple((str(n), str(reason)) for reason, n in fails.items()))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, (list, dict)):
        import json
        return json.dumps(v)[:120]
    return "-" if v is None else str(v)


__all__ = ["Report", "Problem", "FindingView", "RuleDoc", "Chart", "TopologyView", "TuneStory", "finding_view",
           "rule_docs", "counts", "topology_view", "bandwidth_charts", "tune_story", "env_lines"]
