"""Importers: pasted or saved node evidence -> the same Snapshot parts the probes produce.

Node-evidence kinds: snapshot_json (ncdoc's own), nccl_topo_xml, hwloc_xml, topo_matrix
(`nvidia-smi topo -m`), ibv_devinfo (also ibstat, ibstatus, show_gids). NCCL logs, nccl-tests
output and env files are run evidence, read by their own parsers (triage, env readers).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ncdoc.errors import InputError
from ncdoc.importers.detect import check_text, detect_ibv_tool, detect_kind, read_input
from ncdoc.snapshot import (ABSENT, OK, Gid, GpuSection, Hca, HcaSection, Host, NcclEnv, NetSection,
                            NumaSection, PciSection, Port, Snapshot, Status, Versions)

NODE_KINDS = ("snapshot_json", "nccl_topo_xml", "hwloc_xml", "topo_matrix", "ibv_devinfo")
_SECTIONS = ("host", "versions", "gpus", "hcas", "net", "pci", "numa", "env", "paths")
_EMPTY = {"host": Host, "versions": Versions, "gpus": GpuSection, "hcas": HcaSection, "net": NetSection,
          "pci": PciSection, "numa": NumaSection, "env": NcclEnv}


@dataclass(frozen=True)
class Imported:
    """One evidence file read: the Snapshot parts it gave, and how the reading went."""
    snapshot: Snapshot
    kind: str                      # one of NODE_KINDS
    tool: str | None = None        # for ibv_devinfo: "ibv_devinfo" | "ibstat" | "ibstatus" | "show_gids"
    truncated: bool = False        # the text stopped mid-table/record; what was there is kept
    notes: tuple[str, ...] = ()
    source: str = ""               # "import:<kind>:<path>"


def _only(source: str, kind: str, **sections) -> Snapshot:
    """A Snapshot with the given sections; the others say they were not in this evidence."""
    fill = {name: cls(status=Status.unknown(f"not in the {kind} evidence", source))
            for name, cls in _EMPTY.items() if name not in sections}
    return Snapshot(origin="import", **fill, **sections)


def import_text(text: str, *, source: str = "<text>", kind: str | None = None) -> Imported:
    """Read node evidence from text (kind detected unless given); InputError for anything else."""
    check_text(text)
    kind = kind or detect_kind(text)
    src = f"import:{kind}:{source}"
    if kind == "snapshot_json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InputError("not valid JSON", path=source, cause=str(exc)) from None
        snap = Snapshot.from_dict(data, path=source)
        return Imported(snap, kind, source=src)
    if kind == "topo_matrix":
        from ncdoc.importers.topo_matrix import parse_topo_matrix
        pm = parse_topo_matrix(text, src)
        notes = ("the `nvidia-smi topo -m` text is cut short; the rows and cells there are kept",) \
            if pm.truncated else ()
        return Imported(_only(src, kind, paths=pm, notes=notes), kind, truncated=pm.truncated,
                        notes=notes, source=src)
    if kind == "ibv_devinfo":
        from ncdoc.importers.ibv import parse_ibv
        res = parse_ibv(text, src)
        return Imported(_only(src, f"{res.tool}", hcas=res.hcas, notes=res.notes), kind, res.tool,
                        res.truncated, res.notes, src)
    if kind in ("nccl_topo_xml", "hwloc_xml"):
        if kind == "nccl_topo_xml":
            from ncdoc.importers.nccl_xml import parse_nccl_topo_xml as parse
        else:
            from ncdoc.importers.hwloc_xml import parse_hwloc_xml as parse
        snap, truncated = parse(text, src)
        fill = {name: cls(status=Status.unknown(f"not in the {kind} evidence", src))
                for name, cls in _EMPTY.items() if getattr(snap, name).status.reason == "not probed"}
        return Imported(snap.replace(**fill), kind, truncated=truncated, notes=snap.notes, source=src)
    what = {"nccl_log": "an NCCL log", "nccl_tests": "nccl-tests output", "env": "an env file"}.get(kind, kind)
    raise InputError(f"this is {what}, not node evidence (topology or RDMA devices); "
                     "give it to `ncdoc triage`", path=source if source != "<text>" else None)


def import_evidence_detail(path: str | Path) -> Imported:
    """Read one node-evidence file; every failure is an InputError naming the file."""
    text = read_input(path)
    try:
        return import_text(text, source=str(path))
    except InputError as exc:
        if exc.path or str(path) in exc.message:
            raise
        raise InputError(exc.message, path=str(path), cause=exc.cause) from None


def import_evidence(path: str | Path) -> Snapshot:
    """Snapshot parts from one node-evidence file (snapshot JSON, topology XML, topo -m, ibv_devinfo...)."""
    return import_evidence_detail(path).snapshot


# ---------------------------------------------------------------- merging

def merge(a: Snapshot, b: Snapshot) -> Snapshot:
    """Combine two Snapshots of one node: known sections beat unknown ones, ok beats absent,
    HCA lists are merged by name (fields filled from either), the imported path matrix is kept."""
    changes = {}
    for name in _SECTIONS:
        sa, sb = getattr(a, name), getattr(b, name)
        changes[name] = _merge_section(name, sa, sb)
    notes = tuple(dict.fromkeys(a.notes + b.notes))
    origin = a.origin if a.origin != "import" or b.origin == "import" else b.origin
    return a.replace(notes=notes, origin=origin, created=a.created or b.created, **changes)


def _rank(status: Status) -> int:
    return {OK: 2, ABSENT: 1}.get(status.state, 0)


def _merge_section(name: str, sa, sb):
    ra, rb = _rank(sa.status), _rank(sb.status)
    if name == "paths":
        return sa if sa.status.state == OK or sb.status.state != OK else sb
    if ra != rb or ra < 2:
        return sa if ra >= rb else sb
    # both ok: lists that have a natural key are merged, everything else keeps the first
    status = Status.ok("; ".join(dict.fromkeys(s for s in (sa.status.source, sb.status.source) if s)))
    if name == "hcas":
        by_name: dict[str, Hca] = {h.name: h for h in sa.hcas}
        for h in sb.hcas:
            by_name[h.name] = _merge_hca(by_name[h.name], h) if h.name in by_name else h
        return HcaSection(status, tuple(by_name.values()))
    if name == "pci":
        have = {d.address for d in sa.devices}
        return PciSection(status, sa.devices + tuple(d for d in sb.devices if d.address not in have))
    if name == "gpus":
        have = {g.pci_bus_id for g in sa.gpus}
        extra = tuple(g for g in sb.gpus if g.pci_bus_id not in have)
        return dataclasses.replace(sa, status=status, gpus=sa.gpus + extra)
    return dataclasses.replace(sa, status=status)


def _fill(x, y):
    """Fields of dataclass x that are None/empty taken from y."""
    changes = {}
    for f in dataclasses.fields(x):
        vx, vy = getattr(x, f.name), getattr(y, f.name)
        if vx in (None, (), {}, "") and vy not in (None, (), {}, ""):
            changes[f.name] = vy
    return dataclasses.replace(x, **changes) if changes else x


def _merge_hca(x: Hca, y: Hca) -> Hca:
    ports = {p.num: p for p in x.ports}
    for p in y.ports:
        ports[p.num] = _merge_port(ports[p.num], p) if p.num in ports else p
    return dataclasses.replace(_fill(x, y), ports=tuple(ports[n] for n in sorted(ports)))


def _merge_port(x: Port, y: Port) -> Port:
    gids: dict[int, Gid] = {g.index: g for g in y.gids}
    gids.update({g.index: _fill(g, gids[g.index]) if g.index in gids else g for g in x.gids})
    return dataclasses.replace(_fill(x, y), gids=tuple(gids[i] for i in sorted(gids)))


__all__ = ["Imported", "NODE_KINDS", "detect_kind", "detect_ibv_tool", "import_evidence",
           "import_evidence_detail", "import_text", "merge", "read_input"]
