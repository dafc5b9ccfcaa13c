"""`ncdoc topo`'s report: the GPU/NIC path matrix as `nvidia-smi topo -m` prints it, the NIC legend,
each GPU's nearest NICs (its rail), NUMA and the RDMA ports; as text or one JSON object."""

from __future__ import annotations

import json

from ncdoc.output.parts import SCHEMA_VERSION

LEGEND = ("X = self; NV# = # bonded NVLinks; PIX = at most one PCIe bridge (switch); PXB = several "
          "PCIe bridges, not the host bridge; PHB = through a PCIe host bridge (CPU); NODE = between "
          "host bridges of one NUMA node; SYS = across NUMA nodes (QPI/UPI/xGMI)")



def render_json(snapshot, topo, inputs: list, truncated: bool) -> str:
    from ncdoc.topology import port_facts
    out = {
        "schema_version": SCHEMA_VERSION,
        "inputs": inputs,
        "status": {"state": topo.status.state, "reason": topo.status.reason, "source": topo.status.source},
        "source": topo.source,
        "truncated": truncated or snapshot.paths.truncated,
        "facts": {**topo.facts(), "ports": port_facts(snapshot)},
        "notes": list(dict.fromkeys(list(snapshot.notes) + list(topo.notes))),
    }
    return json.dumps(out, indent=2) + "\n"


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


__all__ = ["LEGEND", "render_json", "render_text"]
