"""Turning the scan state's running tallies into frozen LogFacts: per rank first, then merged.

The merged answers follow one rule: the most specific evidence wins. GPUDirect RDMA is
decided by the channels NCCL actually connected when the log shows them, else by its
per GPU/NIC decisions, else by what each NIC supports; the transport by "Using network",
else by the NET channels, else by which transport listed devices.
"""

from __future__ import annotations

import re
from collections import Counter

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.lazy_re import lazy
from ncdoc.evidence.nccl_log_model import (
    ChannelFacts, CommFacts, FrameworkFacts, GdrFacts, LogFacts, NetDevice, PluginFacts, Problem, RankFacts,
    SocketIface, WatchdogProgress, WatchdogTimeout,
)
from ncdoc.evidence.nccl_log_state import RankTally, ScanState
from ncdoc.nccl.parse import version_tuple
from ncdoc.topology import natural_key

_AWS_HOST = lazy(r"^ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?:\.|$)")
_MAX_RANKS_OUT = 4096


def build_facts(st: ScanState, source: str) -> LogFacts:
    version = st.versions.most_common(1)[0][0] if st.versions else None
    # Sorted, not in first-seen order: the passes over a block meet ranks in different orders.
    ranks = [_rank_facts(key, r, st) for key, r in sorted(st.ranks.items(), key=lambda kv: natural_key(kv[0]))]
    transports = Counter(r.transport for r in ranks if r.transport)
    transport = _transport(st, transports)
    if transport and not transports:
        transports[transport] = 0
    comms = tuple(_comm_facts(cid, c) for cid, c in st.comms.items())
    env_conflicts = {k: tuple(v) for k, v in st.env_values.items() if len(v) > 1}
    return LogFacts(
        source=source,
        lines=st.lines,
        recognised_lines=st.recognised,
        warn_lines=st.warns,
        nccl_version=version,
        nccl_versions=tuple(sorted(st.versions, key=lambda v: version_tuple(v) or ())),
        cuda_build=st.cuda_build,
        cuda_driver=st.cuda_driver,
        transport=transport,
        transports=dict(transports.most_common()),
        network=_network(st),
        net_devices=_net_devices(st, transport),
        link_layer=_link_layer(st),
        relaxed_ordering=st.relaxed,
        ib_no_device=st.no_device > 0,
        ib_no_device_hosts=tuple(st.no_device_hosts),
        plugin=_plugin(st),
        socket_ifaces=tuple(sorted(
            (SocketIface(name, addr, role, d["class"], d["kind"], tuple(d["hosts"]), d["evidence"])
             for (name, addr, role), d in st.ifaces.items()), key=lambda s: (s.evidence.line, s.name, s.role))),
        gdr=_gdr(st, version, transport),
        env=dict(st.env),
        env_conflicts=env_conflicts,
        channels=_channels(st),
        nvls_available=st.nvls,
        comms=comms,
        nranks=max((c.nranks for c in comms), default=None),
        nnodes=max((c.nnodes for c in comms if c.nnodes), default=None),
        local_ranks=max((c.local_ranks for c in comms if c.local_ranks), default=None),
        init_start=sum(c.init_start for c in comms),
        init_complete=sum(c.init_complete for c in comms),
        hosts=tuple(sorted(st.hosts, key=natural_key)),
        host_count=len(st.hosts) + st.extra_hosts,
        ranks=tuple(ranks[:_MAX_RANKS_OUT]),
        rank_count=len(st.ranks),
        problems=tuple(sorted((Problem(**e) for kept in st.problems.values() for e in kept),
                              key=lambda p: (p.evidence.line, p.kind))),
        problem_counts=dict(st.problem_counts),
        nccl_results=dict(st.results),
        nccl_result_sources={k: dict(v) for k, v in st.result_sources.items()},
        algorithms=_algorithms(st),
        ib={"gid_index": dict(st.gid_index), "mtu": dict(st.mtu), "speed_mbps": dict(st.ib_speed)},
        cross_nic=tuple(sorted(st.cross_nic)),
        cloud=_cloud(st),
        nvswitch_context=_nvswitch(st),
        framework=_framework(st.framework),
        evidence=st.book.freeze(),
    )


def _framework(fw: dict) -> FrameworkFacts:
    return FrameworkFacts(
        timeouts=tuple(WatchdogTimeout(**t) for t in fw["timeouts"]),
        progress=tuple(WatchdogProgress(**p) for p in fw["progress"]),
        timeout_lines=fw["timeout_lines"], terminated=fw["terminated"], stuck_s=fw["stuck_s"],
        stuck_line=fw["stuck_line"], env_named=dict(fw["env_named"]))


def _rank_facts(key: str, r: RankTally, st: ScanState) -> RankFacts:
    return RankFacts(key=key, host=r.host, pid=r.pid, dev=r.dev, ranks=tuple(sorted(r.ranks)),
                     nccl_version=r.version or _proc(st, r).version, transport=_rank_transport(st, r),
                     net_devices=tuple(r.ib_devices or _proc(st, r).ib_devices), bootstrap=r.bootstrap,
                     init_start=r.init_start, init_complete=r.init_complete, warns=r.warns)


def _proc(st: ScanState, r: RankTally) -> RankTally:
    return st.procs.get(f"{r.host}:{r.pid}", r)


_IB_PLUGIN = lazy(r"^IBext(?:_v\d+)?$")


def transport_of(network: str | None) -> str | None:
    """The transport a network name stands for: the IB verbs transport whether NCCL's own ("IB") or the
    nccl-rdma-sharp plugin's ("IBext", "IBext_v8"); a plugin's own name otherwise ("AWS Libfabric", "Socket")."""
    if network and _IB_PLUGIN.match(network):
        return "IB"
    return network


def _network(st: ScanState) -> str | None:
    """The network NCCL chose, by the name it printed ("Using network IBext_v8", a channel's NET/<name>/)."""
    if st.using:
        return st.using.most_common(1)[0][0]
    nets = Counter()
    for tail, n in st.tails.items():
        info = st.tail_info.get(tail)
        if info and info[0] == "NET":
            nets[info[2]] += n
    return nets.most_common(1)[0][0] if nets else None


def _rank_transport(st: ScanState, r: RankTally) -> str | None:
    """What this GPU's process used: "Using network", else what its NET lines imply."""
    p = _proc(st, r)
    for cand in (r.using, r.assigned, p.using, p.assigned):
        if cand:
            return transport_of(cand)
    if (r.no_device or p.no_device) and (r.socket or p.socket):
        return "Socket"
    if r.ib_devices or p.ib_devices:
        return "IB"
    if r.socket or p.socket:
        return "Socket"
    return None


def _transport(st: ScanState, per_rank: Counter) -> str | None:
    if per_rank:
        return per_rank.most_common(1)[0][0]
    network = _network(st)
    if network:
        return transport_of(network)
    if st.plugin["assigned"]:
        return transport_of(next(iter(st.plugin["assigned"])))
    if st.ib_devices and not st.no_device:
        return "IB"
    if st.socket_devices:
        return "Socket"
    if st.ib_devices:
        return "IB"
    if any(st.problem_counts.get(k) for k in ("ib_completion_error", "qp_connect_timeout", "ib_qp_modify_failed",
                                                "ib_async_event")):
        return "IB"               # only the IB transport reports verbs completions and QP transitions
    return None


def _net_devices(st: ScanState, transport: str | None) -> tuple[NetDevice, ...]:
    ib = tuple(NetDevice(name, "IB", d["link"], d["index"], None, st.ib_speed.get(name.split(":")[0]),
                         tuple(d["hosts"])) for name, d in st.ib_devices.items())
    sock = tuple(NetDevice(name, "Socket", None, None, d["address"], None, tuple(d["hosts"]))
                 for name, d in st.socket_devices.items())
    if transport == "Socket":
        return sock
    if transport == "IB":
        return ib
    return ib + sock


def _link_layer(st: ScanState) -> str | None:
    links = {d["link"] for d in st.ib_devices.values()}
    return None if not links else links.pop() if len(links) == 1 else "mixed"


def _plugin(st: ScanState) -> PluginFacts:
    pl = st.plugin
    ev = st.book.get("plugin_failed") + st.book.get("plugin_missing") + st.book.get("plugin") + st.book.get("ofi")
    return PluginFacts(
        requested=pl["requested"], missing=bool(pl["missing"]), missing_detail=tuple(pl["missing"]),
        loaded=tuple(pl["loaded"]), collnet_loaded=tuple(pl["collnet"]), external_paths=tuple(pl["paths"]),
        initialized=tuple(pl["initialized"]), assigned=tuple(pl["assigned"]), failed=tuple(pl["failed"]),
        internal=pl["internal"],
        ofi_version=pl["ofi_version"], ofi_provider=pl["ofi_provider"], ofi_nics=pl["ofi_nics"],
        evidence=ev[:8])


def _state(on: int, off: int) -> str:
    return "partial" if on and off else "enabled" if on else "disabled"


def _gdr(st: ScanState, version: str | None, transport: str | None) -> GdrFacts:
    on = off = 0
    for tail, n in st.tails.items():
        info = st.tail_info.get(tail)
        if info and info[0] == "NET" and info[2] != "Socket":
            if info[3]:
                on += n
            else:
                off += n
    per_hca = st.hca_gdr or st.hca_gdr_claimed
    hcas_on = tuple(k for k, v in per_hca.items() if v)
    hcas_off = tuple(k for k, v in per_hca.items() if not v)
    pairs_on = sum(1 for v in st.pairs_seen.values() if v)
    pairs_off = len(st.pairs_seen) - pairs_on
    nnodes = max((c.nnodes or 0 for c in st.comms.values()), default=0)
    ring_on, ring_off = st.ring_gdr.get("GDR 1", 0), st.ring_gdr.get("GDR 0", 0)
    if on or off:
        basis, state = "channels", _state(on, off)
    elif pairs_on or pairs_off:
        basis, state = "gpu_nic_pairs", _state(pairs_on, pairs_off)
    elif hcas_on or hcas_off:
        basis, state = "hca", _state(len(hcas_on), len(hcas_off))
    elif (ring_on or ring_off) and nnodes > 1 and transport not in (None, "Socket"):
        basis, state = "ring", _state(ring_on, ring_off)
    else:
        basis, state = "", "unknown"
    reasons = tuple(_name_distance(r, version) for r in st.off_reasons)
    if state in ("disabled", "partial") and not reasons and basis == "channels":
        reasons = ("NET channels connected without GDRDMA",)
    ev = st.book.get("gdr_off") + st.book.get("gdr_channel_off") + st.book.get("gdr_on") + st.book.get(
        "gdr_channel_on") + st.book.get("dma_buf")[:1]
    return GdrFacts(
        state=state, basis=basis, reason=reasons[0] if reasons and state != "enabled" else "",
        channels_on=on, channels_off=off, pairs_on=pairs_on, pairs_off=pairs_off, hcas_on=hcas_on,
        hcas_off=hcas_off, off_reasons=reasons, ranks_off=tuple(st.gdr_ranks_off),
        directions_off=tuple(st.gdr_dirs_off), ring_flags=dict(st.ring_gdr), dma_buf=st.dma_buf,
        evidence=ev[:10])


def _name_distance(reason: str, version: str | None) -> str:
    m = re.match(r"distance (\d{1,20}(?!\d)) > (\d{1,20}(?!\d))$", reason)
    if not m:
        return reason
    a, b = P.path_name(int(m.group(1)), version), P.path_name(int(m.group(2)), version)
    if a and b:
        return f"GPU-NIC path {a} is farther than the GDR level {b} (distance {m.group(1)} > {m.group(2)}; " \
               f"NCCL_NET_GDR_LEVEL)"
    return f"GPU-NIC distance {m.group(1)} > GDR level {m.group(2)} (NCCL_NET_GDR_LEVEL)"


def _channels(st: ScanState) -> ChannelFacts:
    by_transport: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    nets: Counter[str] = Counter()
    gdr = no_gdr = pxn = 0
    for tail, n in st.tails.items():
        transport, kind, net, has_gdr, proxied = st.tail_info[tail]
        by_transport[transport] += n
        kinds[kind] += n
        if transport == "NET":
            nets[net] += n
            if net != "Socket":
                gdr, no_gdr = (gdr + n, no_gdr) if has_gdr else (gdr, no_gdr + n)
            pxn += n if proxied else 0
    summary = st.channel_summary or (None, None, None, None)
    return ChannelFacts(nchannels=st.nchannels, by_transport=dict(by_transport), kinds=dict(kinds),
                        net_names=dict(nets), net_gdr=gdr, net_no_gdr=no_gdr, pxn=pxn,
                        coll_channels=summary[0], collnet_channels=summary[1], nvls_channels=summary[2],
                        p2p_channels=summary[3])


def _comm_facts(cid: str, c) -> CommFacts:
    missing = tuple(sorted(c.started - c.completed))[:64] if c.started else ()
    return CommFacts(comm_id=cid, nranks=c.nranks, nnodes=c.nnodes, local_ranks=c.local_ranks,
                     init_start=c.start, init_complete=c.complete, destroyed=c.destroyed, missing_ranks=missing)


def _algorithms(st: ScanState) -> dict:
    return {"NCCL_ALGO": st.algo_env.get("NCCL_ALGO"), "NCCL_PROTO": st.algo_env.get("NCCL_PROTO"),
            "matrix_printed": st.algo_matrix, "selections": dict(st.algo_picks.most_common(64))}


def _cloud(st: ScanState) -> dict:
    reasons = []
    aws_hosts = [h for h in st.hosts if _AWS_HOST.match(h)]
    if aws_hosts:
        reasons.append(f"EC2-style hostnames ({aws_hosts[0]}, {len(aws_hosts)} in all)")
    provider = (st.plugin["ofi_provider"] or "").lower()
    if "efa" in provider:
        reasons.append(f"libfabric provider {st.plugin['ofi_provider']}")
    if any(k.startswith("FI_EFA") for k in st.env) or st.env.get("FI_PROVIDER", "").lower() == "efa":
        reasons.append("FI_EFA/FI_PROVIDER=efa in the environment")
    return {"aws": bool(reasons), "reasons": reasons, "efa": "efa" in provider}


def _nvswitch(st: ScanState) -> tuple[str, ...]:
    out = dict(st.nvswitch)
    if st.nvls:
        out.setdefault("NVLS multicast is available (NVSwitch)", None)
    summary = st.channel_summary
    if summary and summary[2]:
        out.setdefault(f"{summary[2]} NVLS channels", None)
    if st.problem_counts.get("p2p_disabled_nvlink"):
        out.setdefault("P2P disabled between NVLink-connected GPUs", None)
    return tuple(out)
