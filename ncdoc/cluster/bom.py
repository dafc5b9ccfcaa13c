"""The acceptance record: the bill of materials an acceptance test ran on, and what changed since.

    bom = record(facts, results=[...])      # ncdoc cluster bom -o bom.json
    changes = diff(bom, facts)              # ncdoc cluster diff bom.json [CLUSTER_FILE | FOLDER]

The BOM holds the cluster's shape (nodes, GPUs, ranks), every compared attribute (the
reference value of each, and per node only what differs from it, so a thousand identical
nodes cost one column) and the benchmark results measured on it (`ncdoc cluster test`
results, or nccl-tests outputs). `diff` lists every change per node, nodes added and gone,
and says "rerun the acceptance benchmark" when any change can alter what NCCL does.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from dataclasses import dataclass

from ncdoc.cluster.attributes import ABSENT, UNSET, describe, natural
from ncdoc.errors import InputError

SCHEMA_VERSION = 1
KIND = "ncdoc-bom"


def _reference(table) -> dict:
    out = {}
    for key, col in table.values.items():
        counts = Counter(v for v in col.values() if v is not None)
        out[key] = counts.most_common(1)[0][0] if counts else None
    return out


def result_entry(path: str) -> dict:
    """A benchmark result for the record: a `cluster test` JSON, or an nccl-tests output file."""
    from ncdoc.startup.json_load import load_data
    from ncdoc.readers.textfile import read_user_text as read_text
    text = read_text(path, "a benchmark result")
    if text.lstrip().startswith("{"):
        try:
            data = load_data(text)
        except ValueError:
            raise InputError("not valid JSON", path=path) from None
        if isinstance(data, dict) and data.get("kind") == "ncdoc-cluster-test":
            return {"source": path, "kind": "ncdoc-cluster-test", "verdict": data.get("verdict"),
                    "scales": data.get("scales"), "bad_nodes": data.get("bad_nodes"), "bad_rails": data.get("bad_rails"),
                    "measurements": data.get("measurements", [])[:4096]}
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    facts = parse_nccl_tests(text.splitlines(), source=path)
    if not facts.rows:
        raise InputError("neither an ncdoc cluster test result nor nccl-tests output with result rows", path=path)
    return {"source": path, "kind": "nccl-tests", "collective": facts.collective, "nranks": facts.nranks,
            "hosts": list(facts.hosts), "nccl_version": facts.nccl_version, "peak_busbw_gbps": facts.peak_busbw_gbps,
            "peak_size": facts.peak_size, "avg_busbw_gbps": facts.avg_busbw_gbps, "wrong_total": facts.wrong_total}


def record(facts, *, results=(), created: str | None = None) -> dict:
    from ncdoc import __version__
    table = facts.table()
    ref = _reference(table)
    nodes = {}
    for n in facts.nodes:
        nodes[n] = {k: table.values[k][n] for k in table.values if table.values[k][n] != ref[k]}
    gpus = Counter(s.gpus.gpus.__len__() for s in facts.nodes.values() if s.gpus.status.known)
    shape = {"nodes": list(facts.nodes), "node_count": len(facts.nodes),
             "gpus_per_node": gpus.most_common(1)[0][0] if gpus else None,
             "ranks": sum(len(s.gpus.gpus) for s in facts.nodes.values()),
             "gpu_models": sorted({g.name for s in facts.nodes.values() for g in s.gpus.gpus})}
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "ncdoc": __version__,
            "created": created or _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "source": facts.source, "shape": shape,
            "unreachable": [u.to_dict() for u in facts.unreachable],
            "attributes": {k: {"label": a.label, "group": a.group, "affects_nccl": a.affects_nccl}
                           for k, a in table.attrs.items()},
            "reference": ref, "nodes": nodes, "results": list(results)}


def load(path: str) -> dict:
    from ncdoc.readers.textfile import read_user_text as read_text
    from ncdoc.startup.json_load import load_data
    try:
        data = load_data(read_text(path, "a bill of materials"))
    except ValueError as exc:
        raise InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})", path=path) from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise InputError("not an ncdoc bill of materials (ncdoc cluster bom -o FILE writes one)", path=path)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"bill of materials schema_version {data.get('schema_version')!r} is not supported "
                         f"(this ncdoc reads {SCHEMA_VERSION})", path=path)
    return data


@dataclass(frozen=True)
class Change:
    node: str
    attribute: str
    label: str
    before: str | None
    after: str | None
    affects_nccl: bool

    def to_dict(self) -> dict:
        return {"node": self.node, "attribute": self.attribute, "label": self.label, "before": self.before,
                "after": self.after, "affects_nccl": self.affects_nccl}


@dataclass(frozen=True)
class Diff:
    changes: tuple[Change, ...]
    added: tuple[str, ...]          # nodes not in the record
    removed: tuple[str, ...]        # nodes of the record not seen now
    rerun: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"rerun": self.rerun, "reasons": list(self.reasons), "added_nodes": list(self.added),
                "removed_nodes": list(self.removed), "changes": [c.to_dict() for c in self.changes]}


def _value(bom: dict, node: str, key: str):
    deltas = bom["nodes"].get(node, {})
    return deltas[key] if key in deltas else bom["reference"].get(key)


def _missing(key: str) -> str:
    """The value of an attribute no node has (a variable nobody sets, a port gone everywhere)."""
    return UNSET if key.startswith("env.") else ABSENT


def diff(bom: dict, facts) -> Diff:
    table = facts.table()
    before_nodes = list(bom["nodes"])
    now_nodes = list(facts.nodes)
    added = tuple(sorted(set(now_nodes) - set(before_nodes), key=natural))
    removed = tuple(sorted(set(before_nodes) - set(now_nodes), key=natural))
    attrs = dict(bom.get("attributes") or {})
    keys = sorted(set(attrs) | set(table.values), key=natural)
    changes = []
    for n in sorted(set(now_nodes) & set(before_nodes), key=natural):
        for k in keys:
            old = _value(bom, n, k) if k in attrs else _missing(k)
            new = table.values[k].get(n) if k in table.values else _missing(k)
            if old == new or new is None:          # unknown now: not a change ncdoc can claim
                continue
            meta = attrs.get(k) or {}
            a = table.attrs.get(k) or describe(k)
            changes.append(Change(n, k, meta.get("label") or a.label, old, new,
                                  bool(meta.get("affects_nccl", a.affects_nccl))))
    reasons = []
    nccl = [c for c in changes if c.affects_nccl]
    if nccl:
        by_attr = Counter(c.label for c in nccl)
        top = ", ".join(f"{label} on {n} node{'s' if n != 1 else ''}" for label, n in by_attr.most_common(4))
        reasons.append(f"{len(nccl)} change(s) that affect NCCL: {top}" + (" ..." if len(by_attr) > 4 else ""))
    if added:
        reasons.append(f"{len(added)} node(s) not in the record: {', '.join(added[:6])}")
    if removed:
        reasons.append(f"{len(removed)} node(s) of the record missing: {', '.join(removed[:6])}")
    return Diff(tuple(changes), added, removed, bool(reasons), tuple(reasons))


def render_diff(d: Diff, bom: dict, fmt: str) -> str:
    import json
    if fmt == "json":
        return json.dumps({"schema_version": 1, "bom": bom.get("source"), "bom_created": bom.get("created"),
                           **d.to_dict()}, indent=2) + "\n"
    lines = [f"ncdoc cluster diff: against the record of {bom.get('created', '?')} "
             f"({bom.get('shape', {}).get('node_count', '?')} nodes)", ""]
    if d.changes:
        width = max(len(c.node) for c in d.changes)
        for c in d.changes:
            mark = "*" if c.affects_nccl else " "
            lines.append(f" {mark} {c.node:<{width}}  {c.label}: {c.before if c.before is not None else '-'} -> "
                         f"{c.after if c.after is not None else '-'}")
        lines.append("")
        lines.append("   (* = can change what NCCL does)")
    for label, nodes in (("added", d.added), ("missing", d.removed)):
        if nodes:
            lines.append(f"nodes {label}: {', '.join(nodes)}")
    lines.append("")
    if d.rerun:
        lines.append("rerun the acceptance benchmark: " + "; ".join(d.reasons))
    elif d.changes:
        lines.append("nothing that affects NCCL changed: the acceptance result still stands")
    else:
        lines.append("no change since the record: the acceptance result still stands")
    return "\n".join(lines) + "\n"


__all__ = ["record", "load", "diff", "render_diff", "result_entry", "Change", "Diff", "KIND"]
