"""Checks over NCCL logs for failures: TCP bootstrap/socket reachability (and the link-local or
container interfaces behind it), GPU memory, NVLS multicast resources, EFA (aws-ofi-nccl)
reachability, and topology detection from sysfs.

Each reads the problems the log parser classified (ncdoc.evidence.nccl_log_errors) and quotes their lines.
"""

from __future__ import annotations

from ncdoc.checks.evidence_common import (cite_cuda, cite_kind, cite_problems, cuda_errors, env_evidence, env_value,
                                          in_nvls, merge_evidence, multi_node)
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Hit
from ncdoc.nccl.parse import version_cmp
from ncdoc.readers.numbers import is_digits

# ---------------------------------------------------------------- TCP reachability

_SOCKET_PROBLEMS = ("socket_connect_error", "socket_no_listen_interface", "socket_no_interface",
                    "bootstrap_no_interface")
_USE = {"bootstrap": "its bootstrap", "oob": "IB connection setup", "net": "data"}


def _link_local(log) -> dict[tuple[str, str | None], list]:
    """The link-local interfaces NCCL put to use (bootstrap, IB OOB, socket transport), by (name, address)."""
    seen: dict[tuple[str, str | None], list] = {}
    for s in log.socket_ifaces:
        if s.classification == "link_local" and s.role != "candidate":
            seen.setdefault((s.name, s.address), []).append(s)
    return seen


def _bootstrap_trace_failed(log) -> bool:
    """A non-zero ncclResult traced through bootstrap.cc: the bootstrap failed even when no WARN says so."""
    return bool((getattr(log, "evidence", None) or {}).get("bootstrap_trace"))


def _oob_note(log) -> str:
    """Which interface the bootstrap / IB OOB used, and whether it is IPoIB (often unreachable from containers)."""
    for s in log.socket_ifaces:
        if s.role in ("oob", "bootstrap"):
            ipoib = s.name.startswith("ib") or s.kind == "ipoib"
            return (f"; the {'IB OOB' if s.role == 'oob' else 'bootstrap'} uses {s.name}"
                    + (f" ({s.address})" if s.address else "")
                    + (", an IPoIB interface containers often cannot reach" if ipoib else ""))
    return ""


def _host_of(address: str) -> str:
    """"10.0.0.1" of "10.0.0.1<52822>", "fe80::1%eth0" of "[fe80::1%eth0]<52822>"."""
    return address.split("<", 1)[0].strip("[]")


def _peer_address_note(addrs: list[str], multi: bool | None) -> tuple[str, str] | None:
    """What the address a rank tried to reach says about the cause: a loopback address, an IPv6 link-local one."""
    hosts = [_host_of(a) for a in addrs]
    loop = [h for h in hosts if h.startswith("127.") or h in ("::1", "localhost")]
    if loop and multi is not False:
        return (f"the address connected to, {loop[0]}, is a loopback address: the rank that published it (the "
                "bootstrap root, MASTER_ADDR or NCCL_COMM_ID) resolved its own name to 127.0.x.x, so every other node "
                "connects to itself",
                "Make the root's hostname resolve to its routable address on every node (an /etc/hosts line mapping "
                "the hostname to 127.0.1.1 does this), or set MASTER_ADDR / NCCL_COMM_ID to that address and "
                "NCCL_SOCKET_IFNAME to its interface.")
    ll = [h for h in hosts if h.lower().startswith("fe8") or h.lower().startswith("fe9") or
          h.lower().startswith("fea") or h.lower().startswith("feb") or h.startswith("169.254.")]
    if ll:
        return (f"the address connected to, {ll[0]}, is link-local: it is not routed, and an IPv6 one only works with "
                "the interface scope other nodes do not have",
                "Set NCCL_SOCKET_FAMILY=AF_INET (or NCCL_SOCKET_IFNAME to an interface with a routable address) so "
                "ranks publish a routable bootstrap address.")
    return None


@check("bootstrap_unreachable")
def bootstrap_unreachable(ctx: Context):
    """Ranks cannot open TCP connections to each other (bootstrap or socket transport)."""
    for log in ctx.logs:
        problems = [p for k in _SOCKET_PROBLEMS for p in log.problems_of(k)]
        if problems and _link_local(log) and all(p.kind == "socket_connect_error" for p in problems) \
                and multi_node(ctx) is not False:
            continue        # socket-address-link-local names the cause and quotes these lines
        traced = _bootstrap_trace_failed(log)
        if not problems and not traced:
            continue
        ifname = env_value(ctx, "NCCL_SOCKET_IFNAME")
        fix = ("Set NCCL_SOCKET_IFNAME to the interface whose address the other nodes can reach (same name on every "
               "node) and open the ports between nodes; 'Connection refused' also means the peer process is not "
               "up or died - check its log first.")
        if not problems:
            # no WARN names it, but the error return was traced up through bootstrap.cc
            msg = "the NCCL bootstrap failed (an error returned through bootstrap.cc)" + _oob_note(log)
            fix = ("Set NCCL_SOCKET_IFNAME to the Ethernet NIC the nodes reach each other on (not IPoIB or a "
                   "container bridge), e.g. NCCL_SOCKET_IFNAME=eth0, and rerun with NCCL_DEBUG=INFO "
                   "NCCL_DEBUG_SUBSYS=INIT,NET to see the failing call.")
            if ifname:
                msg += f"; NCCL_SOCKET_IFNAME={ifname}"
            yield Hit(msg, merge_evidence(cite_kind(log, "bootstrap_trace", "socket_trace", limit=2),
                                          cite_kind(log, "net_devices", "bootstrap", limit=2),
                                          env_evidence(ctx, "NCCL_SOCKET_IFNAME")),
                      fix=fix, subject="bootstrap")
            continue
        first = problems[0]
        addrs = sorted({p.details.get("address") for p in problems if p.details.get("address")})
        codes = sorted({p.code_name for p in problems if p.code_name})
        what = first.meaning or first.message
        msg = ("ranks cannot connect to each other over TCP"
               + (f" (to {', '.join(addrs[:3])})" if addrs else "")
               + (f" [{', '.join(codes)}]" if codes else "") + f": {what}")
        peer = _peer_address_note(addrs, multi_node(ctx))
        if peer:
            msg += f"; {peer[0]}"
            fix = peer[1]
        if all(p.kind == "bootstrap_no_interface" for p in problems):
            # nothing was tried: no interface matched, so there was no address to connect from
            msg = f"NCCL found no socket interface to use: {what}"
            fix = ("Set NCCL_SOCKET_IFNAME to an interface that exists and is up on every node (`ip -br addr`; names "
                   "differ between nodes and images: a prefix such as `eth` or an exclusion such as `^docker,lo` is "
                   "safer), or unset it.")
            if ifname:
                msg += f"; NCCL_SOCKET_IFNAME={ifname} matches no usable interface here"
        elif ifname:
            msg += f"; NCCL_SOCKET_IFNAME={ifname}"
        yield Hit(msg, merge_evidence(cite_problems(log, problems, 3), cite_kind(log, "bootstrap", limit=1),
                                      cite_kind(log, "bootstrap_trace", limit=1),
                                      env_evidence(ctx, "NCCL_SOCKET_IFNAME")),
                  fix=fix, subject="bootstrap")


@check("socket_address_link_local")
def socket_address_link_local(ctx: Context):
    """NCCL's socket traffic uses a link-local address (169.254/16, fe80::/10); with connect failures
    in the same log, that is the likely cause and the finding is an error quoting them."""
    multi = multi_node(ctx)
    for log in ctx.logs:
        if multi is False:
            continue
        failed = log.problems_of("socket_connect_error")
        for (name, address), group in _link_local(log).items():
            uses = " and ".join(dict.fromkeys(_USE.get(s.role, s.role) for s in group))
            msg = (f"NCCL uses {name} with the link-local address {address} for {uses}: link-local "
                   "addresses are not routed, so only nodes on the same segment can connect")
            # between nodes on the socket transport, data over an unrouted address hangs or fails
            carries_data = multi is True and log.transport == "Socket" and any(s.role == "net" for s in group)
            if failed:
                msg += f"; the log shows {len(failed)} failed TCP connect attempt(s)"
            elif carries_data:
                msg += "; this multi-node job sends its data over sockets, so ranks on other segments hang or fail"
            yield Hit(msg, merge_evidence(cite_problems(log, failed, 2), cite_problems(log, group, 2)),
                      fix="Give the interface a routable address, or set NCCL_SOCKET_IFNAME to one that has one "
                          "(e.g. NCCL_SOCKET_IFNAME=eth0, or =^veth,docker,lo to exclude container interfaces; "
                          "NCCL_SOCKET_FAMILY=AF_INET skips IPv6 link-local addresses).",
                      severity="error" if failed or carries_data else None, subject=name)


# ---------------------------------------------------------------- GPU memory


def _oom(log) -> list:
    """CUDA out-of-memory lines of NCCL's own allocations (alloc.h, p2p/proxy buffers), NVLS setup excepted."""
    return [p for p in log.problems_of("cuda_alloc_failed") if not in_nvls(log, p)]


def _where(p) -> str:
    """"node7 GPU 3" from a problem's host:pid:dev rank key."""
    parts = (p.rank or "").split(":")
    return f"{p.host} GPU {parts[2]}" if len(parts) == 3 else p.host


def _size(n: int) -> str:
    for unit, step in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= step:
            return f"{n / step:g} {unit}"
    return f"{n} bytes"


@check("gpu_out_of_memory")
def gpu_out_of_memory(ctx: Context):
    """The GPU ran out of memory while NCCL (or nccl-tests) allocated buffers (cudaMalloc/cuMemCreate)."""
    oom = [e for e in cuda_errors(ctx) if e.code == 2 and not e.nvls]
    allocs = [(log, p) for log in ctx.logs for p in _oom(log)]
    if not oom and not allocs:
        return
    sizes = sorted({int(p.details["bytes"]) for _, p in allocs if is_digits(str(p.details.get("bytes", "")))})
    ranks = sorted({_where(p) for _, p in allocs if p.host} | {
        f"{e.host}" for e in oom if e.host and e.origin == "tests"})
    peers_gone = [p for log in ctx.logs for p in log.problems_of("socket_closed_by_peer")]
    by_tests = oom and all(e.origin == "tests" for e in oom) and not allocs
    msg = ("the GPU ran out of memory while " + ("nccl-tests allocated its buffers" if by_tests else
                                                 "NCCL allocated its buffers")
           + (f" ({', '.join(_size(s) for s in sizes[:3])} requested)" if sizes else "")
           + (f" on {', '.join(ranks[:3])}" if ranks else "")
           + (": the message sizes asked for (-e/maxBytes, times the buffers each rank holds) do not fit beside "
              "what else holds the GPU's memory" if by_tests else
              ": the framework or other processes hold the GPU's memory, so NCCL cannot set up its "
              "connections and init (or the first collective) fails"))
    if peers_gone:
        msg += ("; the 'Connection closed by remote peer' lines on other ranks follow from it (that rank's "
                "process failed first)")
    ev = merge_evidence(cite_cuda(oom, 3), *(cite_problems(log, [p], 1) for log, p in allocs[:3]),
                        env_evidence(ctx, "NCCL_BUFFSIZE"))
    yield Hit(msg, ev,
              fix=("Lower the largest size (-e) or the GPUs per process, and check `nvidia-smi` for other processes "
                   "on the GPUs." if by_tests else
                   "Leave GPU memory for NCCL: cap the framework's share (PyTorch: smaller batches or "
                   "torch.cuda.set_per_process_memory_fraction, and create process groups before the caching "
                   "allocator fills the GPU; vLLM: lower gpu_memory_utilization), check `nvidia-smi` for other "
                   "processes on the GPU, lower NCCL_BUFFSIZE or the channel count (NCCL_MAX_NCHANNELS), and "
                   "destroy communicators you no longer use (ncclCommDestroy / destroy_process_group)."),
              subject="gpu-memory")


@check("nvls_multicast_exhausted")
def nvls_multicast_exhausted(ctx: Context):
    """CUDA out of memory in NCCL's NVLS setup: the NVSwitch multicast resources are used up."""
    probs = [e for e in cuda_errors(ctx) if e.code == 2 and e.nvls]
    if not probs:
        return
    bind = any("ulticast" in e.message for e in probs)
    what = ("binding NVLS (NVLink SHARP) multicast memory failed with CUDA error 2 'out of memory'" if bind else
            "NCCL's NVLS (NVLink SHARP) setup ran out of memory (CUDA error 2)")
    yield Hit(f"{what}: the NVSwitches' multicast resources are used up - every communicator that uses NVLS "
              "holds multicast objects and buffers, and a job creating many communicators (one per "
              "tensor/pipeline/FSDP group) exhausts them" + ("" if bind else ", unless GPU memory itself is "
                                                             "full")
              + "; this is not a Fabric Manager fault",
              merge_evidence(cite_cuda(probs, 2), env_evidence(ctx, "NCCL_NVLS_ENABLE"),
                             env_evidence(ctx, "NCCL_NVLS_CHUNKSIZE")),
              fix="Create fewer communicators and destroy the ones you no longer use (ncclCommDestroy / "
                  "destroy_process_group), or run without NVLS (NCCL_NVLS_ENABLE=0, slower all-reduce on "
                  "NVSwitch systems); a smaller NCCL_NVLS_CHUNKSIZE (default 128 KiB) shrinks each NVLS buffer.",
              env_patch={"NCCL_NVLS_ENABLE": "0"}, subject="nvls-multicast")


# ---------------------------------------------------------------- EFA (aws-ofi-nccl)

_UNREACHABLE = ("unreach", "unresponsive", "undeliverable", "handshake", "destination", "address")


@check("efa_peer_unreachable")
def efa_peer_unreachable(ctx: Context):
    """aws-ofi-nccl could not add a peer's EFA address, or EFA transfers completed with an error."""
    for log in ctx.logs:
        av = log.problems_of("ofi_av_insert_failed")
        cq = log.problems_of("ofi_completion_error")
        if not (av or cq):
            continue
        parts = []
        if av:
            devs = sorted({p.details.get("device") for p in av if p.details.get("device")})
            parts.append("aws-ofi-nccl could not insert the peer's address into the EFA address vector"
                         + (f" (device {', '.join(devs)})" if devs else ""))
        if cq:
            p = cq[0]
            err = p.details.get("error") or ""
            rc = f"RC {p.code}" if p.code is not None else ""
            said = ", ".join(x for x in (rc, f"'{err[:120]}'" if err else "") if x)
            parts.append(f"{len(cq)} EFA transfer(s) completed with an error" + (f" ({said})" if said else ""))
        named = any(w in (p.details.get("error") or "").lower() for p in cq for w in _UNREACHABLE)
        why = ("the EFA devices of these nodes cannot reach each other" if av or named else
               "EFA transfers between these nodes fail: most often the peers cannot reach each other over EFA (or "
               "the peer's process died first)")
        yield Hit("; ".join(parts) + f": {why}",
                  merge_evidence(cite_problems(log, list(av) + list(cq), 3), cite_kind(log, "ofi", limit=1)),
                  fix="Let EFA traffic through: the instances' security group must allow all inbound and all "
                      "outbound traffic to and from the security group itself (an outbound 0.0.0.0/0 rule does not "
                      "cover EFA), and all nodes must sit in one placement group and subnet; check with `fi_pingpong "
                      "-p efa` between two nodes.",
                  subject="efa")


# ---------------------------------------------------------------- topology detection

_WSL2_FROM = "2.10"          # the first NCCL release NVIDIA points WSL2 users to (NVIDIA/nccl#511)


def _older_than(version: str | None, than: str) -> bool:
    try:
        return bool(version) and version_cmp(version, than) < 0
    except ValueError:
        return False


@check("topology_detection_failed")
def topology_detection_failed(ctx: Context):
    """NCCL could not find a device's PCI path in sysfs ("Could not find real path of ..."): topology detection
    fails for a GPU, and is blind for a NIC."""
    for log in ctx.logs:
        probs = [p for p in log.problems_of("topo_sysfs_path_missing") if p.level != "INFO"
                 or p.details.get("what") == "gpu"]
        if not probs:
            continue
        gpus = [p for p in probs if p.details.get("what") == "gpu"]
        version = ctx.nccl_version
        if gpus:
            p = gpus[0]
            msg = (f"NCCL's topology detection failed: the GPU's PCI device {p.details.get('device', '')} is not "
                   f"visible in sysfs ({p.details.get('path', '')}), so NCCL cannot build the topology and init "
                   "fails. This happens under WSL2, in some VMs, and in containers without the host's /sys")
            if _older_than(version, _WSL2_FROM):
                msg += f"; NCCL {version} is older than {_WSL2_FROM}, and NCCL before {_WSL2_FROM} does not run under WSL2"
            yield Hit(msg, merge_evidence(cite_problems(log, gpus, 2), cite_kind(log, "nccl_version", limit=1)),
                      fix="Run where the GPU's PCI device shows in /sys/bus/pci/devices (bare metal, or a VM with PCI "
                          "passthrough; containers with the host's /sys, as Docker mounts it by default); under WSL2 "
                          f"use NCCL {_WSL2_FROM} or later.",
                      subject="sysfs-gpu")
            continue
        names = sorted({p.details.get("device") or p.details.get("path", "") for p in probs})
        yield Hit(f"NCCL could not find the PCI path of {', '.join(names[:3])} in sysfs: it cannot place "
                  f"{'that device' if len(names) == 1 else 'those devices'} in the topology, so GPU-NIC affinity "
                  "and GPUDirect RDMA decisions are guesses (slower paths)",
                  cite_problems(log, probs, 2),
                  fix="Make the devices' PCI paths visible to the job (/sys/class/infiniband/*/device must resolve: "
                      "containers need the host's /sys), or describe the machine with NCCL_TOPO_FILE.",
                  severity="warning", subject="sysfs-nic")



# ---------------------------------------------------------------- NICs of two link layers

@check("ev_mixed_link_layers")
def ev_mixed_link_layers(ctx: Context):
    """NCCL listed InfiniBand and RoCE devices together (the node side reads the HCAs)."""
    for log in ctx.logs:
        if log.link_layer != "mixed" or log.problems_of("ib_incompatible_devices"):
            continue                # NCCL's own "incompatible devices" WARN has its rule
        layers: dict[str, list[str]] = {}
        for d in log.net_devices:
            if d.transport == "IB" and d.link_layer:
                layers.setdefault(d.link_layer, []).append(d.name)
        desc = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(layers.items()))
        yield Hit(f"NCCL uses InfiniBand and RoCE devices together ({desc}): ports of different link layers "
                  "cannot reach each other, so connections between them fail or NCCL merges nothing",
                  merge_evidence(env_evidence(ctx, "NCCL_IB_HCA"), cite_kind(log, "net_devices", limit=2)),
                  subject="NCCL_IB_HCA")
