"""`ncdoc doctor`: the full human report for one node: topology summary, findings in the order an
expert works (RDMA path, GDR and affinity, link health, settings), evidence, fixes, skips."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt

NAME = "doctor"
HELP = "full report on this node's NCCL setup: topology summary, findings with evidence and fixes"
DESCRIPTION = """\
Examine the node (live, or --snapshot / --example) and its NCCL environment with every rule,
and write a report: a short topology summary, then the findings grouped in the order an
expert works (RDMA path or TCP fallback; GPUDirect RDMA, affinity and rails; link health;
settings), each with its evidence and fix, and last what was skipped and why.

exit status: 0 nothing at or above --fail-on (default error), 1 findings at or above it, 2 bad input.

examples:
  ncdoc doctor
  ncdoc doctor --example dgx-h100-port-down
  ncdoc doctor --snapshot node7.json --format markdown > report.md
"""


def add_arguments(parser) -> None:
    opt.add_node_arguments(parser)
    opt.add_env_arguments(parser)
    opt.add_selection_arguments(parser, "error")
    opt.add_output_arguments(parser, ("text", "json", "markdown"), "text")


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


def run(args) -> int:
    from ncdoc.output import render
    from ncdoc.usecases.node_context import node_context
    fmt = opt.output_format(args, "text")
    version = opt.nccl_version_arg(args)
    snap, ctx = node_context(**opt.node_and_env(args), nccl_version=version)
    sel = opt.selection(args, default_fail_on="error")
    report = sel.run(ctx)
    facts = summary(snap, ctx.topology if not ctx.missing("topology") else None)
    if snap.notes:
        facts.append(("Probe notes", list(snap.notes)))
    title = f"ncdoc doctor: {snap.host.hostname or snap.origin}"
    sys.stdout.write(render(report, fmt, title=title, facts=facts, skipped=True, color=args.color))
    return 1 if report.fails(sel.fail_on) else 0
