"""Node evidence texts into the Snapshot parts the probes produce: one function per node kind,
each `(text, source) -> Imported`; the sections an input does not hold say so."""

from __future__ import annotations

from ncdoc.errors import InputError
from ncdoc.importers.inputs import Imported
from ncdoc.snapshot import GpuSection, HcaSection, Host, NcclEnv, NetSection, NumaSection, PciSection, Snapshot, \
    Status, Versions

_EMPTY = {"host": Host, "versions": Versions, "gpus": GpuSection, "hcas": HcaSection, "net": NetSection,
          "pci": PciSection, "numa": NumaSection, "env": NcclEnv}


def _only(source: str, kind: str, **sections) -> Snapshot:
    """A Snapshot with the given sections; the others say they were not in this evidence."""
    fill = {name: cls(status=Status.unknown(f"not in the {kind} evidence", source))
            for name, cls in _EMPTY.items() if name not in sections}
    return Snapshot(origin="import", **fill, **sections)


def snapshot_json(text: str, source: str) -> Imported:
    """ncdoc's own snapshot file."""
    from ncdoc.startup.json_load import loads
    try:
        data = loads(text.lstrip("\ufeff"))
    except ValueError as exc:
        raise InputError("not valid JSON", path=source, cause=str(exc)) from None
    return Imported(Snapshot.from_dict(data, path=source), "snapshot_json", source=f"import:snapshot_json:{source}")


def topo_matrix(text: str, source: str) -> Imported:
    """`nvidia-smi topo -m`."""
    from ncdoc.importers.topo_matrix import parse_topo_matrix
    src = f"import:topo_matrix:{source}"
    pm = parse_topo_matrix(text, src)
    notes = ("the `nvidia-smi topo -m` text is cut short; the rows and cells there are kept",) \
        if pm.truncated else ()
    return Imported(_only(src, "topo_matrix", paths=pm, notes=notes), "topo_matrix", truncated=pm.truncated,
                    notes=notes, source=src)


def rdma_listing(text: str, source: str) -> Imported:
    """ibv_devinfo, ibstat, ibstatus or show_gids output (kind "ibv_devinfo"), several pasted together too."""
    from ncdoc.importers.ibv import parse_ibv
    src = f"import:ibv_devinfo:{source}"
    res = parse_ibv(text, src)
    return Imported(_only(src, f"{res.tool}", hcas=res.hcas, notes=res.notes), "ibv_devinfo", res.tool,
                    res.truncated, res.notes, src)


def _topology_xml(kind: str, text: str, source: str) -> Imported:
    if kind == "nccl_topo_xml":
        from ncdoc.importers.nccl_xml import parse_nccl_topo_xml as parse
    else:
        from ncdoc.importers.hwloc_xml import parse_hwloc_xml as parse
    src = f"import:{kind}:{source}"
    snap, truncated = parse(text, src)
    fill = {name: cls(status=Status.unknown(f"not in the {kind} evidence", src))
            for name, cls in _EMPTY.items() if getattr(snap, name).status.reason == "not probed"}
    return Imported(snap.replace(**fill), kind, truncated=truncated, notes=snap.notes, source=src)


def nccl_topo_xml(text: str, source: str) -> Imported:
    """NCCL's topology dump (NCCL_TOPO_DUMP_FILE, <system>)."""
    return _topology_xml("nccl_topo_xml", text, source)


def hwloc_xml(text: str, source: str) -> Imported:
    """hwloc's lstopo XML (<topology>)."""
    return _topology_xml("hwloc_xml", text, source)


__all__ = ["snapshot_json", "topo_matrix", "rdma_listing", "nccl_topo_xml", "hwloc_xml"]
