"""Evidence checks: what NCCL logs show about a job, for rules the node packs own.

The `ev_*` functions here are the log side of rules in rules/network.yaml, topology.yaml and
env_node.yaml (no-rdma-devices, net-plugin-missing, socket-ifname-*, fabric-manager,
nic-count-limited): the rule fires from whichever side has facts. The rules only the evidence
can decide live in rules/evidence.yaml; their checks are in evidence_log and evidence_failures
(NCCL logs) and evidence_tests (nccl-tests tables). Last, unexplained_nccl_warning, an engine
fallback: the log's first NCCL error when no other rule's finding explains anything in it.
"""

from __future__ import annotations

from ncdoc.checks.evidence_common import (cite_cuda, cite_kind, cite_problems, cuda_errors, env_evidence, env_value,
                                          local_gpus, log_net_devices, merge_evidence, multi_node, node_evidence)
from ncdoc.engine.rules import Context, check
from ncdoc.evidence.interfaces import VIRTUAL_KINDS
from ncdoc.findings import Evidence, Hit, Skip

_CLOUD_PLUGINS = {
    "aws": "AWS EFA needs the aws-ofi-nccl plugin (libnccl-net.so / libnccl-net-ofi.so) on LD_LIBRARY_PATH",
    "gcp": "GCP TCPX/TCPXO needs Google's NCCL net plugin (libnccl-net.so from the nccl-plugin-gpudirecttcpx image)",
}


def _internal(name: str | None) -> bool:
    return (name or "").split(" ")[0].lower() in ("ib", "socket", "")


# ---------------------------------------------------------------- RDMA devices

_NO_HCA_LINES = (r"\b0 HCAs? found|No IB devices found|Failed to get IB devices list",
                 r"no userspace device-specific driver|couldn't (?:open|find) device")


def _no_rdma_in_listing(ctx: Context):
    """ibv_devinfo / ibstat output that lists no usable device."""
    for ne in node_evidence(ctx):
        if ne.kind != "ibv_devinfo" or ne.hcas_state != "absent":
            continue
        kernel_has = "userspace" in ne.hcas_reason
        yield Hit(f"{ne.tool or 'ibv_devinfo'} lists no usable RDMA device: {ne.hcas_reason or 'none found'}"
                  + ("; the kernel has verbs devices the userspace cannot use, so NCCL falls back to TCP sockets"
                     if kernel_has else "; NCCL will use TCP sockets between nodes"),
                  ne.grep(*_NO_HCA_LINES) or (Evidence(ne.hcas_reason or "no RDMA device", ne.source),),
                  fix=("Install the rdma-core userspace providers matching the host driver (ibverbs-providers / "
                       "libmlx5, or MOFED userspace) in the image and pass every /dev/infiniband device "
                       "(--device=/dev/infiniband, --cap-add=IPC_LOCK)." if kernel_has else None),
                  severity="error" if kernel_has else "warning", subject="rdma")


@check("ev_no_rdma_devices")
def ev_no_rdma_devices(ctx: Context):
    """NCCL found no usable verbs device: 'NET/IB : No device found', open failures, no libibverbs;
    or ibv_devinfo lists none."""
    if not ctx.logs and not any(ne.kind == "ibv_devinfo" for ne in node_evidence(ctx)):
        raise Skip("no NCCL log or ibv_devinfo output given")
    yield from _no_rdma_in_listing(ctx)
    for log in ctx.logs:
        if not _internal(log.transport):
            continue        # an external plugin (EFA, TCPX) carries the traffic; IB finding none is normal
        opened = log.problems_of("ibv_open_device_failed")
        no_lib = log.problems_of("ibverbs_missing")
        if not (log.ib_no_device or opened or no_lib):
            continue
        if log.transport == "IB" and not log.transports.get("Socket"):
            continue        # some lines said no device, yet every rank ended on IB
        why = []
        if no_lib:
            why.append("libibverbs could not be loaded (no rdma-core userspace in this image)")
        if opened:
            devs = sorted({p.details.get("device") for p in opened if p.details.get("device")})
            why.append("verbs device(s) are listed but cannot be opened"
                       + (f" ({', '.join(devs)})" if devs else "")
                       + ": the container lacks /dev/infiniband or the userspace provider does not match the driver")
        if log.ib_no_device and not why:
            why.append("no IB/RoCE device is visible to the process")
        hosts = log.ib_no_device_hosts
        where = f" on {len(hosts)} host(s)" if len(hosts) > 1 else ""
        ev = merge_evidence(cite_problems(log, no_lib + opened, 2), cite_kind(log, "ib_no_device", limit=2))
        if (log.cloud or {}).get("aws") and not opened and not no_lib:
            # EFA is not a verbs device NCCL's IB transport uses: on AWS the plugin is the way to RDMA
            yield Hit(f"NCCL's IB transport found no device{where}, as expected on AWS: EFA is reached only "
                      "through the aws-ofi-nccl plugin", ev,
                      fix="Use EFA-enabled instances with aws-ofi-nccl installed (see net-plugin-missing).",
                      severity="warning", subject="rdma")
            continue
        if multi_node(ctx) is False:
            yield Hit(f"NCCL found no usable RDMA device{where}: " + "; ".join(why)
                      + "; this job runs on one node, where NCCL does not use the network", ev,
                      severity="info", subject="rdma")
            continue
        yield Hit(f"NCCL found no usable RDMA device{where}: " + "; ".join(why), ev,
                  fix=("Run with the RDMA devices and userspace: docker run --device=/dev/infiniband "
                       "--cap-add=IPC_LOCK (or the RDMA device plugin on Kubernetes), an image with rdma-core / "
                       "ibverbs-providers matching the host driver; check `ibv_devinfo` inside the container."),
                  severity="error" if log.transport == "Socket" else "warning", subject="rdma")


@check("ev_net_plugin_missing")
def ev_net_plugin_missing(ctx: Context):
    """A net plugin the job needs was not loaded: named but not found, or RDMA fabric without its plugin."""
    for log in ctx.logs:
        plugin = log.plugin
        wanted = env_value(ctx, "NCCL_NET_PLUGIN") or plugin.requested
        if wanted and wanted.lower() != "none" and not plugin.loaded and plugin.missing:
            yield Hit(f"NCCL_NET_PLUGIN names {wanted!r} but NCCL could not load it and used its internal "
                      f"transports ({log.transport or 'unknown'})",
                      merge_evidence(env_evidence(ctx, "NCCL_NET_PLUGIN"), cite_kind(log, "plugin_missing", "plugin")),
                      fix="Put the plugin's directory on LD_LIBRARY_PATH (or give NCCL_NET_PLUGIN its full path).",
                      severity="error", subject=wanted)
            continue
        failed = log.problems_of("net_plugin_init_failed")
        net = env_value(ctx, "NCCL_NET")
        if failed:
            # NCCL tries IB, then Socket, unless NCCL_NET names one: IB failing with Socket never tried
            # means the job's NCCL_NET (not always printed) left NCCL nothing else
            socket_tried = "Socket" in plugin.initialized or any(i.role == "net" for i in log.socket_ifaces)
            only_ib = not net and log.ib_no_device and not socket_tried
            if net and net.lower() == "ib" and log.ib_no_device:
                why = (f": NCCL_NET={net} limits NCCL to its IB transport, which found no device, so NCCL never tried "
                       "its Socket transport")
            elif net:
                why = f": NCCL_NET={net} names a network no loaded plugin provides"
            elif only_ib:
                why = (": IB found no device and NCCL never tried its Socket transport, so something limits it "
                       "to IB: NCCL_NET=IB in the job's environment (NCCL does not always print it)")
            else:
                why = ": no net plugin loaded and neither IB nor sockets found a usable device"
            yield Hit("no network transport could start ('Failed to initialize any NET plugin')" + why,
                      merge_evidence(env_evidence(ctx, "NCCL_NET"), cite_problems(log, failed, 2),
                                     cite_kind(log, "ib_no_device", limit=1)),
                      fix="Install the plugin NCCL_NET asks for, or unset NCCL_NET." if net else
                          "Unset NCCL_NET (NCCL then falls back to sockets) or make the RDMA devices visible to "
                          "the job (ibv_devinfo must list them)." if only_ib else
                          "Check that the RDMA devices and an IP interface are visible to the job (ibv_devinfo, "
                          "ip addr), and that NCCL_IB_HCA / NCCL_SOCKET_IFNAME match them.",
                      severity="error", subject="NCCL_NET")
            continue
        if log.transport != "Socket" or not plugin.missing or plugin.loaded or not log.ib_no_device:
            continue
        cloud = log.cloud or {}
        which = next((k for k in _CLOUD_PLUGINS if cloud.get(k)), None)
        msg = ("no external net plugin was loaded and NCCL found no IB/RoCE device, so it uses TCP sockets")
        if which:
            msg += f": this looks like {which.upper()}, where {_CLOUD_PLUGINS[which]}"
        else:
            msg += ": if the fabric is AWS EFA, GCP TCPX/TCPXO or HPE Slingshot, NCCL needs that fabric's plugin"
        yield Hit(msg, cite_kind(log, "plugin_missing", "ib_no_device", "transport", limit=3),
                  fix="Install the fabric's NCCL net plugin (aws-ofi-nccl for EFA) and check the log for "
                      "'NET/Plugin: Loaded net plugin'.",
                  severity="warning" if which else "info", subject="net-plugin")


# ---------------------------------------------------------------- socket interfaces

def _ifaces(ctx: Context, classification: str):
    for log in ctx.logs:
        for s in log.socket_ifaces:
            if s.classification == classification:
                yield log, s


_ROLE = {"bootstrap": "bootstraps over", "oob": "sets up IB connections over", "net": "sends data over",
         "candidate": "lists"}


@check("ev_socket_ifname_loopback")
def ev_socket_ifname_loopback(ctx: Context):
    multi = multi_node(ctx)
    if multi is False:
        return              # one node: loopback is fine
    for log, s in _ifaces(ctx, "loopback"):
        if s.role == "candidate":
            continue            # listed as available is not used
        only = s.role == "net" and all(o.classification == "loopback" for o in log.socket_ifaces if o.role == "net")
        hard = multi and (s.role in ("bootstrap", "oob") or only)
        yield Hit(f"NCCL {_ROLE.get(s.role, 'uses')} the loopback interface {s.name}"
                  + (f" ({s.address})" if s.address else "")
                  + (" in a job across nodes: other nodes cannot reach it" if multi else
                     ": other nodes cannot reach it if this job spans nodes"),
                  cite_problems(log, [s]),
                  fix="Set NCCL_SOCKET_IFNAME to the interface that routes between the nodes (the same name on "
                      "every node), e.g. NCCL_SOCKET_IFNAME=eth0, or exclude loopback with NCCL_SOCKET_IFNAME=^lo.",
                  severity="error" if hard else "warning", subject=f"{s.name}:{s.role}")


@check("ev_socket_ifname_virtual")
def ev_socket_ifname_virtual(ctx: Context):
    if multi_node(ctx) is False:
        return
    for log, s in _ifaces(ctx, "virtual"):
        if s.role == "candidate":
            continue
        exclude = ",".join(dict.fromkeys([s.name.rstrip("0123456789"), "docker", "lo", "virbr"]))
        yield Hit(f"NCCL {_ROLE.get(s.role, 'uses')} {s.name}"
                  + (f" ({s.address})" if s.address else "")
                  + (f", a {s.kind} interface local to its host" if s.kind in VIRTUAL_KINDS else
                     ", an address on a container or VM bridge network (Docker's 172.17.0.0/16, libvirt's "
                     "192.168.122.0/24) that is private to its host")
                  + ": traffic to other nodes over it fails or crawls",
                  cite_problems(log, [s]),
                  fix="Set NCCL_SOCKET_IFNAME to the physical interface between the nodes (or exclude bridges: "
                      f"NCCL_SOCKET_IFNAME=^{exclude})." if s.kind in VIRTUAL_KINDS else
                      "Run the container on the host's network (docker run --network host; hostNetwork: true on "
                      "Kubernetes) or give it a routable interface (macvlan, SR-IOV), then point "
                      "NCCL_SOCKET_IFNAME at it.",
                  severity="warning", subject=f"{s.name}:{s.role}")


# ---------------------------------------------------------------- fabric manager

@check("ev_fabric_manager")
def ev_fabric_manager(ctx: Context):
    """CUDA 802 (system not ready) or 999 on the NVLS/NVSwitch path, 401 (illegal state) binding NVLS multicast
    memory, or 1 (invalid argument) from NVLS setup: the Fabric Manager state. Read from NCCL logs and from
    nccl-tests output alike. (CUDA 2, out of memory, in NVLS setup is nvls-multicast-exhausted: resources used
    up, not the Fabric Manager.)"""
    nvswitch = any(getattr(log, "nvswitch_context", ()) for log in ctx.logs)
    bad, restarted = [], []
    for e in cuda_errors(ctx):
        if e.code == 802:
            bad.append(e)
        elif e.code == 999 and (e.nvls or nvswitch):
            bad.append(e)
        elif e.code == 401 and e.nvls:
            # cuMulticastBindMem refused in the present state: the GPUs' fabric registration went
            # stale (Fabric Manager restarted without a GPU reset) or the NVSwitches are in a bad state
            bad.append(e)
        elif e.code == 1 and e.nvls:
            # maintainers' answer in NVIDIA/nccl#976, #1338, #1488: the multicast objects NCCL maps
            # went stale when the Fabric Manager restarted under GPUs that were not reset
            restarted.append(e)
    if restarted:
        yield Hit("CUDA error 1 ('invalid argument') in NCCL's NVLS (NVLink SHARP) setup: almost always the "
                  "NVSwitch Fabric Manager was restarted while processes held NVLS resources on the GPUs, and the "
                  "GPUs were not reset since (NVIDIA/nccl#976, #1488)",
                  cite_cuda(restarted),
                  fix="Reset the GPUs (`nvidia-smi -r` with no process on them) or reboot the node, then check "
                      "`nvidia-smi -q | grep -A2 Fabric` shows the fabric Completed/Success; to get going "
                      "meanwhile, NCCL_NVLS_ENABLE=0 runs without NVLS (slower all-reduce on NVSwitch systems).",
                  severity="error", subject="fabric-manager-restart")
    if not bad:
        return
    codes = sorted({e.code for e in bad})
    bind = any(e.code == 401 for e in bad)
    by = " and ".join(dict.fromkeys("nccl-tests" if e.origin == "tests" else "NCCL" for e in bad))
    where = ("in NCCL's NVLS (NVLink SHARP) setup" if any(e.nvls for e in bad) else
             "(system not yet initialized)" if codes == [802] else "on an NVSwitch system")
    yield Hit(f"CUDA error {'/'.join(map(str, codes))} {where}, reported by {by}"
              + (" (binding NVLS multicast memory is not allowed in the GPU's present state)" if bind else "")
              + ": the NVSwitch Fabric Manager is not running, not finished, or was restarted without a GPU "
                "reset, or the NVSwitches are in a bad state",
              cite_cuda(bad),
              fix="Check `systemctl status nvidia-fabricmanager` (enable it: `systemctl enable --now "
                  "nvidia-fabricmanager`) and `nvidia-smi -q | grep -A2 Fabric`; after a Fabric Manager restart reset "
                  "the GPUs (or reboot). NCCL_NVLS_ENABLE=0 gets the job going without NVLS (slower all-reduce on "
                  "NVSwitch systems) but only hides the fault.",
              severity="error", subject="fabric-manager")


# ---------------------------------------------------------------- NIC count

@check("ev_nic_count_limited")
def ev_nic_count_limited(ctx: Context):
    """NCCL uses fewer NICs than there are GPUs on a node."""
    logs = ctx.logs
    devices = log_net_devices(ctx)
    gpus = local_gpus(ctx)
    if not devices or not gpus or multi_node(ctx) is False:
        return
    nics = len(devices)
    if nics >= gpus:
        return
    hca = env_value(ctx, "NCCL_IB_HCA")
    log = next(lg for lg in logs if lg.net_devices)
    ev = merge_evidence(env_evidence(ctx, "NCCL_IB_HCA"), cite_kind(log, "net_devices", "comm_summary", limit=2))
    names = ", ".join(d.name for d in devices)
    if hca:
        yield Hit(f"NCCL_IB_HCA={hca} leaves NCCL {nics} NIC(s) ({names}) for {gpus} GPUs per node: every "
                  f"GPU's traffic between nodes shares {'it' if nics == 1 else 'them'}, at most "
                  f"{nics}/{gpus} of the bandwidth one NIC per GPU would give",
                  ev, fix="List every rail NIC in NCCL_IB_HCA (one per GPU, see `nvidia-smi topo -m`), or unset it.",
                  severity="warning", subject="NCCL_IB_HCA")
    else:
        yield Hit(f"NCCL uses {nics} NIC(s) ({names}) for {gpus} GPUs per node: the network, not NVLink, bounds "
                  "bandwidth between nodes", ev, severity="info", subject="nics")


# ---------------------------------------------------------------- what no other rule explains
# A fallback (rules/evidence.yaml: fallback: true): it runs after every other rule and reads their
# findings, so an error line another rule explains gets no second, vaguer finding.

_ERROR_LEVELS = ("WARN", "last_error", "framework")
# What a rank reports when another rank (or its own proxy) failed first: cited only when nothing else is.
_CONSEQUENCE_TEXT = ("Connection closed by remote peer", "Socket recv failed", "Connection closed by localRank",
                     "remote process exited or there was a network error", "ncclRemoteError")


def _consequence(p) -> bool:
    return (p.kind == "socket_closed_by_peer" or (p.kind == "nccl_error" and p.code == 6)
            or any(t in p.message for t in _CONSEQUENCE_TEXT))


def _first_cause(errors: list):
    """The error line to cite: one naming its own failure before one that only says a peer went away, before a
    bare ncclResult_t ("internal error"); a WARN before the framework's copy of it."""
    def rank(i: int) -> tuple:
        p = errors[i]
        return p.kind == "nccl_error", _consequence(p), p.level != "WARN", i
    return errors[min(range(len(errors)), key=rank)] if errors else None


def _explained(ctx: Context, log) -> bool:
    """Whether another rule reports at warning or error on a line of this log."""
    source = getattr(log, "source", "") or ""
    return any(f.severity in ("error", "warning") and any(e.source == source for e in f.evidence)
               for f in ctx.findings)


@check("unexplained_nccl_warning")
def unexplained_nccl_warning(ctx: Context):
    """NCCL warned or returned an error, and no other rule explains anything in the log (a fallback:
    ctx.findings holds what the other rules reported)."""
    from ncdoc.evidence.nccl_log_patterns import RESULT_NAME     # its block patterns compile on import
    for log in ctx.logs:
        errors = [p for p in log.problems if p.level in _ERROR_LEVELS]
        # result names a framework printed; "-> N" traces alone are often NCCL trying something and moving on
        results = sorted({m.group(1) for e in (log.evidence or {}).get("nccl_result", ())
                          for m in [RESULT_NAME.search(e.text)] if m})
        if not (errors or results) or _explained(ctx, log):
            continue
        first = _first_cause(errors)
        if first is not None:
            where = f" at {first.source_file}" if first.source_file else ""
            msg = (f"NCCL reported an error{where} that no rule explains: \"{first.message}\""
                   + (f" ({first.meaning})" if first.kind != "warn" and first.meaning not in first.message else "")
                   + (f"; {len(errors)} error line(s) in all" if len(errors) > 1 else "")
                   + (f"; calls returned {', '.join(results)}" if results else ""))
            ev = merge_evidence(cite_problems(log, [first]), cite_problems(log, errors, 3),
                                cite_kind(log, "nccl_result", limit=1))
        else:
            msg = (f"NCCL calls returned {', '.join(results)} and no rule explains it; the log has no NCCL WARN "
                   "saying why")
            ev = cite_kind(log, "nccl_result", limit=3)
        info = bool(log.transport or log.env or log.comms or log.nccl_result_sources)
        fix = ("Read the INFO lines just before that line and the 'file.cc:N -> code' traces after it, on this rank "
               "and on its peers (the first rank to fail usually names the cause), and search NVIDIA/nccl issues for "
               "the message.")
        if not info:
            fix += (" This log has no NCCL INFO lines: rerun with NCCL_DEBUG=INFO "
                    "NCCL_DEBUG_SUBSYS=INIT,NET,ENV,GRAPH to see what NCCL did before it failed.")
        yield Hit(msg, ev, fix=fix, subject=(first.source_file or first.kind) if first else "results")
