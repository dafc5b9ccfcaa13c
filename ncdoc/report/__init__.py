"""The HTML report: one self-contained page with the verdict and findings, the node topology, the
bandwidth curve, the tuning story and the cluster grid (see docs/report.md).

Rooms: model.py (what the page shows, built from the use cases' results), topology_graph.py (the
node as a tiered tree with rails and NVLink), topology_render.py (that tree as SVG, Graphviz DOT or
Mermaid), curves.py + charts.py (busbw against size, the tuning history and effects, drawn with
matplotlib's SVG backend), tune_input.py (the one adapter that reads a tune output folder),
cluster_grid.py (the node x attribute drift matrix), page.py (Jinja2 templates, atomic write),
sparkline.py (the one-line text curve). Nothing here is imported by `ncdoc check`: Jinja2 and
matplotlib load only when a report, an SVG or a chart is asked for.
"""
