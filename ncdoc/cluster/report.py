"""`ncdoc cluster check`: the cross-node rules over a ClusterFacts, and (with per_node) every
node's own rules, the same finding on many nodes reported once with the nodes it was seen on."""

from __future__ import annotations

from ncdoc.findings import Finding, Report, Skipped


def _node_findings(facts, sel) -> tuple[list[Finding], list[Skipped]]:
    """Each node's single-node findings, merged: one finding per (code, subject, message)."""
    from ncdoc.cluster.nodes import nodes_text
    from ncdoc.engine.rules import Context
    seen: dict[tuple, tuple[Finding, list[str]]] = {}
    skipped: dict[tuple, Skipped] = {}
    for name, snap in facts.nodes.items():
        report = sel.run(Context(snapshot=snap, env=snap.env))
        for f in report.findings:
            key = (f.code, f.subject, f.message)
            if key in seen:
                seen[key][1].append(name)
            else:
                seen[key] = (f, [name])
        for s in report.skipped:
            skipped.setdefault((s.code, s.reason), s)
    out = []
    total = len(facts.nodes)
    for f, nodes in seen.values():
        where = "every node" if len(nodes) == total and total > 1 else nodes_text(nodes)
        out.append(Finding(code=f.code, name=f.name, severity=f.severity, family=f.family,
                           message=f"on {where}: {f.message}", evidence=f.evidence, fix=f.fix, docs=f.docs,
                           env_patch=f.env_patch, subject=f.subject))
    return out, list(skipped.values())


def check_cluster(facts, sel, *, per_node: bool = False) -> Report:
    """The report of `ncdoc cluster check`: cross-node findings first, then (per_node) the nodes' own."""
    from ncdoc.engine.rules import Context
    cross = _only(sel, lambda r: r.pack == "cluster").run(Context(cluster=facts))
    findings, skipped = list(cross.findings), list(cross.skipped)
    if per_node:
        more, more_skipped = _node_findings(facts, _only(sel, lambda r: r.pack != "cluster"))
        findings += more
        skipped += more_skipped
    return Report(tuple(findings), tuple(skipped))


def _only(sel, keep):
    """The selection narrowed to the rules `keep` accepts (its ignores and overrides unchanged)."""
    from copy import copy
    out = copy(sel)
    out.rules = [r for r in sel.rules if keep(r)]
    out.ignored = [(r, why) for r, why in sel.ignored if keep(r)]
    return out


__all__ = ["check_cluster"]
