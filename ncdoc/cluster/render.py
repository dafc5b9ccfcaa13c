"""The drift matrix and the cluster report in text, JSON and markdown.

Text and markdown show the nodes that differ somewhere (rows) against the attributes on which
some node differs (columns), the reference value in the first row and "." where a node has
it; wide matrices are cut into column blocks. JSON carries the full structure: every drifting
attribute with its reference, the value groups and the odd nodes, and the node x attribute
values of those attributes for every node. The findings follow, as in every ncdoc report.
"""

from __future__ import annotations

from ncdoc.cluster.attributes import natural

COLUMNS_PER_BLOCK = 6
SAME = "."


def summary(facts) -> dict:
    out = {"nodes": len(facts.nodes) + len(facts.unreachable), "answered": len(facts.nodes),
           "unreachable": len(facts.unreachable),
           "source": facts.source,
           "reference": f"golden node {facts.golden_name}" if facts.golden is not None else "the majority of nodes"}
    if facts.unreachable:
        out["missing"] = ", ".join(f"{u.node} ({u.reason})" for u in facts.unreachable[:8]) + (
            f" and {len(facts.unreachable) - 8} more" if len(facts.unreachable) > 8 else "")
    if facts.problems:
        out["input problems"] = len(facts.problems)
    return out


def matrix_blocks(facts, drifts) -> list[list[dict]]:
    """Tables (lists of row dicts) of odd nodes x drifting attributes, COLUMNS_PER_BLOCK attributes each."""
    shown = [d for d in drifts]
    if not shown:
        return []
    odd = sorted({n for d in shown for n in (d.odd if d.reference is not None else
                                             [n for _, ns in d.groups[1:] for n in ns])}, key=natural)
    blocks = []
    for i in range(0, len(shown), COLUMNS_PER_BLOCK):
        part = shown[i:i + COLUMNS_PER_BLOCK]
        rows = [{"node": "(reference)", **{d.attr.label: d.reference if d.reference is not None else "(no majority)"
                                           for d in part}}]
        for n in odd:
            row = {"node": n}
            for d in part:
                v = d.value_of(n)
                row[d.attr.label] = "?" if v is None else (SAME if v == d.reference else v)
            if any(v != SAME for k, v in row.items() if k != "node"):
                rows.append(row)
        blocks.append(rows)
    return blocks


def matrix_json(facts, drifts) -> dict:
    table = facts.table()
    keys = [d.key for d in drifts]
    return {"attributes": keys,
            "rows": {n: {k: table.values[k].get(n) for k in keys} for n in facts.nodes}}


def render_check(facts, report, fmt: str, *, color="auto") -> str:
    from ncdoc.output import render
    drifts = facts.drift()
    title = f"ncdoc cluster check: {len(facts.nodes)} nodes" + (
        f" ({len(facts.unreachable)} more did not answer)" if facts.unreachable else "")
    if fmt == "json":
        sections = {"cluster": {**summary(facts), "complete": facts.complete,
                                "unreachable_nodes": [u.to_dict() for u in facts.unreachable],
                                "problems": list(facts.problems), "golden": facts.golden_name or None},
                    "drift": [d.to_dict() for d in drifts],
                    "matrix": matrix_json(facts, drifts)}
        return render(report, "json", title=title, facts=sections)
    sections = [("Cluster", summary(facts))]
    blocks = matrix_blocks(facts, drifts)
    if blocks:
        for i, rows in enumerate(blocks):
            head = "Drift matrix (nodes that differ x attributes that differ; '.' = as the reference)"
            sections.append((head if i == 0 else f"Drift matrix, continued ({i + 1}/{len(blocks)})", rows))
    else:
        sections.append(("Drift matrix", "every node agrees on every attribute compared"))
    if facts.problems:
        sections.append(("Not read", list(facts.problems)))
    return render(report, fmt, title=title, facts=sections, color=color)


def render_test(report, drains, ran, n, scales) -> str:
    """The text report of `ncdoc cluster test`: each bad node or rail with its measurements, the drain lines."""
    lines = [f"ncdoc cluster test: {n} nodes, scales {', '.join(scales)}, {report.rounds} round(s)", ""]
    if report.healthy:
        lines.append("No bad node or rail found.")
    for f in report.findings:
        what = {"bad-node": "BAD NODE", "slow-node": "SLOW NODE (alone)", "bad-rail": "BAD RAIL",
                "intermittent": "INTERMITTENT", "slow-path": "SLOW PATH"}.get(f.kind, f.kind)
        lines.append(f"{what} {f.subject}")
        lines += [f"    {e}" for e in f.evidence[:6]]
    for note in report.notes:
        lines.append(f"note: {note}")
    if drains["slurm"]:
        lines += ["", "To take them out of service (printed, not run; --drain runs the scontrol lines):"]
        lines += [f"  {x}" for x in drains["slurm"] + drains["kubernetes"]]
    if ran:
        lines += ["", *ran]
    return "\n".join(lines) + "\n"


__all__ = ["render_check", "render_test", "matrix_blocks", "matrix_json", "summary"]
