"""The report use case: read what the user gave (the inputs triage takes, a tune folder, a cluster
grid), run the same use cases the text commands run, and put everything on one page.

An input that cannot be read does not stop the page: triage runs again without it and the failure
is shown in place (the Inputs section, and the section that input would have fed). Only bad usage
(an unknown example, conflicting options, nothing to report on) is an error, exit 2.
"""

from __future__ import annotations

from typing import Any, Sequence

from ncdoc.report.model import Problem, Report

NODE_KINDS = ("snapshot_json", "nccl_topo_xml", "hwloc_xml", "topo_matrix", "ibv_devinfo")


def _version() -> str:
    from ncdoc import __version__
    return __version__


def _why(exc: Any) -> str:
    return exc.message + (f" ({exc.cause})" if getattr(exc, "cause", None) else "")


def run_triage(paths: Sequence[str], problems: list[Problem], **kw) -> Any:
    """triage(...) over the inputs, dropping (and noting) each one that cannot be read."""
    from ncdoc.errors import InputError
    from ncdoc.triage.run import triage
    remaining = [str(p) for p in paths]
    snapshot = kw.pop("snapshot", None)
    while remaining or snapshot or kw.get("example"):
        try:
            return triage(remaining, snapshot=snapshot, **kw)
        except InputError as exc:
            bad = exc.path if exc.path in remaining or exc.path == snapshot else None
            problems.append(Problem(exc.path or "inputs", _why(exc)))
            if bad is None:
                return None
            if bad == snapshot:
                snapshot = None
            else:
                remaining.remove(bad)
    return None


def node_snapshot(result: Any, *, snapshot: str | None, example: str | None, problems: list[Problem]) -> Any:
    """The node as `ncdoc topo` reads it from the same inputs: the snapshot or example, merged with
    every node-evidence file triage recognised (topo -m, ibv_devinfo, topology XML)."""
    from ncdoc.errors import NcdocError
    from ncdoc.usecases.node_context import load_node
    snap = None
    try:
        snap = load_node(snapshot=snapshot, example=example, live=False)
    except NcdocError as exc:
        problems.append(Problem("topology", str(exc)))
    if result is None:
        return snap
    from ncdoc.importers import import_evidence_detail, merge
    for i in result.inputs:
        if i.kind in NODE_KINDS and i.path and not i.path.startswith("example:") and i.path != snapshot:
            try:
                imp = import_evidence_detail(i.path)
            except NcdocError as exc:
                problems.append(Problem(i.path, f"not drawn in the topology: {_why(exc)}"))
                continue
            snap = imp.snapshot if snap is None else merge(snap, imp.snapshot)
    return snap


def _facts(facts: dict) -> tuple[tuple[str, str], ...]:
    out = []
    for key, label in (("nccl_version", "NCCL"), ("transport", "transport"), ("gdr", "GPUDirect RDMA"),
                       ("nodes", "nodes"), ("gpus_per_node", "GPUs per node")):
        v = facts.get(key)
        if v not in (None, "", "unknown"):
            out.append((label, str(v)))
    if facts.get("net_devices"):
        out.append(("NICs in use", " ".join(map(str, facts["net_devices"][:16]))))
    exp = facts.get("expected") or {}
    peak = facts.get("peak_busbw_gbps")
    if peak is not None:
        s = f"{peak:.1f} GB/s"
        if exp.get("expected_busbw_gbps"):
            s += f" of ~{exp['expected_busbw_gbps']:.0f} GB/s expected"
            if exp.get("achieved_pct") is not None:
                s += f" ({exp['achieved_pct']:.0f} %)"
        out.append(("peak busbw", s))
    for b in (exp.get("basis") or ())[:3]:
        out.append(("expected from", str(b)))
    return tuple(out)


def from_triage(result: Any) -> dict[str, Any]:
    """The findings part of the page from a TriageResult."""
    from ncdoc.report.model import counts, finding_view, rule_docs
    obs = getattr(result, "observed", frozenset())
    views = tuple(finding_view(f, result.stage_of(f), f"{f.code}:{f.subject}" in obs) for f in result.report.findings)
    verdict = finding_view(result.verdict, result.stage_of(result.verdict)) if result.verdict else None
    inputs = tuple((i.path, i.kind.replace("_", " ") + (f" (read as {', '.join(i.read_as)})"
                                                       if i.read_as and tuple(i.read_as) != (i.kind,) else ""),
                    "; ".join(i.notes)) for i in result.inputs)
    return {"verdict": verdict, "verdict_known": True, "findings": views, "counts": counts(views),
            "skipped": tuple((s.code, s.name, s.reason) for s in result.report.skipped),
            "inputs": inputs, "facts": _facts(result.facts), "rules": rule_docs([f.code for f in views]),
            "json_findings": len(result.report.findings), "conclusion": dict(getattr(result, "conclusion", None) or {})}


def from_rules(report: Any, stage_by_code: dict[str, str], facts: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The findings part from a rule run without evidence (doctor): the verdict is the first error, else warning."""
    from ncdoc.report.model import counts, finding_view, rule_docs
    views = tuple(finding_view(f, stage_by_code.get(f.code, "")) for f in report.findings)
    verdict = next((v for sev in ("error", "warning") for v in views if v.severity == sev), None)
    return {"verdict": verdict, "verdict_known": True, "findings": views, "counts": counts(views),
            "skipped": tuple((s.code, s.name, s.reason) for s in report.skipped), "facts": tuple(facts),
            "rules": rule_docs([f.code for f in views]), "json_findings": len(report.findings)}


def triage_parts(result: Any, problems: list[Problem], *, snapshot: str | None = None,
                 example: str | None = None) -> dict[str, Any]:
    """Findings, topology and busbw curves from a TriageResult (None when triage could not run)."""
    from ncdoc.report.curves import from_triage_facts
    from ncdoc.report.model import bandwidth_charts
    parts: dict[str, Any] = {}
    if result is not None:
        parts.update(from_triage(result))
    else:
        parts["inputs"] = tuple((p.where, "could not be read", p.message) for p in problems)
    snap = node_snapshot(result, snapshot=snapshot, example=example, problems=problems)
    if snap is not None:
        fenv = (result.facts.get("env") or {}) if result is not None else snap.env.as_dict()
        version = (result.facts.get("nccl_version") if result is not None else None) or snap.versions.nccl
        _topology(parts, snap, problems, ib_hca=fenv.get("NCCL_IB_HCA"), nccl_version=version)
    if result is not None:
        sets = from_triage_facts(result.facts)
        if sets:
            parts["bandwidth"], parts["bandwidth_note"] = bandwidth_charts(sets)
    return parts


def _topology(parts: dict[str, Any], snap: Any, problems: list[Problem], **kw) -> None:
    from ncdoc.report.model import topology_view
    try:
        parts["topology"] = topology_view(snap, title=snap.host.hostname or "", **kw)
    except Exception as exc:     # a drawing bug must not lose the findings
        problems.append(Problem("topology", f"could not be drawn ({type(exc).__name__}: {exc})"))


def cluster_parts(cluster: Sequence[str], problems: list[Problem]) -> tuple[Any, dict[str, Any]]:
    """(ClusterGrid, the findings part) from `--cluster` inputs: a cluster file, folders of per-node
    snapshots, snapshot files, or `ncdoc cluster check --json` output."""
    from ncdoc.report.cluster_grid import load_cluster
    from ncdoc.report.model import counts, finding_view_from_dict, rule_docs
    got = load_cluster(cluster)
    for where, what in got.problems:
        problems.append(Problem(where, what))
    if got.grid.problem:
        problems.append(Problem(", ".join(map(str, cluster)), got.grid.problem))
    if got.report is not None:
        return got.grid, from_rules(got.report, got.stages)
    if got.grid.problem:
        return got.grid, {}
    views = tuple(finding_view_from_dict(f) for f in got.findings_json)
    verdict = next((v for sev in ("error", "warning") for v in views if v.severity == sev), None)
    return got.grid, {"verdict": verdict, "verdict_known": True, "findings": views, "counts": counts(views),
                      "rules": rule_docs([f.code for f in views]), "json_findings": len(views)}


def build_report(paths: Sequence[str] = (), *, snapshot: str | None = None, example: str | None = None,
                 env: Sequence[str] = (), nic_gbps: float | None = None, nics: int | None = None,
                 nodes: int | None = None, tune_dir: str | None = None, cluster: Sequence[str] = (),
                 cluster_tests: str | None = None, title: str | None = None) -> Report:
    from ncdoc.errors import UsageError
    if isinstance(cluster, str):
        cluster = [cluster]
    if not (paths or snapshot or example or tune_dir or cluster or cluster_tests):
        raise UsageError("nothing to report on: give evidence files, --snapshot, --example, --tune DIR, "
                         "--cluster INPUT or --cluster-test FILE")
    if snapshot and example:
        raise UsageError("give --snapshot or --example, not both")
    problems: list[Problem] = []
    parts: dict[str, Any] = {}
    kinds = []
    result = None
    if paths or snapshot or example:
        result = run_triage(paths, problems, snapshot=snapshot, example=example, env=env, nic_gbps=nic_gbps,
                            nics=nics, nodes=nodes)
        kinds.append("triage" if paths else "node")
        parts = triage_parts(result, problems, snapshot=snapshot, example=example)
    tune = None
    if tune_dir:
        from ncdoc.report.model import tune_story
        from ncdoc.report.tune_input import read_tune_dir
        tune = tune_story(read_tune_dir(tune_dir))
        kinds.append("tune")
    grid = tests = None
    if cluster:
        grid, found = cluster_parts(cluster, problems)
        if parts:                      # beside a triage: the cross-node findings stay in the cluster section
            parts["cluster_findings"] = found.get("findings", ())
            parts["rules"] = parts.get("rules", ()) + tuple(
                r for r in found.get("rules", ()) if r.code not in {x.code for x in parts.get("rules", ())})
        else:
            parts = found
    if cluster_tests:
        from ncdoc.report.cluster_grid import load_tests
        tests = load_tests(cluster_tests)
        if tests.problem:
            problems.append(Problem(cluster_tests, tests.problem))
    if cluster or cluster_tests:
        kinds.append("cluster")
    kind = " + ".join(kinds)
    host = ""
    if result is not None:
        host = next((i.path.split(":", 1)[1] for i in result.inputs if i.path.startswith("example:")), "")
    where = ", ".join(map(str, cluster)) or str(cluster_tests)
    default_title = {"tune": f"ncdoc tune: {tune_dir}", "cluster": f"ncdoc cluster: {where}"}.get(
        kind, "ncdoc report" + (f": {host}" if host else ""))
    return Report(title or default_title, kind, _version(), tune=tune, cluster=grid, cluster_tests=tests,
                  problems=tuple(problems), simulated=bool(tune and tune.simulated), **parts)


def cluster_page(facts: Any, report: Any, stage_by_code: dict[str, str], *, title: str) -> str:
    """`ncdoc cluster check --format html`: the cross-node findings and the drift grid."""
    from ncdoc.report.cluster_grid import grid_from_facts, problem_parts
    problems = [Problem(*problem_parts(p)) for p in facts.problems]
    return render(Report(title, "cluster", _version(), cluster=grid_from_facts(facts), problems=tuple(problems),
                         **from_rules(report, stage_by_code)))


def tune_page(out_dir: str) -> str:
    """`ncdoc tune --format html`: the tuning story of the folder the tune just wrote."""
    return render(build_report(tune_dir=out_dir))


def triage_page(result: Any, *, snapshot: str | None = None, example: str | None = None,
                title: str = "ncdoc triage") -> str:
    """`ncdoc triage --format html`: the page of a triage that already ran."""
    problems: list[Problem] = []
    parts = triage_parts(result, problems, snapshot=snapshot, example=example)
    return render(Report(title, "triage", _version(), problems=tuple(problems), **parts))


def node_page(snapshot: Any, report: Any, stage_by_code: dict[str, str], *, title: str,
              facts: Sequence[tuple[str, str]] = ()) -> str:
    """`ncdoc doctor --format html`: one node's rule run and its topology."""
    problems: list[Problem] = []
    parts = from_rules(report, stage_by_code, facts)
    _topology(parts, snapshot, problems, ib_hca=snapshot.env.get("NCCL_IB_HCA"), nccl_version=snapshot.versions.nccl)
    return render(Report(title, "node", _version(), problems=tuple(problems), **parts))


def render(report: Report) -> str:
    from ncdoc.report.page import render_template
    return render_template("report.html.j2", r=report)


__all__ = ["build_report", "render", "cluster_parts", "cluster_page", "tune_page", "from_triage", "from_rules", "run_triage", "node_snapshot", "triage_parts",
           "triage_page", "node_page"]
