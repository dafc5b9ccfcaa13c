"""Importers: every input a user gives ncdoc, told by its kind and read; node evidence into the
same Snapshot parts the probes produce.

The kinds are one table (ncdoc/importers/kinds.py): node evidence (snapshot_json, nccl_topo_xml,
hwloc_xml, topo_matrix for `nvidia-smi topo -m`, ibv_devinfo also for ibstat, ibstatus and
show_gids), run evidence (nccl_log, nccl_tests) and launch material (env). import_text reads
node evidence; triage reads every kind (Source in, Reading out: ncdoc/importers/inputs.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from ncdoc.errors import InputError
from ncdoc.importers.detect import check_text, detect_ibv_tool
from ncdoc.importers.inputs import Imported, Source, named
from ncdoc.importers.kinds import NODE, NODE_KINDS, detect_kind, detect_sample, kind_named
from ncdoc.startup.record import fields as _fields, replace as _replace
from ncdoc.snapshot import OK, ABSENT, Gid, Hca, HcaSection, PciSection, Port, Snapshot, Status

_SECTIONS = ("host", "versions", "gpus", "hcas", "net", "pci", "numa", "env", "paths")


def import_text(text: str, *, source: str = "<text>", kind: str | None = None) -> Imported:
    """Read node evidence from text (kind detected unless given); InputError for anything else."""
    check_text(text)
    src = Source.of_text(text, source)
    k = kind_named(kind) if kind else detect_sample(src.sample)
    if k.role != NODE:
        raise InputError(f"this is {k.what}, not node evidence (topology or RDMA devices); "
                         "give it to `ncdoc triage`", path=source if source != "<text>" else None)
    return k.read(src).nodes[0]


def import_evidence_detail(path: str | Path) -> Imported:
    """Read one node-evidence file; every failure is an InputError naming the file."""
    from ncdoc.readers.textfile import display_name, read_user_text
    name = display_name(path)
    text = read_user_text(path, "node evidence")
    try:
        return import_text(text, source=name)
    except InputError as exc:
        raise named(exc, name) from None


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
        return _replace(sa, status=status, gpus=sa.gpus + extra)
    return _replace(sa, status=status)


def _fill(x, y):
    """Fields of dataclass x that are None/empty taken from y."""
    changes = {}
    for f in _fields(x):
        vx, vy = getattr(x, f.name), getattr(y, f.name)
        if vx in (None, (), {}, "") and vy not in (None, (), {}, ""):
            changes[f.name] = vy
    return _replace(x, **changes) if changes else x


def _merge_hca(x: Hca, y: Hca) -> Hca:
    ports = {p.num: p for p in x.ports}
    for p in y.ports:
        ports[p.num] = _merge_port(ports[p.num], p) if p.num in ports else p
    return _replace(_fill(x, y), ports=tuple(ports[n] for n in sorted(ports)))


def _merge_port(x: Port, y: Port) -> Port:
    gids: dict[int, Gid] = {g.index: g for g in y.gids}
    gids.update({g.index: _fill(g, gids[g.index]) if g.index in gids else g for g in x.gids})
    return _replace(_fill(x, y), gids=tuple(gids[i] for i in sorted(gids)))


__all__ = ["Imported", "NODE_KINDS", "detect_kind", "detect_ibv_tool", "import_evidence",
           "import_evidence_detail", "import_text", "merge"]
