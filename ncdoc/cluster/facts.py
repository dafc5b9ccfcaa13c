"""ClusterFacts: every node's Snapshot (with its effective NCCL env) and what could not be gathered.

This is what cross-node rules read (engine Context.cluster) and what `ncdoc cluster snapshot`
writes as one cluster file:

    {"schema_version": 1, "kind": "ncdoc-cluster", "created": "...", "launcher": "slurm",
     "complete": false, "nodes": {"node01": {<snapshot>}, ...},
     "unreachable": [{"node": "node07", "reason": "no answer within 30 s", "kind": "timeout"}],
     "clock_offsets": {"node01": [0.2, 0.6]}, "problems": ["..."]}

`load_inputs` reads cluster files, folders of per-node snapshot files (what
`srun ncdoc snapshot -o snaps/%h.json` leaves) and single snapshot files alike. A file that
cannot be used becomes a problem line (the rest is still read); the CLI prints each and
exits 2 after writing what it could.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ncdoc.cluster.attributes import natural
from ncdoc.errors import InputError
from ncdoc.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA, Snapshot

SCHEMA_VERSION = 1
KIND = "ncdoc-cluster"


@dataclass(frozen=True)
class Unreachable:
    node: str
    reason: str
    kind: str = "error"        # timeout | crash | exit | malformed | lost | launch | error

    def to_dict(self) -> dict:
        return {"node": self.node, "reason": self.reason, "kind": self.kind}


class ClusterFacts:
    """Many nodes' snapshots by node name. Tables and drift are computed once, on first use."""

    def __init__(self, nodes, *, unreachable=(), golden: Snapshot | None = None, golden_name: str = "",
                 source: str = "", launcher: str = "", created: str = "",
                 clock_offsets: dict | None = None, problems=()):
        self.nodes: dict[str, Snapshot] = {n: nodes[n] for n in sorted(nodes, key=natural)}
        self.unreachable: tuple[Unreachable, ...] = tuple(sorted(unreachable, key=lambda u: natural(u.node)))
        self.golden = golden
        self.golden_name = golden_name
        self.source = source
        self.launcher = launcher
        self.created = created
        # node -> (low, high) bounds of its clock minus ours, in seconds (from a live gather)
        self.clock_offsets: dict[str, tuple[float, float]] = dict(clock_offsets or {})
        self.problems: tuple[str, ...] = tuple(problems)
        self._table = None
        self._golden_values = None
        self._drift = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.nodes)

    @property
    def complete(self) -> bool:
        return not self.unreachable and not self.problems

    def table(self):
        if self._table is None:
            from ncdoc.cluster.attributes import build_table
            if self.golden is not None:
                # the golden's column beside the nodes', so a value it lacks reads (unset)/(absent)
                key = "\0golden"
                full = build_table({**self.nodes, key: self.golden})
                self._golden_values = {k: col.pop(key) for k, col in full.values.items()}
                full.nodes = tuple(n for n in full.nodes if n != key)
                self._table = full
            else:
                self._table = build_table(self.nodes)
        return self._table

    def golden_values(self) -> dict[str, str | None] | None:
        self.table()
        return self._golden_values

    def drift(self):
        if self._drift is None:
            from ncdoc.cluster.drift import drift
            self._drift = drift(self.table(), self.golden_values())
        return self._drift

    def with_golden(self, golden: Snapshot, name: str) -> "ClusterFacts":
        return ClusterFacts(self.nodes, unreachable=self.unreachable, golden=golden, golden_name=name,
                            source=self.source, launcher=self.launcher, created=self.created,
                            clock_offsets=self.clock_offsets, problems=self.problems)

    # -- the cluster file
    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "kind": KIND, "created": self.created, "launcher": self.launcher,
                "complete": self.complete, "nodes": {n: s.to_dict() for n, s in self.nodes.items()},
                "unreachable": [u.to_dict() for u in self.unreachable],
                "clock_offsets": {n: list(b) for n, b in self.clock_offsets.items()},
                "problems": list(self.problems)}

    def to_json(self) -> str:
        import json
        return json.dumps(self.to_dict(), indent=1) + "\n"


def is_cluster_data(data) -> bool:
    return isinstance(data, dict) and data.get("kind") == KIND


def from_cluster_data(data: dict, path: str) -> ClusterFacts:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"cluster file schema_version {version!r} is not supported (this ncdoc reads "
                         f"{SCHEMA_VERSION})", path=path)
    nodes, problems = {}, list(data.get("problems") or [])
    raw = data.get("nodes")
    if not isinstance(raw, dict):
        raise InputError("cluster file has no 'nodes' object", path=path)
    for name, snap in raw.items():
        try:
            nodes[name] = Snapshot.from_dict(snap, path=f"{path}#{name}")
        except InputError as exc:
            problems.append(str(exc))
    unreachable = [Unreachable(u["node"], u.get("reason", ""), u.get("kind", "error"))
                   for u in data.get("unreachable") or [] if isinstance(u, dict) and "node" in u]
    offsets = {n: (float(b[0]), float(b[1])) for n, b in (data.get("clock_offsets") or {}).items()
               if isinstance(b, list) and len(b) == 2}
    return ClusterFacts(nodes, unreachable=unreachable, source=path, launcher=data.get("launcher", ""),
                        created=data.get("created", ""), clock_offsets=offsets, problems=problems)


def _read_json(path: str):
    from ncdoc.readers.textfile import read_user_text as read_text
    from ncdoc.startup.json_load import loads
    text = read_text(path, "a snapshot or cluster file")
    try:
        return loads(text)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        raise InputError(f"not valid JSON ({msg} at line {getattr(exc, 'lineno', '?')})", path=path) from None


def node_name(snap: Snapshot, path: str) -> str:
    """A per-node file's node: the hostname it recorded, else the file name (snaps/%h.json)."""
    if snap.host.hostname:
        return snap.host.hostname
    return os.path.splitext(os.path.basename(path))[0]


def load_inputs(paths, *, source_label: str | None = None) -> ClusterFacts:
    """Cluster files, folders of snapshot files and snapshot files, merged into one ClusterFacts.

    Unusable files, files of another schema version and a hostname met twice become
    `problems` (one line each); everything else is still read. InputError only when
    nothing usable was given at all.
    """
    files: list[str] = []
    problems: list[str] = []
    for p in paths:
        p = str(p)
        if os.path.isdir(p):
            found = sorted((os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".json") and not f.startswith(".")), key=natural)
            if not found:
                problems.append(f"{p}: no *.json snapshot files in this folder")
            files.extend(found)
        elif os.path.exists(p):
            files.append(p)
        else:
            problems.append(f"{p}: no such file or folder")
    nodes: dict[str, Snapshot] = {}
    where: dict[str, str] = {}
    unreachable: list[Unreachable] = []
    offsets: dict = {}
    launcher = created = ""
    for f in files:
        try:
            data = _read_json(f)
            if is_cluster_data(data):
                part = from_cluster_data(data, f)
                problems.extend(part.problems)
                unreachable.extend(part.unreachable)
                offsets.update(part.clock_offsets)
                launcher, created = launcher or part.launcher, created or part.created
                found = part.nodes
            else:
                if isinstance(data, dict) and "schema_version" in data and data["schema_version"] != SNAPSHOT_SCHEMA:
                    raise InputError(f"snapshot schema_version {data['schema_version']!r}, but the others here are "
                                     f"{SNAPSHOT_SCHEMA}: recapture this node with this ncdoc", path=f)
                snap = Snapshot.from_dict(data, path=f)
                found = {node_name(snap, f): snap}
        except InputError as exc:
            problems.append(str(exc).splitlines()[0])
            continue
        for name, snap in found.items():
            if name in nodes:
                problems.append(f"{f}: duplicate hostname {name} (also in {where[name]}); this copy is left out")
                continue
            nodes[name] = snap
            where[name] = f
    if not nodes and not unreachable:
        raise InputError("no usable node snapshot in " + ", ".join(str(p) for p in paths)
                         + (f" ({problems[0]})" if problems else ""))
    reached = set(nodes)
    unreachable = [u for u in unreachable if u.node not in reached]
    label = source_label or ", ".join(str(p) for p in paths)
    return ClusterFacts(nodes, unreachable=unreachable, source=label, launcher=launcher, created=created,
                        clock_offsets=offsets, problems=problems)


def load_golden(text: str, facts: ClusterFacts) -> ClusterFacts:
    """`facts` judged against a golden configuration: a node of this cluster by name, or a snapshot file."""
    if text in facts.nodes:
        return facts.with_golden(facts.nodes[text], text)
    if not os.path.exists(text):
        raise InputError(f"--golden {text!r} is neither a node of this cluster nor a snapshot file")
    data = _read_json(text)
    if is_cluster_data(data):
        raise InputError("--golden wants one node's snapshot (or a node name), not a cluster file", path=text)
    return facts.with_golden(Snapshot.from_dict(data, path=text), text)


__all__ = ["SCHEMA_VERSION", "KIND", "Unreachable", "ClusterFacts", "load_inputs", "load_golden", "node_name",
           "is_cluster_data", "from_cluster_data"]
