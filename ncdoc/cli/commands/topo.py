"""`ncdoc topo`: the GPU/NIC path matrix, NIC legend, rails, NUMA and RDMA port states."""

from __future__ import annotations

import argparse
import sys

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

--format svg draws the node (NUMA nodes, host bridges, PCIe switches, GPUs and NICs, rails
coloured by path type, down ports and links trained low in red) as one SVG file; dot and
mermaid give the same graph as Graphviz or Mermaid text for tickets and wikis.

examples:
  ncdoc topo
  ncdoc topo topo-m.txt ibstat.txt
  ncdoc topo --snapshot node7.json --json
  ncdoc topo --example dgx-h100-port-down --format svg > node.svg
  ncdoc topo topo-m.txt --format mermaid
"""

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evidence", nargs="*", metavar="EVIDENCE_FILE",
                        help="topo -m, ibv_devinfo/ibstat/ibstatus/show_gids, NCCL or hwloc XML, "
                             "or snapshot file ('-' reads stdin)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="read the node from an ncdoc snapshot file")
    src.add_argument("--example", metavar="NAME", help="use a bundled example machine")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--format", choices=("text", "json", "svg", "dot", "mermaid"), default=None,
                        help="text (default), json, svg (a drawing), dot (Graphviz) or mermaid")


def _format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        from ncdoc.errors import UsageError
        raise UsageError("--json and --format disagree")
    return "json" if args.json else (args.format or "text")


def run(args: argparse.Namespace) -> int:
    from ncdoc.output import topo_report
    from ncdoc.topology import classify
    from ncdoc.usecases.node_context import topo_node

    fmt = _format(args)
    node = topo_node(args.evidence, snapshot=args.snapshot, example=args.example)
    for path in node.truncated:
        print(f"ncdoc: note: {path}: input is cut short (truncated); showing what is there", file=sys.stderr)
    topo = classify(node.snapshot)
    if fmt in ("svg", "dot", "mermaid"):
        from ncdoc.report.topology_text import drawing
        sys.stdout.write(drawing(node.snapshot, topo, fmt))
        return 0
    if fmt == "json":
        sys.stdout.write(topo_report.render_json(node.snapshot, topo, node.inputs, bool(node.truncated)))
    else:
        print(topo_report.render_text(node.snapshot, topo))
    return 0


__all__ = ["NAME", "HELP", "DESCRIPTION", "add_arguments", "run"]
