"""Checks of where GPUs sit against NICs: GPUDirect RDMA distance, VMs that hide the PCIe tree."""

from __future__ import annotations

from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.devices import is_active


@check("gpu_without_local_nic")
def gpu_without_local_nic(ctx: Context):
    topo = ctx.topology
    if not ctx.missing("hcas"):     # without RDMA facts (a pasted topo -m) every NIC in the matrix counts
        if not any(is_active(p) for h in ctx.snapshot.hcas.hcas for p in h.ports):
            return
    snap = ctx.snapshot
    if snap.host.hypervisor and topo.source == "pci" and _flat_pci(ctx):
        raise Skip("the VM hides the PCI topology, so GPU-NIC distances are not known (see virtual-topology)")
    far: dict[str, list[tuple[str, str]]] = {}
    for g in topo.gpus():
        near = topo.nearest_nic(g.label)
        if near is None:
            continue
        nic, path = near
        if path.upper() in _FAR_PATHS:
            far.setdefault(path.upper(), []).append((g.label, nic))
    gdr_level, gdr_var = _gdr_level(ctx)
    single = _single_node(ctx)
    grace = _grace(ctx)
    if grace and far:
        # Grace (GH200, GB200, GB10): each GPU reaches the CPU over NVLink-C2C and the NICs hang off the CPU's
        # PCIe, so nvidia-smi shows NODE/SYS where NCCL sees its C2C / P2C path and keeps GPUDirect RDMA on
        pairs = [p for group in far.values() for p in group]
        yield Hit(f"{grace}: the GPUs reach their NICs through NVLink-C2C and the Grace CPU's PCIe "
                  f"({', '.join(sorted({path for path in far}))} in the matrix), the path NCCL calls C2C/P2C and uses "
                  "GPUDirect RDMA over; this is the platform's design, not a misplaced NIC",
                  tuple(Evidence(f"{g} -> {n}: {path}", "topology") for path, group in sorted(far.items())
                        for g, n in group[:2]), severity="info", subject=",".join(g for g, _ in pairs[:8]))
        return
    for path, pairs in sorted(far.items()):
        gpus = [g for g, _ in pairs]
        nics = sorted({n for _, n in pairs})
        allowed = gdr_level is not None and _GDR_ORDER.index(gdr_level) >= _GDR_ORDER.index(_FAR_PATHS[path])
        if path == "PHB":
            if allowed:
                continue            # the user raised the GDR level to cover it: GDR runs through the host bridge
            msg = (f"{', '.join(gpus)}: the nearest RDMA NIC ({', '.join(nics)}) is PHB, so traffic goes up through "
                   "the CPU's PCIe host bridge, beyond NCCL's default GDR level (PXB): GPUDirect RDMA is off and "
                   "data is staged through host memory")
        else:
            where = "another NUMA node" if path == "SYS" else "another PCIe root complex"
            gdr = (f"GPUDirect RDMA runs across it only because {gdr_var.name}={gdr_var.value} allows it" if allowed
                   else "GPUDirect RDMA is off at NCCL's default GDR level")
            msg = (f"{', '.join(gpus)}: the nearest RDMA NIC ({', '.join(nics)}) is {path}, so traffic crosses "
                   f"{where}, and {gdr}")
        # one node: the NICs carry no NCCL traffic, so where they sit costs nothing in this run
        note = f" (this run is on one node, {single}, so NCCL sends nothing through the NICs)" if single else ""
        yield Hit(msg + note, tuple(Evidence(f"{g} -> {n}: {path}", "topology") for g, n in pairs),
                  severity="info" if single else None, subject=",".join(gpus))


_GRACE_GPUS = ("GH200", "GB200", "GB300", "GB10")


def _grace(ctx: Context) -> str | None:
    """Which Grace system this is (GPUs joined to an Arm Grace CPU by NVLink-C2C), when the node facts show it."""
    snap = ctx.snapshot
    names = [g.name for g in snap.gpus.gpus] if snap is not None and snap.gpus.status.known else []
    hit = next((n for n in names for key in _GRACE_GPUS if key in n.upper()), None)
    if hit:
        return f"a Grace system ({hit})"
    arch = (snap.host.arch or "").lower() if snap is not None else ""
    if arch in ("aarch64", "arm64") and (snap.host.cpu_vendor or "").lower() in ("", "arm", "nvidia", "0x41"):
        return "a Grace (Arm) system"
    return None


# nvidia-smi path names beyond NCCL's default GDR level (PXB) -> NCCL's own path type (NODE is NCCL's PHB)
_FAR_PATHS = {"PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_GDR_ORDER = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")


def _gdr_level(ctx: Context):
    """(NCCL path type NCCL_NET_GDR_LEVEL sets, its EnvValue), or (None, None) when unset or ignored."""
    from ncdoc.nccl.parse import parse_level
    v = ctx.env_map.get("NCCL_NET_GDR_LEVEL")
    if v is None:
        return None, None
    level, _how = parse_level(v.value, version=ctx.nccl_version)
    return (level, v) if level in _GDR_ORDER else (None, None)


def _single_node(ctx: Context) -> str | None:
    """Why the evidence says the job ran on one node ("nNodes 1 in the NCCL log"), else None."""
    if not ctx.logs and not ctx.tests and not ctx.options.get("nodes"):
        return None
    from ncdoc.checks.evidence_common import job_nodes
    if job_nodes(ctx) != 1:
        return None
    if ctx.options.get("nodes"):
        return "--nodes 1"
    return "as the NCCL log says" if any(getattr(x, "nnodes", None) == 1 for x in ctx.logs) \
        else "as the nccl-tests device list shows"


def _flat_pci(ctx: Context) -> bool:
    """Every GPU and NIC sits directly on a host bridge: the VM hides the real PCIe switches."""
    snap = ctx.snapshot
    ends = [d for d in snap.pci.devices if d.kind in ("gpu", "nic")]
    if not ends:
        return False
    bridges = [d for d in snap.pci.devices if d.kind == "bridge"]
    return not bridges or all((d.parent or "").startswith("pci") for d in ends)


@check("virtual_topology")
def virtual_topology(ctx: Context):
    snap = ctx.snapshot
    if not snap.host.hypervisor or len(snap.gpus.gpus) < 2:
        return
    if ctx.env_map.get("NCCL_TOPO_FILE") is not None:
        return
    numa_unknown = all(g.numa_node is None or g.numa_node < 0 for g in snap.gpus.gpus)
    if _flat_pci(ctx) or numa_unknown:
        what = "a flat PCI tree" if _flat_pci(ctx) else "no NUMA affinity for its GPUs"
        yield Hit(f"this {snap.host.hypervisor} VM shows {what}: NCCL cannot see which NIC is near which GPU and "
                  "no NCCL_TOPO_FILE describes the real topology", (Evidence(f"hypervisor: {snap.host.hypervisor}",
                                                                            "host"),), subject="NCCL_TOPO_FILE")
