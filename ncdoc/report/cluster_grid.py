"""The cluster grid: nodes x attributes with the odd cells marked, and the drift findings.

Input shape (docs/report.md; what `ncdoc cluster check --json` is to emit):

    {"schema_version": 1,
     "nodes": ["node01", "node02", ...],
     "attributes": ["driver", "nccl", "mlx5_0 rate", ...],
     "cells": {"node01": {"driver": {"value": "550.54.15", "odd": false}, ...}, ...},
     "reference": {"driver": "550.54.15", ...},            # optional: the majority or golden value
     "findings": [{"code": "NC2101", "name": "...", "severity": "error", "message": "...",
                   "nodes": ["node07"], "fix": "..."}, ...]}

A cell that is missing reads "not gathered"; a value that is not a string, number, boolean or null
is shown as its JSON text. Anything else wrong with the shape is a problem shown in place of the
grid, not an error: the rest of the report still renders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cell:
    value: str
    odd: bool = False
    missing: bool = False


@dataclass(frozen=True)
class ClusterGrid:
    source: str
    nodes: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    reference: dict[str, str] = field(default_factory=dict)
    findings: tuple[dict[str, Any], ...] = ()
    problem: str = ""

    def odd_count(self, node: str) -> int:
        return sum(1 for c in self.cells.get(node, {}).values() if c.odd)

    def odd_attributes(self) -> set[str]:
        return {a for row in self.cells.values() for a, c in row.items() if c.odd}


def _text(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (str, int, float)):
        return str(v)
    return json.dumps(v, sort_keys=True)[:200]


def grid_from(data: Any, source: str = "") -> ClusterGrid:
    """A ClusterGrid from the parsed JSON; a shape it cannot use comes back as .problem."""
    if not isinstance(data, dict):
        return ClusterGrid(source, problem="the cluster file is not a JSON object")
    nodes, attrs = data.get("nodes"), data.get("attributes")
    if not isinstance(nodes, list) or not isinstance(attrs, list):
        return ClusterGrid(source, problem="the cluster file needs 'nodes' and 'attributes' lists")
    nodes = [_text(n) for n in nodes]
    attrs = [_text(a.get("name") if isinstance(a, dict) else a) for a in attrs]
    raw = data.get("cells") if isinstance(data.get("cells"), dict) else {}
    cells: dict[str, dict[str, Cell]] = {}
    for n in nodes:
        row = raw.get(n) if isinstance(raw.get(n), dict) else {}
        out = {}
        for a in attrs:
            c = row.get(a)
            if isinstance(c, dict):
                out[a] = Cell(_text(c.get("value")), bool(c.get("odd")), False)
            elif c is None:
                out[a] = Cell("not gathered", False, True)
            else:
                out[a] = Cell(_text(c))
        cells[n] = out
    ref = data.get("reference") if isinstance(data.get("reference"), dict) else {}
    findings = tuple(f for f in data.get("findings") or () if isinstance(f, dict))
    return ClusterGrid(source, tuple(nodes), tuple(attrs), cells, {str(k): _text(v) for k, v in ref.items()},
                       findings)


def load_grid(path: str) -> ClusterGrid:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return ClusterGrid(path, problem=f"{path}: no such file")
    except (OSError, ValueError, RecursionError) as exc:
        return ClusterGrid(path, problem=f"{path}: not readable as JSON ({exc})")
    return grid_from(data, path)


__all__ = ["Cell", "ClusterGrid", "grid_from", "load_grid"]
