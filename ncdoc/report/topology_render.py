"""The topology graph drawn: SVG (inline in the report or alone), Graphviz DOT and Mermaid text.

The SVG layout reads left to right in tiers (NUMA node, host bridge, PCIe switches, devices):
each box above the devices spans the rows of the devices under it, so which GPU shares a switch
with which NIC is read off the nesting without following lines. Devices sit in one column, one
row each; each GPU's rail to its nearest NIC is a bracket in a lane to the right, coloured and
labelled by NCCL's path type; NVLink goes to one NVSwitch bar at the far right. Colours are the
Okabe-Ito palette (safe for the common colour-vision deficiencies), every colour has a text label
and a dash pattern beside it, so the picture survives greyscale printing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncdoc.report.topology_graph import TopoGraph, path_class

# Okabe-Ito: the path types from best to worst, NVLink apart; "bad" marks use vermillion plus text.
PATH_STYLE = {
    "NV": ("#0072B2", ""),              # blue, solid
    "PIX": ("#009E73", ""),             # bluish green, solid
    "PXB": ("#56B4E9", "8 3"),          # sky blue, long dash
    "PHB": ("#E69F00", "6 2 2 2"),      # orange, dash-dot
    "NODE": ("#CC79A7", "2 2"),         # reddish purple, dotted
    "SYS": ("#D55E00", "1 3"),          # vermillion, sparse dots
    "unknown": ("#7f7f7f", "4 4"),
}
PATH_MEANING = {
    "NV": "NVLink", "PIX": "one PCIe switch", "PXB": "several PCIe switches, no host bridge",
    "PHB": "through the CPU's host bridge", "NODE": "across host bridges of one NUMA node",
    "SYS": "across NUMA nodes (CPU interconnect)",
}
BAD = "#D55E00"
EXCLUDED = "#8c8c8c"

ROW_H, BOX_H = 38, 32
TIER_W, TIER_GAP = 150, 14
DEV_W = 268
LANE_W = 30
NVS_W = 150
PAD = 10
LEGEND_H = 80


@dataclass(frozen=True)
class Box:
    id: str
    kind: str
    state: str
    x: float
    y: float
    w: float
    h: float
    lines: tuple[str, ...]          # first line bold
    problems: tuple[str, ...]
    endpoint: str | None


@dataclass(frozen=True)
class Wire:
    d: str                           # SVG path data (numbers only: made here)
    kind: str                        # pcie | rail | nvlink
    cls: str                         # path class for rails, "ok"/"bad" for others
    colour: str
    dash: str
    width: float
    label: str
    lx: float
    ly: float
    a: str
    b: str


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    boxes: tuple[Box, ...]
    wires: tuple[Wire, ...]
    legend: tuple[tuple[str, str, str, str], ...]     # (class, colour, dash, meaning)
    legend_y: float


def _rows(graph: TopoGraph) -> dict[str, int]:
    """Device id -> row, depth first through the tree in build order."""
    order: dict[str, int] = {}

    def walk(parent: str | None) -> None:
        for n in graph.children(parent):
            if n.kind in ("gpu", "nic"):
                order[n.id] = len(order)
            elif n.kind != "nvswitch":
                walk(n.id)
    walk(None)
    return order


def _span(graph: TopoGraph, nid: str, rows: dict[str, int]) -> tuple[int, int] | None:
    got: list[int] = []
    stack = [nid]
    while stack:
        cur = stack.pop()
        if cur in rows:
            got.append(rows[cur])
        stack.extend(c.id for c in graph.children(cur))
    return (min(got), max(got)) if got else None


def _lanes(spans: list[tuple[int, int, int]]) -> dict[int, int]:
    """Greedy interval colouring: edge index -> lane, spans (start, end, index) overlapping get new lanes."""
    lanes: list[int] = []            # last row used per lane
    out: dict[int, int] = {}
    for lo, hi, idx in sorted(spans):
        for k, last in enumerate(lanes):
            if last < lo:
                lanes[k] = hi
                out[idx] = k
                break
        else:
            lanes.append(hi)
            out[idx] = len(lanes) - 1
    return out


def layout(graph: TopoGraph) -> Layout:
    rows = _rows(graph)
    tiers = max((graph.depth(graph.node(i)) for i in rows), default=0)
    dev_x = PAD + tiers * (TIER_W + TIER_GAP)
    top = PAD

    def row_y(r: int) -> float:
        return top + r * ROW_H

    boxes: list[Box] = []
    pos: dict[str, Box] = {}
    for n in graph.nodes:
        if n.kind in ("gpu", "nic"):
            if n.id not in rows:
                continue
            lines = (n.label + (f"  {n.detail}" if n.detail else ""),)
            bx = Box(n.id, n.kind, n.state, dev_x, row_y(rows[n.id]), DEV_W, BOX_H, lines, n.problems, n.endpoint)
        elif n.kind == "nvswitch":
            continue
        else:
            sp = _span(graph, n.id, rows)
            if sp is None:
                continue
            d = graph.depth(n)
            y0, y1 = row_y(sp[0]), row_y(sp[1]) + BOX_H
            lines = _tier_lines(n.kind, n.label, n.detail)
            bx = Box(n.id, n.kind, n.state, PAD + d * (TIER_W + TIER_GAP), y0, TIER_W, y1 - y0, lines,
                     n.problems, None)
        boxes.append(bx)
        pos[n.id] = bx

    wires: list[Wire] = []
    for e in graph.edges:
        if e.kind != "pcie" or e.a not in pos or e.b not in pos:
            continue
        pa, pb = pos[e.a], pos[e.b]
        y = pb.y + min(pb.h, BOX_H) / 2
        x0, x1 = pa.x + pa.w, pb.x
        colour, width = (BAD, 3.0) if e.state == "bad" else ("#555555", 1.2)
        wires.append(Wire(f"M{x0:.1f},{y:.1f} H{x1:.1f}", "pcie", e.state, colour, "", width,
                          e.label, (x0 + x1) / 2, y - 4, e.a, e.b))

    rails = [(i, e) for i, e in enumerate(graph.edges) if e.kind == "rail" and e.a in rows and e.b in rows]
    gpu_nv = [(i, e) for i, e in enumerate(graph.edges)
              if e.kind == "nvlink" and e.a in rows and e.b in rows]        # GPU to GPU NVLink
    spans = [(min(rows[e.a], rows[e.b]), max(rows[e.a], rows[e.b]), i) for i, e in rails + gpu_nv]
    lane_of = _lanes(spans)
    n_lanes = max(lane_of.values(), default=-1) + 1
    lane_x0 = dev_x + DEV_W
    for i, e in rails + gpu_nv:
        ya, yb = row_y(rows[e.a]) + BOX_H / 2, row_y(rows[e.b]) + BOX_H / 2
        lx = lane_x0 + (lane_of[i] + 1) * LANE_W
        cls = path_class(e.label) if e.kind == "rail" else "NV"
        colour, dash = PATH_STYLE[cls]
        d = f"M{lane_x0:.1f},{ya:.1f} H{lx:.1f} V{yb:.1f} H{lane_x0:.1f}"
        wires.append(Wire(d, e.kind, cls, colour, dash, 2.6, e.label, lx, (ya + yb) / 2, e.a, e.b))

    width = lane_x0 + (n_lanes + 1) * LANE_W
    nvs = next((n for n in graph.nodes if n.kind == "nvswitch"), None)
    if nvs is not None:
        links = [e for e in graph.edges if e.kind == "nvlink" and e.b == nvs.id and e.a in rows]
        if links:
            gy = [row_y(rows[e.a]) for e in links]
            x = width + 8
            box = Box(nvs.id, "nvswitch", nvs.state, x, min(gy), NVS_W, max(gy) + BOX_H - min(gy),
                      (nvs.label,) + ((nvs.detail,) if nvs.detail else ()), nvs.problems, None)
            boxes.append(box)
            colour = BAD if nvs.state == "bad" else PATH_STYLE["NV"][0]
            for e in links:
                y = row_y(rows[e.a]) + BOX_H / 2 + 6
                wires.append(Wire(f"M{lane_x0:.1f},{y:.1f} H{x:.1f}", "nvlink", "bad" if e.state == "bad" else "NV",
                                  colour, "" if e.state != "bad" else "5 3", 1.4, e.label, x - 18, y - 3,
                                  e.a, e.b))
            width = x + NVS_W
    height = top + max(len(rows), 1) * ROW_H + PAD
    legend = tuple((c, PATH_STYLE[c][0], PATH_STYLE[c][1], PATH_MEANING[c]) for c in PATH_STYLE if c != "unknown")
    return Layout(max(width + PAD, 960), height + LEGEND_H, tuple(boxes), tuple(wires), legend, height + 6)


def _tier_lines(kind: str, label: str, detail: str) -> tuple[str, ...]:
    if kind == "hostbridge":
        return ("host bridge", label.rsplit(" ", 1)[-1])
    if kind == "switch":
        head, _, rest = label.partition(" (")
        return ("PCIe switch" + (" (inferred)" if rest else ""), head.rsplit(" ", 1)[-1] if not rest else detail)
    return (label,) + ((detail,) if detail else ())


def svg(graph: TopoGraph, *, standalone: bool = False, title: str = "") -> str:
    """The diagram as SVG markup; standalone adds the XML prolog and namespace for a .svg file."""
    from ncdoc.report.page import render_template
    lay = layout(graph)
    return render_template("topology.svg.j2", lay=lay, standalone=standalone, title=title, bad=BAD,
                           excluded=EXCLUDED, n_gpus=len(graph.gpu_labels), n_nics=len(graph.nic_labels))


# ---------------------------------------------------------------- text formats for tickets

def _dot_str(s: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, line breaks and controls dropped."""
    s = "".join(ch if ch >= " " and ch != "\x7f" else " " for ch in s)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(graph: TopoGraph, *, title: str = "") -> str:
    """Graphviz DOT: `dot -Tsvg topo.dot > topo.svg`. Tiers as ranks left to right, rails dashed."""
    out = ["digraph topology {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", '
           'fontname="Helvetica", fontsize=10];', '  edge [arrowhead=none, color="#555555"];']
    if title:
        out.append(f"  label={_dot_str(title)}; labelloc=t;")
    for n in graph.nodes:
        text = n.label + (f"\n{n.detail}" if n.detail else "") + "".join(f"\n! {p}" for p in n.problems)
        attrs = [f"label={_dot_str(text)}"]
        if n.state == "bad":
            attrs.append(f'color="{BAD}", penwidth=2.5, fontcolor="{BAD}"')
        elif n.state == "excluded":
            attrs.append(f'color="{EXCLUDED}", fontcolor="{EXCLUDED}", style="rounded,dashed"')
        elif n.state == "inferred":
            attrs.append('style="rounded,dashed"')
        if n.kind == "gpu":
            attrs.append('fillcolor="#e8f1fa"')
        elif n.kind == "nic":
            attrs.append('fillcolor="#e9f6f0"' if n.state == "ok" else 'fillcolor="#f2f2f2"')
        out.append(f"  {n.id} [{', '.join(attrs)}];")
    for e in graph.edges:
        attrs = []
        if e.kind == "rail":
            colour, _ = PATH_STYLE[path_class(e.label)]
            attrs += [f"label={_dot_str(e.label)}", f'color="{colour}"', 'style="dashed"', "penwidth=2",
                      "constraint=false"]
        elif e.kind == "nvlink":
            attrs += [f"label={_dot_str(e.label)}", f'color="{PATH_STYLE["NV"][0]}"', "constraint=false"]
        elif e.label:
            attrs.append(f"label={_dot_str(e.label)}")
        if e.state == "bad":
            attrs += [f'color="{BAD}"', "penwidth=3"]
        out.append(f"  {e.a} -> {e.b}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    out.append("}")
    return "\n".join(out) + "\n"


def _mermaid_str(s: str) -> str:
    """Text for inside a Mermaid quoted label: '#' first, then quotes and markup characters, as
    Mermaid's #code; entities (its own escape), controls dropped."""
    s = "".join(ch if ch >= " " and ch != "\x7f" else " " for ch in s).replace("#", "#35;")
    for ch, ent in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;"), ("`", "#96;"), ("|", "#124;")):
        s = s.replace(ch, ent)
    return s


def mermaid(graph: TopoGraph, *, title: str = "") -> str:
    """Mermaid flowchart text (GitHub, GitLab and most trackers render it in a ```mermaid block)."""
    out = []
    if title:
        out += ["---", f'title: "{_mermaid_str(title)}"', "---"]
    out.append("flowchart LR")
    for n in graph.nodes:
        text = "<br/>".join(_mermaid_str(t) for t in (n.label, n.detail) if t)
        text += "".join(f"<br/>! {_mermaid_str(p)}" for p in n.problems)
        shape = (("[[", "]]") if n.kind in ("socket", "hostbridge")
                 else ("([", "])") if n.kind == "nvswitch" else ("[", "]"))
        out.append(f'  {n.id}{shape[0]}"{text}"{shape[1]}')
    links: list[str] = []
    for e in graph.edges:
        if e.kind == "pcie":
            arrow = f'---|"{_mermaid_str(e.label)}"|' if e.label else "---"
        else:
            arrow = f'-.-|"{_mermaid_str(e.label)}"|'
        out.append(f"  {e.a} {arrow} {e.b}")
        links.append(e.kind + (":" + path_class(e.label) if e.kind == "rail" else "") + (":bad" if e.state == "bad" else ""))
    for i, kind in enumerate(links):
        if kind.endswith(":bad"):
            out.append(f"  linkStyle {i} stroke:{BAD},stroke-width:3px")
        elif kind.startswith("rail:"):
            out.append(f"  linkStyle {i} stroke:{PATH_STYLE[kind.split(':')[1]][0]},stroke-width:2px")
        elif kind == "nvlink":
            out.append(f"  linkStyle {i} stroke:{PATH_STYLE['NV'][0]}")
    out.append(f"  classDef bad stroke:{BAD},stroke-width:3px,color:{BAD}")
    out.append(f"  classDef excluded stroke:{EXCLUDED},stroke-dasharray:4 3,color:{EXCLUDED}")
    for state in ("bad", "excluded"):
        ids = [n.id for n in graph.nodes if n.state == state]
        if ids:
            out.append(f"  class {','.join(ids)} {state}")
    return "\n".join(out) + "\n"


__all__ = ["svg", "dot", "mermaid", "layout", "PATH_STYLE", "PATH_MEANING"]
