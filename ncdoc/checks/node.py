"""Checks of the node itself: the RDMA stack, network plugins, GPUDirect RDMA, fabric manager
(GPU-NIC placement: ncdoc.checks.topology).

Several rules pair a check here with a log-side one (ncdoc.checks.evidence, `ev_*`): each check's
node facts are declared with it in the rule's pack, and the engine skips it when they are unknown,
so a rule run on a log alone is decided by the log, and on a node alone by the node.
"""

from __future__ import annotations

from ncdoc.checks.env import ev
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.parse import version_cmp
from ncdoc.nccl.devices import is_active
from ncdoc.readers.numbers import is_digits

MELLANOX, AMAZON = "0x15b3", "0x1d0f"
# fabrics whose NICs NCCL reaches only through an external net plugin
PLUGIN_FABRICS = {"efa": ("AWS EFA", "aws-ofi-nccl (libnccl-net-ofi.so / libnccl-net.so)"),
                  "cxi": ("HPE Slingshot", "aws-ofi-nccl built for libfabric cxi")}


def _rdma_hw(ctx: Context) -> list:
    """PCI functions that are RDMA-capable NICs (Mellanox/NVIDIA, EFA, Slingshot)."""
    if ctx.snapshot is None or not ctx.snapshot.pci.status.known:
        return []
    out = []
    for d in ctx.snapshot.pci.devices:
        if d.kind != "nic":
            continue
        if d.vendor == MELLANOX or d.driver in ("efa", "cxi_core", "cxi_ss1") or \
                (d.vendor == AMAZON and d.driver == "efa"):
            out.append(d)
    return out


@check("no_rdma_devices")
def no_rdma_devices(ctx: Context):
    snap = ctx.snapshot
    hcas = snap.hcas.hcas
    if hcas:
        dev = snap.host.dev_infiniband if snap.host.status.known else None
        if dev is not None and not any(d.startswith("uverbs") for d in dev):
            yield Hit(f"{len(hcas)} RDMA devices exist ({', '.join(h.name for h in hcas[:4])}"
                      f"{'...' if len(hcas) > 4 else ''}) but /dev/infiniband has no uverbs device: this process "
                      "cannot open them, NCCL falls back to TCP sockets",
                      (Evidence("/dev/infiniband: " + (" ".join(dev) or "empty"), "host"),),
                      fix="Give the container the RDMA devices (--device=/dev/infiniband or the RDMA device "
                          "plugin) and load ib_uverbs.", subject="/dev/infiniband")
        return
    hw = _rdma_hw(ctx)
    if hw:
        mods = snap.host.modules if snap.host.status.known else {}
        missing = [m for m in ("ib_core", "ib_uverbs", "mlx5_ib") if mods.get(m) is False]
        yield Hit(f"RDMA-capable NICs are present ({', '.join(d.address for d in hw[:4])}) but the node shows no "
                  "RDMA device: NCCL will use TCP sockets between nodes"
                  + (f" (not loaded: {', '.join(missing)})" if missing else ""),
                  tuple(Evidence(f"{d.address} vendor {d.vendor} driver {d.driver or 'none'}", "pci") for d in hw[:4]),
                  subject="rdma")
    elif snap.gpus.status.known and snap.gpus.gpus:
        yield Hit("no RDMA device and no RDMA-capable NIC: traffic between nodes would use TCP sockets "
                  "(fine for a single node)", (Evidence(snap.hcas.status.reason or "no RDMA device", "hcas"),),
                  severity="info", subject="rdma")


@check("net_plugin_missing")
def net_plugin_missing(ctx: Context):
    snap = ctx.snapshot
    plugins = snap.versions.net_plugins
    env = ctx.env_map
    if not ctx.missing("hcas"):
        drivers = {h.driver for h in snap.hcas.hcas if h.driver}
        for drv, (fabric, plugin) in PLUGIN_FABRICS.items():
            if drv in drivers and not plugins:
                yield Hit(f"{fabric} devices are present but no NCCL net plugin was found: NCCL cannot use them "
                          f"and falls back to TCP sockets", (Evidence(f"RDMA driver {drv}", "hcas"),),
                          fix=f"Install {plugin} and put its lib directory on LD_LIBRARY_PATH.", subject=drv,
                          scope="multi-node")     # NCCL_NET naming an absent plugin, below, fails any job's init
    net = env.get("NCCL_NET")
    if net is not None and net.value.lower() not in ("ib", "socket") and not plugins:
        yield Hit(f"NCCL_NET={net.value} names an external network, but no net plugin was found: init fails with "
                  "'Failed to initialize any NET plugin'", (ev(net),), subject="NCCL_NET")
    wanted = env.get("NCCL_NET_PLUGIN")
    if wanted is not None and wanted.value.lower() != "none":
        names = [n for n in wanted.value.split(",") if n]
        found = " ".join(p.rsplit("/", 1)[-1] for p in plugins)
        for n in names:
            stem = n.rsplit("/", 1)[-1]
            if stem not in found and f"libnccl-net-{stem}" not in found and \
                    not (stem.startswith("lib") and stem.split(".so")[0] in found):
                yield Hit(f"NCCL_NET_PLUGIN names {n!r}, which is not among the net plugins found "
                          f"({found or 'none'}): NCCL skips it", (ev(wanted),), severity="warning", subject=n)


# ---------------------------------------------------------------- GPUDirect RDMA

def _mlx_rdma(ctx: Context) -> bool:
    return any(h.driver in (None, "mlx5_core") and any(is_active(p) for p in h.ports)
               for h in ctx.snapshot.hcas.hcas)


@check("peermem_not_loaded")
def peermem_not_loaded(ctx: Context):
    snap = ctx.snapshot
    if not snap.gpus.gpus or not _mlx_rdma(ctx):
        return
    mods = snap.host.modules
    if "nvidia_peermem" not in mods and "nv_peer_mem" not in mods:
        raise Skip("kernel modules unknown")
    if mods.get("nvidia_peermem") or mods.get("nv_peer_mem"):
        return
    dmabuf = ctx.env_map.get("NCCL_DMABUF_ENABLE")
    kernel, driver = snap.host.kernel, snap.versions.driver if snap.versions.status.known else None
    possible = (kernel and version_cmp(kernel, (5, 12)) >= 0 and driver and version_cmp(driver, (515,)) >= 0
                and not (dmabuf is not None and dmabuf.value.strip() == "0")
                and not (ctx.nccl_version and version_cmp(ctx.nccl_version, (2, 13)) < 0))
    evid = (Evidence("nvidia_peermem: not loaded; nv_peer_mem: not loaded", "host/modules"),
            Evidence(f"kernel {kernel or '?'}, driver {driver or '?'}", "host"))
    if possible:
        yield Hit("neither nvidia_peermem nor nv_peer_mem is loaded: GPUDirect RDMA works only through DMA-BUF, "
                  "which needs the open GPU kernel module (kernel and driver are new enough); otherwise NCCL "
                  "stages every transfer through host memory", evid, severity="warning", subject="nvidia_peermem")
    else:
        yield Hit("neither nvidia_peermem nor nv_peer_mem is loaded and this kernel/driver/NCCL has no DMA-BUF "
                  "path: GPUDirect RDMA is off, NCCL stages every transfer through host memory", evid,
                  subject="nvidia_peermem")


def _ofed_release(rdma_core: str | None) -> tuple[int, int] | None:
    """(YY, MM) of an MLNX_OFED/DOCA rdma-core ("2307mlnx47-1.2310036" -> (23, 7)); None if not MLNX."""
    s = rdma_core or ""                 # regex (\d{2})(\d{2})mlnx at the start; no `re` on the check path
    return (int(s[:2]), int(s[2:4])) if s[4:8] == "mlnx" and is_digits(s[:4]) else None


@check("nccl_peermem_detection_bug")
def nccl_peermem_detection_bug(ctx: Context):
    snap = ctx.snapshot
    mods = snap.host.modules
    if not snap.gpus.gpus or not _mlx_rdma(ctx) or not mods.get("nvidia_peermem") or mods.get("nv_peer_mem"):
        return
    version = ctx.nccl_version
    if not version:
        raise Skip("NCCL version unknown (the bug is in NCCL 2.22.3 and older)")
    if version_cmp(version, (2, 22, 3)) > 0:
        return
    rdma_core = snap.versions.rdma_core if snap.versions.status.known else None
    ofed = _ofed_release(rdma_core)
    kernel = snap.host.kernel
    new_kernel = bool(kernel and version_cmp(kernel, (6, 8)) >= 0)
    if ofed is None and not new_kernel:
        raise Skip(f"cannot tell whether the RDMA stack (rdma-core {rdma_core or 'unknown'}) publishes "
                   "/sys/kernel/mm/memory_peers/nv_mem, which NCCL <= 2.22.3 looks for")
    if ofed is not None and ofed < (24, 10) and not new_kernel:
        return                  # MLNX_OFED before 24.10 publishes nv_mem for nvidia_peermem
    why = f"MLNX_OFED/DOCA {ofed[0]}.{ofed[1]:02d}" if ofed and ofed >= (24, 10) else f"kernel {kernel}"
    yield Hit(f"NCCL {version} detects peer memory only through /sys/kernel/mm/memory_peers/nv_mem*, which this "
              f"stack ({why}) does not publish for nvidia_peermem: NCCL reports 'GPU Direct RDMA Disabled' and "
              "stages network traffic through host memory (unless DMA-BUF is available)",
              (Evidence(f"NCCL {version}; nvidia_peermem loaded; rdma-core {rdma_core or '?'}; kernel {kernel or '?'}",
                        "snapshot"),),
              fix="Upgrade NCCL to 2.23.4 or later (it also checks /sys/module/nvidia_peermem).",
              subject="nvidia_peermem")


def _nvswitch(snap) -> bool:
    return any(d.kind == "nvswitch" for d in snap.pci.devices) or \
        any(l.remote_type == "switch" for g in snap.gpus.gpus for l in g.nvlinks)


@check("fabric_manager")
def fabric_manager(ctx: Context):
    snap = ctx.snapshot
    if not _nvswitch(snap):
        return
    state = snap.gpus.fabric_manager
    if state is None:
        raise Skip("fabric manager state unknown (NVML did not report it)")
    if state != "completed":
        detail = f" ({snap.gpus.fabric_manager_detail})" if snap.gpus.fabric_manager_detail else ""
        yield Hit(f"this NVSwitch system's fabric manager state is {state!r}{detail}: the GPUs cannot use NVLink "
                  "through the switches, so NCCL init fails or falls back to PCIe",
                  (Evidence(f"NVML GPU fabric state: {state}", "gpus"),),
                  fix="Start nvidia-fabricmanager (systemctl start nvidia-fabricmanager) with the same version "
                      "as the driver, then check 'nvidia-smi -q | grep -A2 Fabric'.", subject="fabric-manager")


@check("gpu_p2p_blocked")
def gpu_p2p_blocked(ctx: Context):
    snap = ctx.snapshot
    if len(snap.gpus.gpus) < 2:
        return
    if not snap.gpus.p2p:
        raise Skip("GPU peer-to-peer status unknown (NVML did not report it)")
    by_index = {g.index: g for g in snap.gpus.gpus}
    ignore = ctx.env_map.get("NCCL_IGNORE_DISABLED_P2P")
    topo = None if ctx.missing("topology") else ctx.topology
    for s in snap.gpus.p2p:
        if s.status in ("OK", "unknown"):
            continue
        a, b = by_index.get(s.a), by_index.get(s.b)
        nvlinked = bool(a and b and (_linked(a, b) or (_nvswitch(snap) and a.nvlinks and b.nvlinks)))
        ev_ = (Evidence(f"GPU{s.a}-GPU{s.b}: {s.status}", "nvml"),)
        if nvlinked:
            sev = "warning" if ignore is not None and ignore.value.strip() in ("1", "2") else None
            yield Hit(f"NVML reports P2P {s.status} between NVLink-connected GPU{s.a} and GPU{s.b}: NCCL init fails "
                      "('P2P is disabled between NVLINK connected GPUs') unless NCCL_IGNORE_DISABLED_P2P is set",
                      ev_, severity=sev, subject=f"GPU{s.a}-GPU{s.b}")
            continue
        # PCIe pairs: NCCL uses P2P only up to its P2P level (PXB by default), so a pair beyond it
        # (across host bridges or sockets) loses nothing when NVML says no.
        path = topo.path(f"GPU{s.a}", f"GPU{s.b}") if topo else None
        if path and path.upper() in ("PIX", "PXB"):
            yield Hit(f"NVML reports P2P {s.status} between GPU{s.a} and GPU{s.b} ({path}): NCCL copies through host "
                      "memory where it would use PCIe peer-to-peer", ev_, severity="warning",
                      subject=f"GPU{s.a}-GPU{s.b}")


def _linked(a, b) -> bool:
    from ncdoc.topology import normalize_bus_id
    pb = normalize_bus_id(b.pci_bus_id)
    return any(l.active and l.remote_pci and normalize_bus_id(l.remote_pci) == pb for l in a.nvlinks)


@check("nvlink_inactive")
def nvlink_inactive(ctx: Context):
    gpus = [g for g in ctx.snapshot.gpus.gpus if g.nvlinks]
    if not gpus:
        return
    most = max(sum(1 for l in g.nvlinks if l.active) for g in gpus)
    for g in gpus:
        up = sum(1 for l in g.nvlinks if l.active)
        if up < most:
            down = [str(l.link) for l in g.nvlinks if not l.active]
            yield Hit(f"GPU{g.index} has {up} of {len(g.nvlinks)} NVLinks active (other GPUs have {most}): its NVLink "
                      "bandwidth is cut" + (f"; inactive links: {', '.join(down)}" if down else ""),
                      (Evidence(f"GPU{g.index} {g.pci_bus_id}: {up} active NVLinks", "nvml"),),
                      severity="error" if up == 0 else None, subject=f"GPU{g.index}")


@check("iommu_translation")
def iommu_translation(ctx: Context):
    snap = ctx.snapshot
    if snap.host.hypervisor or snap.host.iommu != "on" or not snap.gpus.gpus:
        return
    switches = _switch_ports_above_endpoints(ctx)
    if not switches:
        return                  # no PCIe switch: peer traffic crosses the root complex anyway
    if any(ctx.snapshot.pci_device(a).acs_ctrl is not None for a in switches):
        return                  # ACS registers are readable: acs-enabled judges them directly
    yield Hit("the IOMMU translates DMA on this bare-metal host (no iommu=pt) and GPUs or NICs sit behind PCIe "
              "switches: Linux then enables ACS redirection on the switch ports, sending peer-to-peer traffic "
              "through the root complex (ACS registers unreadable without root, so this is inferred)",
              (Evidence("iommu: on (translation)", "host"),
               Evidence(f"PCIe switch ports above GPUs/NICs: {', '.join(sorted(switches)[:4])}", "pci")),
              subject="iommu")


def _switch_ports_above_endpoints(ctx: Context) -> dict[str, list[str]]:
    """Non-root-port bridges above each GPU/NIC: switch ports, where ACS decides peer routing."""
    devs = {d.address: d for d in ctx.snapshot.pci.devices}
    above: dict[str, list[str]] = {}
    for d in devs.values():
        if d.kind not in ("gpu", "nic"):
            continue
        p, seen = d.parent, 0
        while p in devs and seen < 16:
            if not (devs[p].parent or "pci").startswith("pci"):
                above.setdefault(p, []).append(d.address)
            p = devs[p].parent
            seen += 1
    return above


@check("acs_enabled")
def acs_enabled(ctx: Context):
    # Root ports are left out: traffic between different root ports crosses the root complex anyway;
    # ACS matters on the switch ports that would otherwise route peer traffic directly.
    above = _switch_ports_above_endpoints(ctx)
    if not above:
        return                  # no PCIe switch above any GPU or NIC
    readable = [a for a in above if ctx.snapshot.pci_device(a).acs_ctrl is not None]
    if not readable:
        raise Skip("ACS control registers unknown (reading PCIe config space needs root)")
    redirecting = []
    for addr in sorted(readable):
        b = ctx.snapshot.pci_device(addr)
        try:
            ctrl = int(b.acs_ctrl, 16)
        except ValueError:
            continue
        if ctrl & 0x0C:  # P2P Request Redirect (bit 2) or Completion Redirect (bit 3)
            redirecting.append(b)
    if redirecting:
        below = sorted({d for b in redirecting for d in above[b.address]})
        yield Hit(f"ACS redirects peer-to-peer traffic on {len(redirecting)} PCIe switch port(s) above "
                  f"{len(below)} GPU/NIC function(s): GPU-GPU and GPU-NIC transfers detour through the root complex "
                  "(slow, or hangs with GPUDirect RDMA)",
                  tuple(Evidence(f"{b.address} ACSCtl {b.acs_ctrl} (above {', '.join(above[b.address])})", "pci")
                        for b in redirecting), subject=",".join(b.address for b in redirecting))


@check("multiple_nccl_libraries")
def multiple_nccl_libraries(ctx: Context):
    libs = ctx.snapshot.versions.nccl_libs
    versions = {lib.version for lib in libs if lib.version}
    if len(versions) > 1:
        chosen = libs[0]
        yield Hit(f"{len(versions)} NCCL versions are installed ({', '.join(sorted(versions))}); this node loads "
                  f"{chosen.version} from {chosen.path}, a framework may load another",
                  tuple(Evidence(f"{lib.path}: {lib.version or '?'} ({lib.origin or '?'})", "versions")
                        for lib in libs), subject="libnccl")
