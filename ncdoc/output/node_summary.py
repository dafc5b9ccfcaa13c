"""The node summary doctor shows above its findings: host and versions, GPUs, RDMA ports with their
rails, each GPU's nearest NIC; as report sections (ncdoc.output.render's `facts`)."""

from __future__ import annotations


def summary(snap, topo) -> list[tuple[str, object]]:
    """The short topology summary: node, versions, GPUs, NICs, rails."""
    out: list[tuple[str, object]] = []
    h, v = snap.host, snap.versions
    node = {"host": h.hostname or "?", "kernel": h.kernel or "?",
            "virtualised": h.hypervisor or "no", "NCCL": v.nccl or "not found", "driver": v.driver or "?",
            "net plugins": ", ".join(p.rsplit("/", 1)[-1] for p in v.net_plugins) or "none"}
    out.append(("Node", node))
    gpus = snap.gpus.gpus
    if gpus:
        names: dict[str, int] = {}
        for g in gpus:
            names[g.name] = names.get(g.name, 0) + 1
        nvl = max((sum(1 for l in g.nvlinks if l.active) for g in gpus), default=0)
        fm = snap.gpus.fabric_manager
        out.append(("GPUs", {"count": ", ".join(f"{n} x {k}" for k, n in names.items()),
                             "NVLinks per GPU": nvl or "none", "fabric manager": fm or "-"}))
    else:
        out.append(("GPUs", snap.gpus.status.reason or "none found"))
    rows = []
    rail_of: dict[str, list[str]] = {}
    if topo is not None and topo.status.known:
        for g, nics in topo.rails.items():
            for n in nics:
                rail_of.setdefault(n, []).append(g)
    for hca in snap.hcas.hcas:
        for p in hca.ports:
            rows.append({"NIC": f"{hca.name}:{p.num}", "state": p.state or "?",
                         "rate": p.rate_text or (f"{p.rate_gbps:g} Gb/s" if p.rate_gbps else "?"),
                         "link": p.link_layer or "?", "GPUs (rail)": ", ".join(rail_of.get(hca.name, [])) or "-"})
    out.append(("RDMA ports", rows or (snap.hcas.status.reason or "none")))
    if topo is not None and topo.status.known and topo.rails:
        rails = []
        for g in sorted(topo.rails, key=lambda x: (len(x), x)):
            near = topo.nearest_nic(g)
            rails.append({"GPU": g, "nearest NIC": near[0] if near else "-", "path": near[1] if near else "-"})
        out.append(("GPU to nearest NIC", rails))
    return out


def job_summary(snap, span: tuple[bool | None, str], report) -> tuple[str, dict]:
    """The job section: how many nodes and GPUs the job states, and how that judges the rules whose
    problem matters only between nodes (`scope: multi-node`): info on a one-node job, with why."""
    from ncdoc.engine.job_facts import claim_text
    job = snap.job
    multi, why = span
    spans = {True: f"several nodes ({why})", False: f"one node ({why})"}.get(
        multi, "not stated (no SLURM_NNODES, NNODES, WORLD_SIZE or other launcher variable)")
    gpus = max(job.gpus, key=lambda c: c.value) if job.gpus else None
    mild = sum(1 for f in report.findings if f.original_severity)
    if multi is False:
        judged = ("info: NCCL does not need the network between nodes for this job"
                  + (f" ({mild} finding{'s' if mild != 1 else ''} judged so)" if mild else ""))
    else:
        judged = "at their own severity" + ("" if multi else " (the job may span several nodes)")
    rows = {"spans": spans, "GPUs given": f"{gpus.value} ({claim_text(gpus)})" if gpus else "not stated",
            "network-only rules": judged}
    if job.ignored:
        rows["not read"] = "; ".join(job.ignored)
    return "Job", rows


__all__ = ["summary", "job_summary"]
