"""The topology as a reader sees it: one box per GPU and NIC, switches in tiers, rails by path type,
broken things red, NICs left out of NCCL_IB_HCA grey; and `ncdoc topo --format svg|dot|mermaid`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ncdoc.cli.main import main
from ncdoc.examples.machines import load_example
from ncdoc.report.topology_graph import build_graph
from ncdoc.report.topology_render import dot, layout, mermaid, svg
from ncdoc.topology import classify

SVG = "{http://www.w3.org/2000/svg}"
TOPO = ("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV4\tNV4\tNV4\tPIX\tSYS\t0-47\t0\n"
        "GPU1\tNV4\t X \tNV4\tNV4\tPIX\tSYS\t0-47\t0\n"
        "GPU2\tNV4\tNV4\t X \tNV4\tSYS\tPIX\t48-95\t1\n"
        "GPU3\tNV4\tNV4\tNV4\t X \tSYS\tPIX\t48-95\t1\n"
        "NIC0\tPIX\tPIX\tSYS\tSYS\t X \tSYS\n"
        "NIC1\tSYS\tSYS\tPIX\tPIX\tSYS\t X \n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")


def graph_of(name: str, ib_hca: str | None = None):
    snap = load_example(name)
    return snap, build_graph(snap, classify(snap), ib_hca=ib_hca)


def by_label(graph):
    return {n.label: n for n in graph.nodes}


def test_every_gpu_and_nic_is_one_box_under_its_switch_and_numa_node():
    snap, g = graph_of("dgx-h100")
    topo = classify(snap)
    devices = g.devices()
    assert sorted(n.endpoint for n in devices) == sorted(e.label for e in topo.endpoints)
    nodes = by_label(g)
    gpu0, nic0 = nodes["GPU0"], nodes["NIC0"]
    assert gpu0.parent == nic0.parent and g.node(gpu0.parent).kind == "switch"      # PIX: one switch
    socket = g.node(g.node(g.node(gpu0.parent).parent).parent)
    assert socket.kind == "socket" and socket.label == "NUMA node 0"
    assert g.node(g.node(nodes["GPU4"].parent).parent).kind == "hostbridge"
    assert g.node(g.node(g.node(nodes["GPU4"].parent).parent).parent).label == "NUMA node 1"


def test_rails_carry_nccls_path_type_and_nvlink_goes_to_the_switch_fabric():
    snap, g = graph_of("dgx-h100")
    topo = classify(snap)
    rails = [(g.node(e.a).endpoint, g.node(e.b).endpoint, e.label) for e in g.edges if e.kind == "rail"]
    assert len(rails) == 8
    for gpu, nic, path in rails:
        assert path == topo.path(gpu, nic) == "PIX"
    nvs = next(n for n in g.nodes if n.kind == "nvswitch")
    links = [e for e in g.edges if e.kind == "nvlink" and e.b == nvs.id]
    assert len(links) == 8 and {e.label for e in links} == {"NV18"}


@pytest.mark.parametrize("example, nic, words", [
    ("dgx-h100-port-down", "mlx5_4", "port 1 DOWN"),
    ("dgx-h100-pcie-x8", "mlx5_6", "PCIe x8 of x16"),
    ("dgx-h100-half-rate", "mlx5_5", "port 1 at 200 Gb/s, its peers at 400"),
])
def test_a_broken_nic_is_marked_bad_with_what_is_wrong(example, nic, words):
    _, g = graph_of(example)
    bad = [n for n in g.nodes if n.state == "bad"]
    assert [n.name for n in bad] == [nic]
    assert any(words in p for p in bad[0].problems), bad[0].problems
    healthy = graph_of("dgx-h100")[1]
    assert not [n for n in healthy.nodes if n.state == "bad"]


def test_a_pcie_link_trained_low_is_a_red_wire_in_the_drawing():
    _, g = graph_of("dgx-h100-pcie-x8")
    lay = layout(g)
    red = [w for w in lay.wires if w.kind == "pcie" and w.cls == "bad"]
    assert len(red) == 1 and "x8 of x16" in red[0].label
    assert by_label(g)[g.node(red[0].b).label].name == "mlx5_6"


def test_nics_outside_nccl_ib_hca_are_greyed_not_dropped():
    _, g = graph_of("dgx-h100", ib_hca="=mlx5_0,mlx5_3")
    states = {n.name: n.state for n in g.devices() if n.kind == "nic"}
    assert states["mlx5_0"] == states["mlx5_3"] == "ok"
    assert states["mlx5_4"] == "excluded" and len(states) == 12
    _, g = graph_of("dgx-h100", ib_hca="^mlx5_1,mlx5_2")
    states = {n.name: n.state for n in g.devices() if n.kind == "nic"}
    assert states["mlx5_1"] == states["mlx5_2"] == "excluded" and states["mlx5_0"] == "ok"


def test_fabric_manager_not_running_turns_the_nvswitch_red():
    _, g = graph_of("dgx-h100-fm-not-started")
    nvs = next(n for n in g.nodes if n.kind == "nvswitch")
    assert nvs.state == "bad" and "fabric manager not started" in nvs.problems


def test_nested_switches_are_one_tier_each():
    _, g = graph_of("l40s-pcie")
    nodes = by_label(g)
    inner = g.node(nodes["GPU0"].parent)
    outer = g.node(inner.parent)
    assert inner.kind == outer.kind == "switch"
    assert g.node(nodes["NIC0"].parent) is outer or nodes["NIC0"].parent == outer.id
    assert nodes["GPU0"].parent == nodes["GPU1"].parent != nodes["GPU2"].parent


def test_a_pasted_matrix_draws_inferred_switches_from_pix(tmp_path, capsys):
    (tmp_path / "topo.txt").write_text(TOPO)
    from ncdoc.importers import import_evidence
    snap = import_evidence(tmp_path / "topo.txt")
    g = build_graph(snap, classify(snap))
    nodes = by_label(g)
    sw = g.node(nodes["GPU0"].parent)
    assert sw.state == "inferred" and nodes["GPU1"].parent == nodes["NIC0"].parent == sw.id
    assert g.node(sw.parent).label == "NUMA node 0"
    assert any(n.kind == "nvswitch" for n in g.nodes)          # NV4 between every pair


def test_svg_is_well_formed_and_has_one_node_per_device(capsys):
    rc = main(["topo", "--example", "dgx-h100-port-down", "--format", "svg"])
    out = capsys.readouterr().out
    assert rc == 0
    root = ET.fromstring(out.split("?>", 1)[1])
    nodes = [g for g in root.iter(f"{SVG}g") if (g.get("class") or "").startswith("node ")]
    assert len(nodes) == 20 and sum(1 for g in nodes if g.get("data-state") == "bad") == 1
    assert root.get("data-gpus") == "8" and root.get("data-nics") == "12"


def test_dot_and_mermaid_name_every_device_and_mark_the_down_port(capsys):
    assert main(["topo", "--example", "dgx-h100-port-down", "--format", "dot"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("digraph topology {") and text.rstrip().endswith("}")
    for i in range(8):
        assert f'label="GPU{i}' in text
    assert "port 1 DOWN" in text and "penwidth=2.5" in text
    assert main(["topo", "--example", "dgx-h100-port-down", "--format", "mermaid"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[3] == "flowchart LR" and "port 1 DOWN" in text and "class " in text


def test_labels_from_inputs_are_escaped_in_every_format():
    snap = load_example("dgx-h100")
    evil = snap.replace(gpus=snap.gpus.__class__(snap.gpus.status, tuple(
        g.__class__(**{**g.__dict__, "name": 'H100 "x" <script>alert(1)</script> | `b` # & \\'})
        for g in snap.gpus.gpus), snap.gpus.p2p, snap.gpus.fabric_manager))
    g = build_graph(evil, classify(evil))
    s = svg(g, standalone=True)
    ET.fromstring(s.split("?>", 1)[1])                       # still well-formed XML
    assert "<script>" not in s and "&lt;script&gt;" in s
    d = dot(g)
    assert '\\"x\\"' in d and "\\\\" in d
    m = mermaid(g)
    assert "<script>" not in m and '"x"' not in m and "#quot;x#quot;" in m and "#lt;script#gt;" in m


def test_format_and_json_disagreeing_is_usage(capsys):
    rc = main(["topo", "--example", "dgx-h100", "--json", "--format", "svg"])
    assert rc == 2 and "disagree" in capsys.readouterr().err


def test_json_and_text_unchanged_by_the_new_option(capsys):
    assert main(["topo", "--example", "dgx-h100", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1 and data["facts"]["rails"]["GPU0"]["path"] == "PIX"
