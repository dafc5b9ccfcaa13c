"""Checks over NCCL logs: transport fallback, bootstrap, QP setup, GPUDirect RDMA, completion errors.

Each reads the parsed log (ncdoc.evidence.nccl_log.LogFacts) and quotes the lines it saw.
"""

from __future__ import annotations

from ncdoc.checks.evidence_common import (cite, cite_kind, cite_problems, env_evidence, env_true, env_value,
                                          merge_evidence, multi_node, plugin_failure, plugin_platform)
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Hit
from ncdoc.nccl.parse import version_cmp

# ---------------------------------------------------------------- rdma-path

_NO_RDMA_KINDS = ("ibv_open_device_failed", "ibverbs_missing", "ib_no_ip_interface")


@check("socket_fallback")
def socket_fallback(ctx: Context):
    """The job moves data between nodes over TCP sockets instead of RDMA."""
    for log in ctx.logs:
        ranks_socket = log.transports.get("Socket", 0)
        if log.transport != "Socket" and not ranks_socket:
            continue
        ev = merge_evidence(cite_kind(log, "transport", limit=2), cite_kind(log, "ib_no_device", limit=1),
                            cite_problems(log, [p for k in _NO_RDMA_KINDS for p in log.problems_of(k)], 2),
                            cite_kind(log, "socket_devices", limit=1))
        net = (env_value(ctx, "NCCL_NET") or "").lower()
        failed = plugin_failure(log)
        platform = plugin_platform(ctx)
        if failed and multi_node(ctx) is not False:
            what, probs = failed
            yield Hit(f"{what}, so NCCL fell back to its TCP sockets between nodes (typically 4-5x slower)"
                      + (f": on {platform} the plugin is the way to the RDMA fabric, and NCCL_IB_DISABLE there is "
                         "routine, not the cause" if platform and env_true(env_value(ctx, "NCCL_IB_DISABLE")) else ""),
                      merge_evidence(cite_problems(log, probs, 3), cite_kind(log, "plugin_failed", limit=1), ev),
                      fix=("Fix what the plugin reports first: check the EFA devices inside the job (`fi_info -p efa`, "
                           "/dev/infiniband/uverbs* in the container), the libfabric and aws-ofi-nccl versions for "
                           "this NCCL, and an unlimited locked-memory limit (ulimit -l; docker --ulimit memlock=-1); "
                           "then check the log for 'Selected provider is efa' and 'Using network Libfabric'."
                           if platform and platform.startswith("AWS") else
                           "Fix what the plugin reports first (its library, devices and versions), then check the log "
                           "names the plugin in 'Using network'."),
                      severity="error", subject="socket")
            continue
        deliberate = env_true(env_value(ctx, "NCCL_IB_DISABLE")) or net == "socket"
        if deliberate:
            yield Hit("NCCL uses TCP sockets because NCCL_IB_DISABLE / NCCL_NET asks it to",
                      merge_evidence(env_evidence(ctx, "NCCL_IB_DISABLE"), env_evidence(ctx, "NCCL_NET"), ev),
                      fix="Unset NCCL_IB_DISABLE and NCCL_NET=Socket when the nodes have RDMA NICs.",
                      severity="info", subject="socket")
            continue
        if multi_node(ctx) is False:
            yield Hit("NCCL chose its Socket network, but this job runs on one node, where it is not used",
                      ev, severity="info", subject="socket")
            continue
        why = []
        if log.ib_no_device:
            why.append("NCCL found no IB/RoCE device ('NET/IB : No device found')")
        if log.problems_of("ibv_open_device_failed"):
            why.append("a verbs device could not be opened")
        if log.problems_of("ibverbs_missing"):
            why.append("libibverbs is missing")
        if log.problems_of("ib_no_ip_interface"):
            why.append("IB found no IP interface for its connection setup")
        # Without a sign that RDMA was meant to be used (a device NCCL could not use, IB asked for), the
        # cluster may simply be Ethernet-only: slow, but not a fault.
        ib_wanted = (env_value(ctx, "NCCL_IB_DISABLE") or "").strip() == "0" or \
            (env_value(ctx, "NCCL_NET") or "").lower() == "ib"
        expected_rdma = bool(why) or ib_wanted
        partial = [t for t in log.transports if t and t != "Socket"]
        if partial and ranks_socket:
            scope = (f"{ranks_socket} of {sum(log.transports.values())} ranks use TCP sockets while others use "
                     f"{', '.join(partial)}")
        else:
            scope = "NCCL moves data between nodes over TCP sockets"
        yield Hit(scope + " (typically 4-5x slower than RDMA, about 5 GB/s instead of 25+)"
                  + (": " + "; ".join(why) if why else ""),
                  ev, fix="Make the RDMA devices usable where the job runs (ibv_devinfo must list an ACTIVE port; "
                          "in containers pass /dev/infiniband and IPC_LOCK), or install the fabric's net plugin.",
                  severity=None if expected_rdma or partial else "warning", subject="socket")


def _qp_failures(log, kind: str) -> list:
    # 2.24+ retries a failed transition and says so at INFO ("..., retrying 1/7"); only the WARN is final
    return [p for p in log.problems_of(kind) if p.level != "INFO"]


@check("qp_connect_timeout")
def qp_connect_timeout(ctx: Context):
    """QP transition INIT->RTR timed out: this NIC cannot reach the peer's GID (rails, routing, GID)."""
    for log in ctx.logs:
        probs = _qp_failures(log, "qp_connect_timeout")
        if not probs:
            continue
        d = probs[0].details
        cross = env_value(ctx, "NCCL_CROSS_NIC")
        where = ([f"{d['state']} -> {d.get('next_state', '?')}"] if d.get("state") else []) + \
            [f"{k.replace('_', ' ')} {d[k]}" for k in ("device", "gid_index") if d.get(k)]   # none before 2.24
        msg = ("IB queue-pair setup timed out (ibv_modify_qp: ETIMEDOUT; " + "".join(f"{w}, " for w in where)
               + f"{len(probs)} time(s)): the NIC cannot reach the remote GID. "
               "On a rail-optimised fabric NICs of different rails cannot talk, and NCCL crosses rails unless "
               "NCCL_CROSS_NIC=0; on RoCE a GID index that selects an address the peer cannot route to does the same")
        patch = {} if (cross or "").strip() == "0" else {"NCCL_CROSS_NIC": "0"}
        yield Hit(msg, merge_evidence(cite_problems(log, probs, 2), env_evidence(ctx, "NCCL_CROSS_NIC"),
                                      env_evidence(ctx, "NCCL_IB_GID_INDEX")),
                  fix="On rail-only fabrics set NCCL_CROSS_NIC=0; otherwise check that every NIC can route to "
                      "every other (RoCE: same subnet or routes, GID index of a RoCE v2 IPv4 GID).",
                  env_patch=patch, subject=d.get("device", "qp"))


# What an ibv_modify_qp errno points at while NCCL connects a queue pair: (what, fix).
_QP_UNREACHABLE = ("the NIC has no route to the remote GID: on RoCE the GID index selects an address (subnet, "
                   "VLAN) that cannot reach the peer's, or the NICs sit on different subnets without routes",
                   "Point NCCL_IB_GID_INDEX at the RoCE v2 GID of the routable IPv4 address on every node "
                   "(`show_gids`), and check that each NIC's subnet routes to the others' (`ip route`); on "
                   "rail-only fabrics set NCCL_CROSS_NIC=0.")
_QP_ERRNO_HINTS = {
    "ENETUNREACH": _QP_UNREACHABLE,
    "EHOSTUNREACH": _QP_UNREACHABLE,
    "EINVAL": ("with RoCE most often a GID index that does not exist or is not configured on that port, or an MTU "
               "the port does not support", "Check NCCL_IB_GID_INDEX against `show_gids` on every node (or leave it "
               "unset with NCCL 2.21+) and the port's active MTU."),
    "ENOMEM": ("the locked-memory limit is too low for the QP's resources",
               "Run the job with `ulimit -l unlimited` (containers: --ulimit memlock=-1)."),
    "ENODEV": ("the port or device went away (link down, driver reset), or NCCL_IB_HCA names a port that is not "
               "active", "Check the port state (`ibv_devinfo`, `ibstat`) and NCCL_IB_HCA on every node."),
}


@check("ib_qp_setup_failed")
def ib_qp_setup_failed(ctx: Context):
    for log in ctx.logs:
        probs = _qp_failures(log, "ib_qp_modify_failed")
        if not probs:
            continue
        p = probs[0]
        what, fix = _QP_ERRNO_HINTS.get(p.code_name or "") or (
            f"{p.meaning}; with RoCE this is most often a GID index that does not exist or is not configured on "
            "that port", None)
        err = p.details.get("error")
        code = " ".join(x for x in (p.code_name, f"({err})" if err else None) if x)
        yield Hit(f"ibv_modify_qp failed{' with ' + code if code else ''}, {len(probs)} time(s), while NCCL "
                  f"connected an IB queue pair: {what}",
                  merge_evidence(cite_problems(log, probs, 2), env_evidence(ctx, "NCCL_IB_GID_INDEX"),
                                 env_evidence(ctx, "NCCL_IB_HCA")),
                  fix=fix, subject=p.details.get("device", "qp"))


@check("ib_incompatible_devices")
def ib_incompatible_devices(ctx: Context):
    # NCCL's own WARN only: a device list holding both link layers is mixed-link-layers (a warning)
    for log in ctx.logs:
        probs = log.problems_of("ib_incompatible_devices")
        if probs:
            yield Hit("NCCL paired NICs of different link layers (InfiniBand and RoCE), which cannot talk to each "
                      "other", merge_evidence(cite_problems(log, probs, 2), cite_kind(log, "net_devices", limit=1)),
                      subject="link-layers")


# ---------------------------------------------------------------- gdr-affinity

def _version_le(a: str, b: str) -> bool:
    try:
        return version_cmp(a, b) <= 0
    except ValueError:
        return False


def _gdr_reason(ctx: Context, log) -> tuple[str, str]:
    """(why GDR is off, the fix), from the log's own reasons, the env and the NCCL version."""
    g = log.gdr
    reasons = [r for r in (g.reason, *g.off_reasons) if r]
    level = env_value(ctx, "NCCL_NET_GDR_LEVEL")
    distance = next((r for r in reasons if "distance" in r), None)
    if distance and not g.hcas_off:
        why = f"the GPU-NIC distance is beyond NCCL_NET_GDR_LEVEL ({distance})"
        fix = ("Use GPUs and NICs on the same PCIe switch (check `nvidia-smi topo -m`), or raise "
               "NCCL_NET_GDR_LEVEL (PHB/SYS) if your platform routes peer traffic well.")
        return why, fix
    version = ctx.nccl_version
    old_or_unknown = not version or _version_le(version, "2.22.3")
    if g.hcas_off and old_or_unknown:
        # Up to 2.22.3 NCCL looks for the module in one sysfs place only: "Disabled" may be its blind spot
        which = f"NCCL {version}" if version else "an NCCL of 2.22.3 or older (the log does not say which version)"
        why = ("NCCL did not detect a peer-memory module (nvidia_peermem / nv_peer_mem) or DMA-BUF for the NIC "
               f"({_gdr_basis(g)}): either none is loaded, or " + which + " missed a loaded "
               "nvidia_peermem (nccl-peermem-detection-bug, NC2001; NVIDIA/nccl#1676)")
    else:
        why = (f"NCCL could not register GPU memory with the NIC ({_gdr_basis(g)}): "
               "no nvidia_peermem / nv_peer_mem registration and no DMA-BUF")
        if version and old_or_unknown:
            why += f"; NCCL {version} (<= 2.22.3) may not detect a loaded nvidia_peermem (NVIDIA/nccl#1676)"
    if level:
        why += f"; not a distance problem, since NCCL_NET_GDR_LEVEL={level}"
    if g.dma_buf:
        why += "; DMA-BUF is reported available on the GPU, so the NIC side (driver or rdma-core) lacks it"
    fix = ("Load nvidia_peermem (`modprobe nvidia_peermem`; check /sys/kernel/mm/memory_peers/nv_mem/version) or "
           "use DMA-BUF (kernel >= 5.12, open GPU driver, recent rdma-core).")
    if old_or_unknown:
        fix += (" If `lsmod | grep nvidia_peermem` shows it loaded and NCCL is 2.22.3 or older, NCCL does not see "
                "it (NVIDIA/nccl#1676): upgrade NCCL to 2.23.4 or later, which also checks /sys/module/nvidia_peermem.")
    return why, fix


def _gdr_basis(g) -> str:
    """What in the log says GDR is off, in the log's own terms (quoted only when it is there)."""
    if g.hcas_off:
        return "per-HCA 'GPU Direct RDMA Disabled'"
    if g.pairs_off:
        return "per GPU/NIC pair 'GPU Direct RDMA Disabled'"
    if g.channels_off:
        return "NET channels connected without /GDRDMA"
    if g.ring_flags:
        return "'Connected all rings' with GDR 0"
    return "the log's GDR lines"


@check("gdr_disabled")
def gdr_disabled(ctx: Context):
    for log in ctx.logs:
        if log.gdr.state != "disabled" or log.transport == "Socket":
            continue
        why, fix = _gdr_reason(ctx, log)
        yield Hit(f"GPUDirect RDMA is off: NIC traffic is staged through host memory ({why})",
                  merge_evidence(cite(log, log.gdr.evidence, 3), cite_kind(log, "gdr_off", limit=3),
                                 env_evidence(ctx, "NCCL_NET_GDR_LEVEL")),
                  fix=fix, subject="gdr")


@check("gdr_partial")
def gdr_partial(ctx: Context):
    logs = ctx.logs
    on = [lg for lg in logs if lg.gdr.state == "enabled" and lg.transport != "Socket"]
    off = [lg for lg in logs if lg.gdr.state == "disabled" and lg.transport != "Socket"]
    if on and off:
        # one log per node: GDR on some nodes and off on others
        why, fix = _gdr_reason(ctx, off[0])
        yield Hit(f"GPUDirect RDMA is on in {len(on)} log(s) and off in {len(off)} "
                  f"({', '.join(lg.source for lg in off[:3])}): the nodes without it slow every ring ({why})",
                  merge_evidence(cite_kind(off[0], "gdr_off", limit=2), cite(off[0], off[0].gdr.evidence, 2),
                                 cite_kind(on[0], "gdr_on", "gdr_channel_on", limit=1)),
                  fix=fix, subject="gdr-nodes")
    for log in logs:
        g = log.gdr
        if g.state != "partial" or log.transport == "Socket":
            continue
        parts = []
        if g.hcas_off:
            parts.append(f"HCAs without GDR: {', '.join(g.hcas_off[:6])}")
        if g.directions_off:
            parts.append(f"directions without GDR: {', '.join(g.directions_off)}")
        if g.ranks_off:
            parts.append(f"ranks without GDR: {', '.join(g.ranks_off[:6])}{' ...' if len(g.ranks_off) > 6 else ''}")
        if g.pairs_off and not parts:
            parts.append(f"{g.pairs_off} GPU/NIC pair(s) without GDR")
        why, fix = _gdr_reason(ctx, log)
        yield Hit("GPUDirect RDMA is on for some GPUs, NICs, directions or nodes only"
                  + (f" ({'; '.join(parts)})" if parts else "") + f": the slow ones bound every ring ({why})",
                  merge_evidence(cite_kind(log, "gdr_off", limit=2), cite_kind(log, "gdr_on", limit=1),
                                 cite(log, g.evidence, 2)),
                  fix=fix, subject="gdr")


@check("p2p_disabled_nvlink")
def p2p_disabled_nvlink(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("p2p_disabled_nvlink")
        if probs:
            yield Hit("NVML reports P2P disabled between NVLink-connected GPUs: a driver, NVLink or Fabric "
                      "Manager fault", cite_problems(log, probs, 2), subject="p2p")


# ---------------------------------------------------------------- link-health

# What to check per ibv_wc_status code, beyond the code's meaning (nccl_facts.md §6.5 HINTs).
COMPLETION_HINTS = {
    12: "check the MTU end to end (NIC, switch ports), the RoCE GID index (a RoCE v2 IPv4 GID), routing and "
        "rails (NCCL_CROSS_NIC=0 on rail-only fabrics), PFC/ECN on RoCE; a larger NCCL_IB_TIMEOUT only helps a "
        "congested but working fabric",
    4: "with GPUDirect RDMA this is usually PCIe ACS or the IOMMU redirecting peer traffic: disable ACS on the "
       "bridges (setpci / BIOS) or set the IOMMU to passthrough; NCCL_NET_GDR_LEVEL=LOC confirms it",
    5: "a flushed request follows an earlier failure: look for the first error, on this rank or its peer",
    13: "the peer stopped posting receives: it likely crashed or hung first",
    10: "the peer's buffer went away: its process likely exited first",
    9: "the peer rejected the request: MTU or size mismatch, or the remote QP is gone",
}


@check("ib_completion_error")
def ib_completion_error(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("ib_completion_error")
        by_code: dict = {}
        for p in probs:
            by_code.setdefault(p.code, []).append(p)
        for code, group in by_code.items():
            p = group[0]
            vendor = p.details.get("vendor_err")
            hint = COMPLETION_HINTS.get(code, "")
            # a flush (5) next to a real error is its consequence, not a second cause
            sev = "warning" if code == 5 and len(by_code) > 1 else None
            yield Hit(f"IB completion error {code if code is not None else '?'}"
                      + (f" ({p.code_name})" if p.code_name else "") + f", {len(group)} time(s): {p.meaning}"
                      + (f" [vendor err {vendor}]" if vendor else ""),
                      cite_problems(log, group, 3), fix=(hint[0].upper() + hint[1:] + ".") if hint else None,
                      severity=sev, subject=f"wc{code}")


@check("ib_port_error")
def ib_port_error(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("ib_async_event")
        if probs:
            events = sorted({p.details.get("event", "") for p in probs} - {""})
            yield Hit("the NIC reported asynchronous error events" + (f" ({', '.join(events[:3])})" if events else "")
                      + ": a port went down or the device faulted during the job",
                      cite_problems(log, probs, 3), subject="async")


# ---------------------------------------------------------------- settings / launch

@check("nccl_version_mismatch")
def nccl_version_mismatch(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("version_mismatch") + log.problems_of("message_truncated")
        versions = tuple(v for v in (log.nccl_versions or ()) if v)
        if probs or len(set(versions)) > 1:
            yield Hit("ranks run different NCCL versions" + (f" ({', '.join(sorted(set(versions)))})"
                                                            if len(set(versions)) > 1 else ""),
                      merge_evidence(cite_problems(log, probs, 2), cite_kind(log, "nccl_version", limit=3)),
                      subject="version")


@check("duplicate_gpu")
def duplicate_gpu(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("duplicate_gpu")
        if probs:
            yield Hit("two ranks use the same GPU", cite_problems(log, probs, 2), subject="gpu")


@check("shm_exhausted")
def shm_exhausted(ctx: Context):
    for log in ctx.logs:
        probs = log.problems_of("shm_error")
        if probs:
            yield Hit("NCCL could not create or map a /dev/shm segment: /dev/shm is too small (containers "
                      "default to 64 MB)", cite_problems(log, probs, 2), subject="shm")


# graph/search.cc and graph/xml.cc read NCCL_GRAPH_FILE / NCCL_TOPO_FILE; their other WARNs are graph searches
_GRAPH_SOURCES = ("graph/search.cc", "graph/xml.cc")
_TOPO_KINDS = ("topo_xml_error", "no_local_path_gpu_net")


# WARNs only a topology file NCCL read can cause: it parses XML only from files, and it writes the CPU
# node's attributes itself when it detects the machine (a missing node attribute of a NIC may be its own)
_FILE_ONLY = ("XML Parse", "XML Topology has wrong version", "Could not open XML topology file", "XML Mismatch",
              "Attribute arch of node cpu", "Attribute vendor of node cpu", "Attribute familyid of node cpu",
              "Attribute modelid of node cpu", "Attribute affinity of node cpu", "Attribute numaid of node cpu")


def _unnamed_topology_file(ctx: Context, log, probs) -> Hit:
    """An XML error with no NCCL_TOPO_FILE / NCCL_GRAPH_FILE in the evidence: NCCL read a file it found itself or
    one a net plugin named for it."""
    aws = bool((log.cloud or {}).get("aws")) or bool(log.plugin.ofi_version or log.problems_of("ofi_error"))
    where = ("aws-ofi-nccl's static topology for the instance type (plugins before 1.11 set NCCL_TOPO_FILE "
             "themselves, to a file that breaks when the job uses a subset of the GPUs or another instance type)"
             if aws else
             "a net plugin's static topology (aws-ofi-nccl before 1.11 sets NCCL_TOPO_FILE itself), "
             "/var/run/nvidia-topologyd/virtualTopology.xml, which NCCL reads by default (Azure and other VM "
             "images), or an NCCL_TOPO_FILE from /etc/nccl.conf or ~/.nccl.conf")
    return Hit(f"NCCL could not use the topology XML it read (\"{probs[0].message}\"): no NCCL_TOPO_FILE is in the "
               f"evidence, so it came from {where}; such a file describes one machine type and fails on others",
               cite_problems(log, probs, 3),
               fix=("Upgrade aws-ofi-nccl (1.11 and later generate the topology instead of shipping a static file), or "
                    "point NCCL_TOPO_FILE at a file made for this machine. " if aws else
                    "Find the file NCCL read (NCCL_DEBUG_SUBSYS=INIT,GRAPH prints it; check the plugin's version, "
                    "/var/run/nvidia-topologyd/ and nccl.conf files) and remove or replace it. ")
                   + "NCCL_TOPO_DUMP_FILE=/tmp/topo.xml writes what NCCL detects on this machine.",
               subject="topology-file")


@check("topology_file_mismatch")
def topology_file_mismatch(ctx: Context):
    """NCCL_GRAPH_FILE / NCCL_TOPO_FILE describe another machine: NCCL cannot import or match them."""
    for log in ctx.logs:
        probs = [p for p in log.problems if p.kind in _TOPO_KINDS
                 or (p.kind == "warn" and (p.source_file or "").startswith(_GRAPH_SOURCES))]
        if not probs:
            continue
        which = next((p.details.get("file") for p in probs if p.details.get("file")), "")
        order = ("NCCL_TOPO_FILE", "NCCL_GRAPH_FILE") if which == "topology" else ("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE")
        files = [(n, env_value(ctx, n)) for n in order if env_value(ctx, n)]
        if not files:
            xml = [p for p in probs if p.kind == "topo_xml_error" and p.message.startswith(_FILE_ONLY)]
            if xml:
                yield _unnamed_topology_file(ctx, log, xml)
            continue
        names = [n for n, _ in files]
        yield Hit(f"NCCL could not use {' and '.join(f'{n}={v}' for n, v in files)} (\"{probs[0].message}\"): such "
                  "files describe the GPUs and NICs (bus IDs, device numbers, channels) of the machine they were made "
                  "for, and fail on one with other or fewer GPUs/NICs",
                  merge_evidence(cite_problems(log, probs, 2), *(env_evidence(ctx, n) for n in names)),
                  fix=f"Unset {' and '.join(names)} (or point {'them' if len(names) > 1 else 'it'} at a file made "
                      "for this machine type); images and VM templates set these in /etc/nccl.conf or ~/.nccl.conf, "
                      "so look there too.",
                  env_patch={n: None for n in names}, subject=names[0])
