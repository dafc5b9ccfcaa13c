"""`ncdoc topo`: the GPU/NIC path matrix, NIC legend, rails, NUMA and RDMA port states."""

from __future__ import annotations

import argparse
import json
import sys

from ncdoc.errors import UsageError

NAME = "topo"
HELP = "show the GPU/NIC topology (nvidia-smi topo -m form), rails, NUMA and RDMA ports"
DESCRIPTION = """\
Show the GPU/NIC path matrix as `nvidia-smi topo -m` prints it (X, NV#, PIX, PXB, PHB,
NODE, SYS), the NIC legend, each GPU's nearest NIC(s) (its rail), NUMA nodes and the
state of every RDMA port.

With no argument the live node is probed. Otherwise give evidence files, in any mix:
`nvidia-smi topo -m` text, ibv_devinfo / ibstat / ibstatus / show_gids output, an NCCL
topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE), an hwloc XML (lstopo), or an ncdoc
snapshot; they are merged as facts of one node.

examples:
  ncdoc topo
  ncdoc topo topo-m.txt ibstat.txt
  ncdoc topo --snapshot node7.json --json
"""

LEGEND = ("X = self; NV# = # bonded NVLinks; PIX = at most one PCIe bridge (switch); PXB = several "
          "PCIe bridges, not the host bridge; PHB = through a PCIe host bridge (CPU); NODE = between "
          "host bridges of one NUMA node; SYS = across NUMA nodes (QPI/UPI/xGMI)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evidence", nargs="*", metavar="EVIDENCE_FILE",
                        help="topo -m, ibv_devinfo/ibstat/ibstatus/show_gids, NCCL or hwloc XML, "
                             "or snapshot file ('-' reads stdin)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="read the node from an ncdoc snapshot file")
    src.add_argument("--example", metavar="NAME", help="use a bundled example machine")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def _base(args: argparse.Namespace):
    """The starting Snapshot and its description for "inputs"."""
    from ncdoc.snapshot import Snapshot
    if args.snapshot:
        return Snapshot.load(args.snapshot), {"path": args.snapshot, "kind": "snapshot_json"}
    if args.example:
        try:
            from ncdoc.examples.machines import load_example
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("ncdoc"):
                raise UsageError("bundled example machines are not available in this build") from None
            raise
        try:
            return load_example(args.example), {"kind": "example", "name": args.example}
        except KeyError:
            raise UsageError(f"no example machine named {args.example!r}") from None
    return None, None


def _live():
    try:
        from ncdoc.probes.live import capture
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ncdoc"):
            raise UsageError("live probing is not available in this build; give an evidence file "
                             "or --snapshot FILE") from None
        raise
    return capture()


def run(args: argparse.Namespace) -> int:
    from ncdoc.importers import import_evidence_detail, merge
    from ncdoc.topology import classify, port_facts

    snapshot, base_input = _base(args)
    inputs = [base_input] if base_input else []
    truncated = False
    notes: list[str] = []
    for path in args.evidence:
        imp = import_evidence_detail(path)
        inputs.append({"path": path, "kind": imp.kind, "tool": imp.tool, "truncated": imp.truncated})
        if imp.truncated:
            truncated = True
            print(f"ncdoc: note: {path}: input is cut short (truncated); showing what is there",
                  file=sys.stderr)
        snapshot = imp.snapshot if snapshot is None else merge(snapshot, imp.snapshot)
    if snapshot is None:
        snapshot = _live()
        inputs.append({"path": None, "kind": "live"})
    topo = classify(snapshot)
    notes.extend(topo.notes)
    if args.json:
        out = {
            "schema_version": 1,
            "inputs": inputs,
            "status": {"state": topo.status.state, "reason": topo.status.reason, "source": topo.status.source},
            "source": topo.source,
            "truncated": truncated or snapshot.paths.truncated,
            "facts": {**topo.facts(), "ports": port_facts(snapshot)},
            "notes": list(dict.fromkeys(list(snapshot.notes) + notes)),
        }
        print(json.dumps(out, indent=2))
        return 0
    print(render_text(snapshot, topo))
    return 0


def _cpu_affinity(snapshot, topo, label: str) -> str:
    if topo.source == "matrix":
        return snapshot.paths.cpu_affinity.get(label, "")
    numa = topo.numa.get(label)
    node = next((n for n in snapshot.numa.nodes if n.id == numa), None)
    return node.cpulist if node else ""


def render_text(snapshot, topo) -> str:
    """The human report: matrix, NIC legend, rails, ports."""
    from tabulate import tabulate

    from ncdoc.topology import port_facts
    parts: list[str] = []
    labels = [e.label for e in topo.endpoints]
    if topo.status.state == "unknown":
        parts.append(f"Topology: unknown ({topo.status.reason})")
    elif not labels:
        parts.append(f"Topology: {topo.status.reason or 'no GPU or NIC found'}")
    else:
        rows = []
        for a in labels:
            numa = topo.numa.get(a)
            rows.append([a] + [topo.matrix.get(a, {}).get(b, "?") for b in labels]
                        + [_cpu_affinity(snapshot, topo, a), "" if numa is None else numa])
        parts.append(f"GPU/NIC topology (from {topo.status.source or topo.source})")
        parts.append(tabulate(rows, headers=[""] + labels + ["CPU Affinity", "NUMA Affinity"],
                              tablefmt="plain", disable_numparse=True))
        parts.append("\nLegend: " + LEGEND)
        legend = {k: v for k, v in topo.nic_names.items() if k != v}  # old drivers name columns mlx5_0
        if legend:
            parts.append("\nNIC Legend:\n" + "\n".join(f"  {k}: {v}" for k, v in legend.items()))
        rails = []
        for g in topo.gpus():
            near = topo.nearest_nic(g.label)
            rails.append([g.label, g.name if g.name != g.label else "", "" if g.numa is None else g.numa,
                          ", ".join(topo.rails.get(g.label, ())) or "-", near[1] if near else "-"])
        if rails:
            parts.append("\nRails (nearest NICs per GPU):")
            parts.append(tabulate(rails, headers=["GPU", "name", "NUMA", "nearest NIC(s)", "path"],
                                  tablefmt="simple", disable_numparse=True))
    ports = port_facts(snapshot)
    if ports:
        parts.append("\nRDMA ports:")
        parts.append(tabulate([[p["device"], p["port"], p["state"] or "?", p["phys_state"] or "",
                                "?" if p["rate_gbps"] is None else f"{p['rate_gbps']:g} Gb/s",
                                p["link_layer"] or "?"] for p in ports],
                              headers=["device", "port", "state", "physical", "rate", "link layer"],
                              tablefmt="simple", disable_numparse=True))
    elif snapshot.hcas.status.state == "absent":
        reason = snapshot.hcas.status.reason
        parts.append(f"\nRDMA ports: none{f' ({reason})' if reason else ''}")
    notes = list(dict.fromkeys(list(snapshot.notes) + list(topo.notes)))
    if notes:
        parts.append("\nNotes:\n" + "\n".join(f"  - {n}" for n in notes))
    return "\n".join(parts)


__all__ = ["NAME", "HELP", "DESCRIPTION", "add_arguments", "run", "render_text"]
