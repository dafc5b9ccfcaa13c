"""LogFacts as the JSON object `ncdoc triage --json` carries under "facts".

Top-level keys (stable): nccl_version, nccl_versions, cuda_build, cuda_driver, transport,
transports, net_devices (names), net_device_details, link_layer, relaxed_ordering,
ib_no_device, ib_no_device_hosts, net_plugin, socket_ifaces, bootstrap, gdr (state),
gdr_detail, dma_buf, env, env_conflicts, channels, nvls_available, nranks, nnodes,
local_ranks, init_start, init_complete, comms, hosts, host_count, rank_count, ranks,
lines, recognised_lines, warn_lines, problems, problem_counts, nccl_results, nccl_result_sources, algorithms,
ib_qp, cross_nic, cloud, nvswitch_context, evidence. Nested objects never reuse a top-level
key name, so a key found anywhere in the facts means one thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ncdoc.evidence.nccl_log import LogFacts

_RANKS_OUT = 256


def log_facts_dict(f: "LogFacts") -> dict[str, Any]:
    g = f.gdr
    return {
        "nccl_version": f.nccl_version,
        "nccl_versions": list(f.nccl_versions),
        "cuda_build": f.cuda_build,
        "cuda_driver": f.cuda_driver,
        "transport": f.transport,
        "transports": dict(f.transports),
        "net_devices": [d.name for d in f.net_devices],
        "net_device_details": [
            {"name": d.name, "via": d.transport, "link_layer": d.link_layer, "index": d.index,
             "address": d.address, "speed_mbps": d.speed_mbps, "hosts": list(d.hosts)} for d in f.net_devices],
        "link_layer": f.link_layer,
        "relaxed_ordering": f.relaxed_ordering,
        "ib_no_device": f.ib_no_device,
        "ib_no_device_hosts": list(f.ib_no_device_hosts),
        "net_plugin": {
            "requested": f.plugin.requested, "missing": f.plugin.missing,
            "missing_detail": list(f.plugin.missing_detail), "loaded": list(f.plugin.loaded),
            "collnet_loaded": list(f.plugin.collnet_loaded), "external_paths": list(f.plugin.external_paths),
            "initialized": list(f.plugin.initialized), "assigned": list(f.plugin.assigned),
            "internal": f.plugin.internal, "ofi_version": f.plugin.ofi_version,
            "ofi_provider": f.plugin.ofi_provider, "ofi_nics": f.plugin.ofi_nics,
            "lines": [e.to_dict() for e in f.plugin.evidence]},
        "socket_ifaces": [
            {"name": s.name, "address": s.address, "role": s.role, "classification": s.classification,
             "kind": s.kind, "hosts": list(s.hosts), "line": s.evidence.line, "text": s.evidence.text}
            for s in f.socket_ifaces],
        "bootstrap": [f"{s.name}:{s.address}" if s.address else s.name
                      for s in f.socket_ifaces if s.role == "bootstrap"],
        "gdr": g.state,
        "gdr_detail": {
            "basis": g.basis, "reason": g.reason, "channels_on": g.channels_on, "channels_off": g.channels_off,
            "pairs_on": g.pairs_on, "pairs_off": g.pairs_off, "hcas_on": list(g.hcas_on),
            "hcas_off": list(g.hcas_off), "off_reasons": list(g.off_reasons), "ranks_off": list(g.ranks_off),
            "directions_off": list(g.directions_off), "ring_flags": dict(g.ring_flags),
            "lines": [e.to_dict() for e in g.evidence]},
        "dma_buf": g.dma_buf,
        "env": dict(f.env),
        "env_conflicts": {k: list(v) for k, v in f.env_conflicts.items()},
        "channels": {
            "nchannels": f.channels.nchannels, "by_transport": dict(f.channels.by_transport),
            "kinds": dict(f.channels.kinds), "net_names": dict(f.channels.net_names),
            "net_gdr": f.channels.net_gdr, "net_no_gdr": f.channels.net_no_gdr, "pxn": f.channels.pxn,
            "coll_channels": f.channels.coll_channels, "collnet_channels": f.channels.collnet_channels,
            "nvls_channels": f.channels.nvls_channels, "p2p_channels": f.channels.p2p_channels},
        "nvls_available": f.nvls_available,
        "nranks": f.nranks,
        "nnodes": f.nnodes,
        "local_ranks": f.local_ranks,
        "init_start": f.init_start,
        "init_complete": f.init_complete,
        "comms": [
            {"comm_id": c.comm_id, "size": c.nranks, "nodes": c.nnodes, "local": c.local_ranks,
             "started": c.init_start, "completed": c.init_complete, "destroyed": c.destroyed,
             "missing_ranks": list(c.missing_ranks)} for c in f.comms],
        "hosts": list(f.hosts),
        "host_count": f.host_count,
        "rank_count": f.rank_count,
        "ranks": [
            {"key": r.key, "host": r.host, "pid": r.pid, "dev": r.dev, "comm_ranks": list(r.ranks),
             "version": r.nccl_version, "net": r.transport, "devices": list(r.net_devices),
             "bootstrap_iface": r.bootstrap, "started": r.init_start, "completed": r.init_complete,
             "warns": r.warns} for r in f.ranks[:_RANKS_OUT]],
        "lines": f.lines,
        "recognised_lines": f.recognised_lines,
        "warn_lines": f.warn_lines,
        "problems": [
            {"kind": p.kind, "meaning": p.meaning, "message": p.message, "level": p.level, "code": p.code,
             "code_name": p.code_name, "details": dict(p.details), "host": p.host, "rank": p.rank,
             "source_file": p.source_file, "line": p.evidence.line if p.evidence else None,
             "text": p.evidence.text if p.evidence else None} for p in f.problems],
        "problem_counts": dict(f.problem_counts),
        "nccl_results": dict(f.nccl_results),
        "nccl_result_sources": {k: dict(v) for k, v in f.nccl_result_sources.items()},
        "algorithms": {k: (dict(v) if isinstance(v, dict) else v) for k, v in f.algorithms.items()},
        "ib_qp": {k: dict(v) for k, v in f.ib.items()},
        "cross_nic": list(f.cross_nic),
        "cloud": dict(f.cloud),
        "nvswitch_context": list(f.nvswitch_context),
        "evidence": {k: [e.to_dict() for e in v] for k, v in f.evidence.items()},
    }
