"""`ncdoc topo --format svg|dot|mermaid`: the report's topology drawing on its own."""

from __future__ import annotations


def drawing(snapshot, topo, fmt: str) -> str:
    """The node as a standalone SVG file, Graphviz DOT or Mermaid text; NCCL_IB_HCA from the snapshot's env."""
    from ncdoc.report.topology_graph import build_graph
    from ncdoc.report.topology_render import dot, mermaid, svg
    graph = build_graph(snapshot, topo, ib_hca=snapshot.env.get("NCCL_IB_HCA"), nccl_version=snapshot.versions.nccl)
    if not graph.nodes:
        from ncdoc.errors import InputError
        raise InputError(f"no topology to draw: {graph.status}")
    title = f"{snapshot.host.hostname or snapshot.origin or 'node'}: topology"
    if fmt == "svg":
        return svg(graph, standalone=True, title=title)
    return (dot if fmt == "dot" else mermaid)(graph, title=title)


__all__ = ["drawing"]
