"""The cluster grid: nodes x the attributes on which some node differs, the odd cells marked.

Read from what `ncdoc cluster check` reads (a cluster file, a folder of per-node snapshots,
snapshot files: ncdoc.cluster.facts) or from what it writes (`ncdoc cluster check --json`), so the
page shows the same drift as the text report. Only the attributes that drift are columns; the
count of all compared is said above the grid.

Readable at any size: nodes with the same value in every drifting column are one row, named by
their Slurm hostlist and counted (64 nodes with three odd ones are four rows; 1,024 nodes with a
firmware split are two). Up to PER_NODE_MAX nodes the page also has every node's own row (in a
fold that opens for print); beyond that the grouped grid is the grid, and the JSON has every node.

Cell states: "same" (the reference value), "odd" (differs from it: marked in colour and with a
sign and bold for greyscale prints), "unknown" (the node could not say; never a difference) and
"split" (no majority and no golden node: every value is listed, nobody singled out).

`ncdoc cluster test`'s results.json (the isolation probes) becomes a second grid: the nodes a
finding names, one row each, the others as one row with the range of their figures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

PER_NODE_MAX = 256                # nodes up to which each node also gets its own row
NAME_MAX = 240                    # characters of a group's hostlist shown before "…"


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    group: str
    reference: str | None         # None: no majority (and no golden)
    basis: str                    # majority | golden | none
    odd: int = 0                  # nodes whose value differs from the reference
    unknown: int = 0              # nodes that could not say
    affects_nccl: bool = True


@dataclass(frozen=True)
class Cell:
    value: str
    state: str                    # same | odd | unknown | split


@dataclass(frozen=True)
class Row:
    name: str                     # one node, or a hostlist expression for a group
    nodes: tuple[str, ...]
    cells: tuple[Cell, ...]
    note: str = ""                # what a finding calls the node (the test grid)

    @property
    def odd(self) -> int:
        return sum(1 for c in self.cells if c.state == "odd")

    @property
    def count(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class ClusterGrid:
    source: str
    nodes: int = 0                             # nodes that answered
    compared: int = 0                          # attributes compared (0: unknown, from --json)
    basis: str = ""                            # "the majority of nodes" / "golden node X"
    columns: tuple[Column, ...] = ()
    groups: tuple[Row, ...] = ()               # nodes alike on every column, one row each group
    rows: tuple[Row, ...] = ()                 # every node's own row (empty past PER_NODE_MAX)
    unreachable: tuple[tuple[str, int, str], ...] = ()   # (hostlist, count, reason)
    problem: str = ""                          # nothing could be drawn, and why
    tests: Any = None                          # ClusterTests, from results.json

    @property
    def odd_cells(self) -> int:
        return sum(c.odd for c in self.columns)

    @property
    def odd_nodes(self) -> int:
        return sum(g.count for g in self.groups if g.odd)

    @property
    def per_node_left_out(self) -> bool:
        return self.nodes > PER_NODE_MAX


def _hostlist(nodes: Sequence[str]) -> str:
    from ncdoc.cluster.nodes import compress
    text = compress(nodes) if len(nodes) > 1 else (nodes[0] if nodes else "")
    return text if len(text) <= NAME_MAX else text[:NAME_MAX].rstrip(",") + "…"


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (str, int, float)):
        return str(v)
    return json.dumps(v, sort_keys=True)[:200]


def _cell(col: Column, value: str | None) -> Cell:
    if value is None:
        return Cell("?", "unknown")
    if col.reference is None:
        return Cell(value, "split")
    return Cell(value, "same" if value == col.reference else "odd")


def build_grid(source: str, nodes: Sequence[str], columns: Sequence[Column],
               values: dict[str, dict[str, str | None]], *, compared: int = 0, basis: str = "",
               unreachable: Sequence[tuple[str, str]] = ()) -> ClusterGrid:
    """The grid over `nodes` (in order): values[node][column key] (None = not known)."""
    from ncdoc.cluster.attributes import natural
    cols = tuple(columns)
    per_node = {n: tuple(_cell(c, values.get(n, {}).get(c.key)) for c in cols) for n in nodes}
    by_pattern: dict[tuple, list[str]] = {}
    for n in nodes:
        by_pattern.setdefault(tuple((c.value, c.state) for c in per_node[n]), []).append(n)
    groups = [Row(_hostlist(ns), tuple(ns), per_node[ns[0]]) for ns in by_pattern.values()]
    # the group as the reference first, then the others in node order
    groups.sort(key=lambda g: (g.odd > 0 or any(c.state == "unknown" for c in g.cells), natural(g.nodes[0])))
    rows = tuple(Row(n, (n,), per_node[n]) for n in nodes) if len(nodes) <= PER_NODE_MAX else ()
    gone: dict[str, list[str]] = {}
    for node, reason in unreachable:
        gone.setdefault(reason, []).append(node)
    return ClusterGrid(source, len(nodes), compared, basis, cols, tuple(groups), rows,
                       tuple((_hostlist(ns), len(ns), why) for why, ns in gone.items()))


def grid_from_facts(facts: Any) -> ClusterGrid:
    """The grid of an ncdoc.cluster.facts.ClusterFacts (what `ncdoc cluster check` compares)."""
    table = facts.table()
    cols = [Column(d.key, d.attr.label, d.attr.group, d.reference, d.basis, len(d.odd), len(d.unknown),
                   d.attr.affects_nccl) for d in facts.drift()]
    values = {n: {c.key: table.value(c.key, n) for c in cols} for n in facts.nodes}
    basis = f"golden node {facts.golden_name}" if facts.golden is not None else "the majority of nodes"
    return build_grid(facts.source, list(facts.nodes), cols, values, compared=len(table.attrs), basis=basis,
                      unreachable=[(u.node, u.reason) for u in facts.unreachable])


def grid_from_check_json(doc: dict, source: str) -> ClusterGrid:
    """The grid of `ncdoc cluster check --json` output; a shape it cannot use comes back as .problem."""
    facts = doc.get("facts") if isinstance(doc.get("facts"), dict) else {}
    drift, matrix = facts.get("drift"), facts.get("matrix")
    if not isinstance(drift, list) or not isinstance(matrix, dict) or not isinstance(matrix.get("rows"), dict):
        return ClusterGrid(source, problem="the JSON has no drift matrix (facts.drift and facts.matrix of "
                                           "ncdoc cluster check --json)")
    cols = []
    for d in drift:
        if not isinstance(d, dict) or not isinstance(d.get("attribute"), str):
            continue
        ref = _text(d.get("reference"))
        cols.append(Column(d["attribute"], str(d.get("label") or d["attribute"]), str(d.get("group") or ""), ref,
                           str(d.get("basis") or ("majority" if ref is not None else "none")),
                           len(d.get("odd") or ()), len(d.get("unknown") or ()), bool(d.get("affects_nccl", True))))
    rows = matrix["rows"]
    nodes = [str(n) for n in rows]
    values = {str(n): {c.key: _text(r.get(c.key)) if isinstance(r, dict) else None for c in cols}
              for n, r in rows.items()}
    summary = facts.get("cluster") if isinstance(facts.get("cluster"), dict) else {}
    gone = [(str(u.get("node")), str(u.get("reason", ""))) for u in summary.get("unreachable_nodes") or ()
            if isinstance(u, dict) and u.get("node")]
    return build_grid(source, nodes, cols, values, basis=str(summary.get("reference") or ""), unreachable=gone)


def is_check_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("facts"), dict) and "drift" in data["facts"]


def read_json(path: str) -> tuple[Any, str]:
    """(parsed JSON, "") or (None, why not) for a cluster input file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh), ""
    except FileNotFoundError:
        return None, "no such file"
    except IsADirectoryError:
        return None, "a folder"
    except UnicodeDecodeError:
        return None, "not a text file"
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"not readable as JSON ({str(exc)[:160]})"


# ---------------------------------------------------------------- cluster test results

@dataclass(frozen=True)
class TestFinding:
    kind: str                     # bad-node | bad-rail | intermittent | slow-path | slow-node
    title: str                    # BAD NODE, BAD RAIL, ...
    subject: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class ClusterTests:
    source: str
    verdict: str = ""
    healthy: bool = True
    facts: tuple[tuple[str, str], ...] = ()
    findings: tuple[TestFinding, ...] = ()
    drains: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()             # "node", "pair", "rail mlx5_3", ... (pass 1)
    rows: tuple[Row, ...] = ()                # cells: "% of expected" text, state odd / same / unknown
    measurements: int = 0
    notes: tuple[str, ...] = ()
    problem: str = ""


KIND_TITLES = {"bad-node": "BAD NODE", "slow-node": "SLOW NODE (alone)", "bad-rail": "BAD RAIL",
               "intermittent": "INTERMITTENT", "slow-path": "SLOW PATH"}


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def tests_from(doc: Any, source: str) -> ClusterTests:
    """The view of `ncdoc cluster test`'s results.json; a shape it cannot use comes back as .problem."""
    from ncdoc.cluster.attributes import natural
    from ncdoc.cluster.isolation import THRESHOLD
    if not isinstance(doc, dict) or not isinstance(doc.get("measurements"), list):
        return ClusterTests(source, problem="not the results of ncdoc cluster test (no 'measurements' list)")
    meas = [m for m in doc["measurements"] if isinstance(m, dict) and isinstance(m.get("nodes"), list)]
    findings = []
    for f in doc.get("findings") or ():
        if isinstance(f, dict):
            kind = str(f.get("kind", ""))
            findings.append(TestFinding(kind, KIND_TITLES.get(kind, kind.upper()), str(f.get("subject", "")),
                                        tuple(str(e) for e in f.get("evidence") or ())))
    drain = doc.get("drain") if isinstance(doc.get("drain"), dict) else {}
    drains = tuple(str(x) for k in ("slurm", "kubernetes") for x in drain.get(k) or ())
    # pass 1 of each scale (and rail): each node's figure as a fraction of the expected one, or of the
    # round's median where no figure was known (as the isolation judged it)
    first = [m for m in meas if m.get("purpose", "pass 1") == "pass 1"]
    col_of = {}
    for m in first:
        scale = str(m.get("scale", "?"))
        col = ("node alone" if scale == "node" else scale) + (f" {m['rail']}" if m.get("rail") else "")
        col_of.setdefault(col, []).append(m)
    order = ("node", "pair", "rail", "full", "group")
    columns = sorted(col_of, key=lambda c: (order.index(c.split()[0]) if c.split()[0] in order else 9, natural(c)))
    ratio: dict[str, dict[str, tuple[float | None, str]]] = {}
    for col in columns:
        ms = col_of[col]
        med = _median([float(m["busbw"]) for m in ms if isinstance(m.get("busbw"), (int, float))])
        for m in ms:
            ref = m.get("expected") if isinstance(m.get("expected"), (int, float)) and m["expected"] else med
            bw = m.get("busbw")
            r = float(bw) / ref if isinstance(bw, (int, float)) and ref else None
            for n in m["nodes"]:
                ratio.setdefault(str(n), {})[col] = (r, str(m.get("reason") or ""))
    called: dict[str, list[str]] = {}
    for f in findings:
        head, _, rail = f.subject.partition(":")
        for n in head.split("+"):
            called.setdefault(n, []).append(f.title + (f" {rail}" if rail else ""))

    def cells(node: str) -> tuple[Cell, ...]:
        out = []
        for col in columns:
            r, why = ratio.get(node, {}).get(col, (None, "not probed"))
            if r is None:
                out.append(Cell(why or "no result", "unknown"))
            else:
                out.append(Cell(f"{100 * r:.0f} %", "odd" if r < THRESHOLD else "same"))
        return tuple(out)

    nodes = sorted(ratio, key=natural)
    rows = []
    for n in nodes:
        c = cells(n)
        if n in called or any(x.state == "odd" for x in c):
            rows.append(Row(n, (n,), c, ", ".join(dict.fromkeys(called.get(n, ())))))
    rest = [n for n in nodes if not any(r.nodes == (n,) for r in rows)]
    if rest:
        span = []
        for i, col in enumerate(columns):
            rs = [ratio[n][col][0] for n in rest if ratio[n].get(col, (None,))[0] is not None]
            if not rs:
                span.append(Cell("-", "unknown"))
            else:
                lo, hi = min(rs), max(rs)
                span.append(Cell(f"{100 * lo:.0f} %" if round(100 * lo) == round(100 * hi)
                                 else f"{100 * lo:.0f}–{100 * hi:.0f} %", "odd" if lo < THRESHOLD else "same"))
        rows.insert(0, Row(_hostlist(rest), tuple(rest), tuple(span)))
    sizes = ", ".join(_size(s) for s in doc.get("sizes") or () if isinstance(s, int))
    facts = [("verdict", str(doc.get("verdict", ""))),
             ("nodes", str(doc.get("nodes", len(nodes)))),
             ("scales", ", ".join(str(s) for s in doc.get("scales") or ())),
             ("collective", str(doc.get("collective", "")) + (f" at {sizes}" if sizes else "")),
             ("rounds", f"{doc.get('rounds', '?')} ({doc.get('first_pass_rounds', '?')} first pass, "
                        f"{doc.get('extra_rounds', '?')} to attribute)"),
             ("launcher", str(doc.get("launcher", "")))]
    if doc.get("expected"):
        facts.append(("expected from", "; ".join(str(x) for x in doc["expected"])[:400]))
    return ClusterTests(source, str(doc.get("verdict", "")), not findings, tuple((k, v) for k, v in facts if v),
                        tuple(findings), drains, tuple(columns), tuple(rows), len(meas),
                        tuple(str(n) for n in doc.get("notes") or ()))


def _size(n: int) -> str:
    from ncdoc.report.sparkline import size_text
    return size_text(n)


def load_tests(path: str) -> ClusterTests:
    data, why = read_json(path)
    if data is None:
        return ClusterTests(path, problem=f"{path}: {why}")
    return tests_from(data, path)


# ---------------------------------------------------------------- the inputs

@dataclass
class ClusterInput:
    grid: ClusterGrid
    report: Any = None                  # the cross-node rules' ncdoc Report (from facts)
    stages: dict[str, str] = field(default_factory=dict)
    findings_json: tuple[dict, ...] = ()   # findings of a --json input
    problems: tuple[tuple[str, str], ...] = ()   # (where, what) for the page's problem list


def load_cluster(paths: Sequence[str]) -> ClusterInput:
    """Cluster files, folders of per-node snapshots, snapshot files, or one `cluster check --json`
    output: the grid and the findings; whatever cannot be read is a problem, never an exception."""
    from ncdoc.errors import NcdocError
    paths = [str(p) for p in paths]
    label = ", ".join(paths)
    for p in paths:
        if os.path.isfile(p) and p.endswith(".json"):
            data, _ = read_json(p)
            if is_check_json(data):
                if len(paths) > 1:
                    return ClusterInput(ClusterGrid(label, problem="an ncdoc cluster check --json output is "
                                                                   "drawn alone, not merged with other inputs"))
                grid = grid_from_check_json(data, p)
                found = tuple(f for f in data.get("findings") or () if isinstance(f, dict))
                return ClusterInput(grid, findings_json=found)
    try:
        from ncdoc.cluster.facts import load_inputs
        facts = load_inputs(paths)
    except NcdocError as exc:
        return ClusterInput(ClusterGrid(label, problem=str(exc).splitlines()[0]))
    problems = tuple(problem_parts(p) for p in facts.problems)
    from ncdoc.cluster.report import check_cluster
    from ncdoc.engine.selection import resolve
    sel = resolve(default_fail_on="error")
    report = check_cluster(facts, sel)
    return ClusterInput(grid_from_facts(facts), report, {r.code: r.stage for r in sel.rules}, problems=problems)


def problem_parts(problem: str) -> tuple[str, str]:
    """A load_inputs problem line ("path: what") as (where, what)."""
    head, sep, rest = problem.partition(": ")
    return (head, rest) if sep and ("/" in head or head.endswith(".json")) else ("cluster", problem)


__all__ = ["Column", "Cell", "Row", "ClusterGrid", "ClusterTests", "TestFinding", "ClusterInput", "build_grid",
           "grid_from_facts", "grid_from_check_json", "is_check_json", "tests_from", "load_tests", "load_cluster",
           "PER_NODE_MAX", "problem_parts"]
