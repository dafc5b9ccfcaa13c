"""The path classifier on small hand-built PCI trees and imported matrices."""

from __future__ import annotations

import pytest

from ncdoc.snapshot import (Gpu, GpuSection, Hca, HcaSection, NumaNode, NumaSection, NvLink, PathMatrix,
                            PciDevice, PciSection, Snapshot, Status)
from ncdoc.topology import PATH_TYPES, classify, natural_key, normalize_bus_id, path_rank


def tree(*devices, numa_nodes=(0,), gpus=None, hcas=None) -> Snapshot:
    """devices: (address, parent, kind[, numa]) tuples; GPUs/HCAs named after kind order."""
    devs = tuple(PciDevice(address=a, parent=p, kind=k, numa_node=(rest[0] if rest else None))
                 for a, p, k, *rest in devices)
    if gpus is None:
        gpus = tuple(Gpu(index=i, name="NVIDIA H100 80GB HBM3", pci_bus_id=d.address)
                     for i, d in enumerate(d for d in devs if d.kind == "gpu"))
    if hcas is None:
        hcas = tuple(Hca(name=f"mlx5_{i}", pci_address=d.address)
                     for i, d in enumerate(d for d in devs if d.kind == "nic"))
    return Snapshot(gpus=GpuSection(Status.ok("test"), tuple(gpus)),
                    hcas=HcaSection(Status.ok("test"), tuple(hcas)),
                    pci=PciSection(Status.ok("test"), devs),
                    numa=NumaSection(Status.ok("test"), tuple(NumaNode(n) for n in numa_nodes)))


# one PCIe switch under a root port: RP 00:01.0 -> USP 01:00.0 -> DSPs 02:0x.0 -> endpoints
SWITCH = [("0000:00:01.0", "pci0000:00", "bridge", 0), ("0000:01:00.0", "0000:00:01.0", "bridge", 0),
          ("0000:02:00.0", "0000:01:00.0", "bridge", 0), ("0000:02:01.0", "0000:01:00.0", "bridge", 0),
          ("0000:03:00.0", "0000:02:00.0", "gpu", 0), ("0000:04:00.0", "0000:02:01.0", "nic", 0)]


def test_path_rank_orders_paths_like_nccl():
    assert [path_rank(p) for p in ("X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS")] == list(range(7))
    assert path_rank("NV4") == path_rank("NV") == 1
    assert path_rank("SOC") == path_rank("SYS") == 6
    assert path_rank(" pix ") == 2
    assert path_rank("LOC?") == 99 and path_rank("") == 99
    assert PATH_TYPES[0] == "X" and PATH_TYPES[-1] == "SYS"


def test_normalize_bus_id_and_natural_order():
    assert normalize_bus_id("00000000:18:00.0") == "0000:18:00.0"
    assert normalize_bus_id("18:00.0") == "0000:18:00.0"
    assert normalize_bus_id("0001:C6:00") == "0001:c6:00.0"
    assert normalize_bus_id(None) is None
    assert sorted(["mlx5_10", "mlx5_2", "mlx5_bond_0", "mlx5_1"], key=natural_key) == \
        ["mlx5_1", "mlx5_2", "mlx5_10", "mlx5_bond_0"]


def test_same_switch_is_pix():
    topo = classify(tree(*SWITCH))
    assert topo.source == "pci" and topo.status.state == "ok"
    assert topo.path("GPU0", "NIC0") == "PIX"
    assert topo.path("GPU0", "mlx5_0") == "PIX"          # by HCA name too
    assert topo.path("NIC0", "NIC0") == "X"
    assert topo.rails == {"GPU0": ("mlx5_0",)}
    assert topo.nearest_nic("GPU0") == ("mlx5_0", "PIX")
    assert topo.nic_names == {"NIC0": "mlx5_0"}


def test_two_switch_levels_is_pxb():
    # RP -> USP1 -> DSP1a -> USP2 -> DSP2a -> GPU ; USP1 -> DSP1b -> NIC
    devs = [("0000:00:01.0", "pci0000:00", "bridge"), ("0000:01:00.0", "0000:00:01.0", "bridge"),
            ("0000:02:00.0", "0000:01:00.0", "bridge"), ("0000:02:01.0", "0000:01:00.0", "bridge"),
            ("0000:03:00.0", "0000:02:00.0", "bridge"), ("0000:04:00.0", "0000:03:00.0", "bridge"),
            ("0000:04:01.0", "0000:03:00.0", "bridge"),
            ("0000:05:00.0", "0000:04:00.0", "gpu"), ("0000:06:00.0", "0000:04:01.0", "gpu"),
            ("0000:07:00.0", "0000:02:01.0", "nic")]
    topo = classify(tree(*devs))
    assert topo.path("GPU0", "NIC0") == "PXB"
    assert topo.path("GPU1", "NIC0") == "PXB"
    assert topo.path("GPU0", "GPU1") == "PIX"             # both under the lower switch
    assert topo.rails["GPU0"] == ("mlx5_0",)


def test_different_root_ports_of_one_host_bridge_is_phb():
    devs = [("0000:00:01.0", "pci0000:00", "bridge"), ("0000:00:02.0", "pci0000:00", "bridge"),
            ("0000:01:00.0", "0000:00:01.0", "gpu"), ("0000:02:00.0", "0000:00:02.0", "nic")]
    assert classify(tree(*devs)).path("GPU0", "NIC0") == "PHB"


def test_devices_on_the_root_bus_itself_are_phb():
    # VMs often put devices straight on the root bus, with no bridge at all
    devs = [("0000:10:1c.0", "pci0000:10", "gpu"), ("0000:10:1b.0", "pci0000:10", "nic")]
    assert classify(tree(*devs)).path("GPU0", "NIC0") == "PHB"


def test_host_bridges_of_one_numa_node_are_node_and_other_numa_is_sys():
    devs = [("0000:17:00.0", "pci0000:17", "bridge", 0), ("0000:18:00.0", "0000:17:00.0", "gpu", 0),
            ("0000:3a:00.0", "pci0000:3a", "bridge", 0), ("0000:3b:00.0", "0000:3a:00.0", "nic", 0),
            ("0000:97:00.0", "pci0000:97", "bridge", 1), ("0000:98:00.0", "0000:97:00.0", "gpu", 1)]
    topo = classify(tree(*devs, numa_nodes=(0, 1)))
    assert topo.path("GPU0", "NIC0") == "NODE"
    assert topo.path("GPU1", "NIC0") == "SYS"
    assert topo.path("GPU0", "GPU1") == "SYS"
    assert topo.numa == {"GPU0": 0, "GPU1": 1, "NIC0": 0}


def test_unknown_numa_across_host_bridges():
    devs = [("0000:17:00.0", "pci0000:17", "gpu"), ("0000:3a:00.0", "pci0000:3a", "nic")]
    # one NUMA node on the machine: different host bridges can only be NODE
    assert classify(tree(*devs, numa_nodes=(0,))).path("GPU0", "NIC0") == "NODE"
    # several NUMA nodes and neither side's known: say unknown, never guess
    topo = classify(tree(*devs, numa_nodes=(0, 1)))
    assert topo.path("GPU0", "NIC0") is None
    assert any("GPU0-NIC0" in n for n in topo.notes)
    assert topo.rails["GPU0"] == ()
    assert topo.nearest_nic("GPU0") is None


def test_host_bridge_numa_is_inferred_from_its_other_devices():
    devs = [("0000:17:00.0", "pci0000:17", "bridge", 1), ("0000:18:00.0", "0000:17:00.0", "gpu"),
            ("0000:3a:00.0", "pci0000:3a", "nic", 0)]
    topo = classify(tree(*devs, numa_nodes=(0, 1)))
    assert topo.numa["GPU0"] == 1
    assert topo.path("GPU0", "NIC0") == "SYS"


def test_nccl_xml_switch_nodes_count_one_bridge_each():
    # NCCL's XML has one <pci> per whole switch: S1 > S2 > S3; GPU under S3, NIC under S2
    devs = [("ffff:ff:01.0", "cpu0", "switch", 0), ("ffff:ff:02.0", "ffff:ff:01.0", "switch", 0),
            ("ffff:ff:03.0", "ffff:ff:02.0", "switch", 0),
            ("0000:10:00.0", "ffff:ff:03.0", "gpu", 0), ("0000:20:00.0", "ffff:ff:02.0", "nic", 0),
            ("0000:30:00.0", "ffff:ff:03.0", "nic", 0)]
    topo = classify(tree(*devs))
    assert topo.path("GPU0", "NIC0") == "PXB"
    assert topo.path("GPU0", "NIC1") == "PIX"


def _gpu(i, addr, links):
    return Gpu(index=i, name="NVIDIA H100 80GB HBM3", pci_bus_id=addr, nvlinks=tuple(links))


def test_nvswitch_gpus_are_nv_min_of_switch_links():
    addrs = ["0000:18:00.0", "0000:2a:00.0", "0000:9a:00.0"]
    devs = [(a, f"pci0000:{a[5:7]}", "gpu", 0 if i < 2 else 1) for i, a in enumerate(addrs)]
    sw = "0000:05:00.0"
    gpus = [_gpu(0, addrs[0], [NvLink(n, True, sw, "switch") for n in range(18)]),
            _gpu(1, addrs[1], [NvLink(n, True, sw, "switch") for n in range(18)]),
            # a GPU with 6 links down: NV12 with everyone
            _gpu(2, addrs[2], [NvLink(n, n < 12, sw, "switch") for n in range(18)])]
    topo = classify(tree(*devs, numa_nodes=(0, 1), gpus=gpus))
    assert topo.path("GPU0", "GPU1") == "NV18"
    assert topo.path("GPU0", "GPU2") == "NV12"
    assert topo.path("GPU2", "GPU1") == "NV12"


def test_direct_nvlinks_count_per_peer():
    a, b, c = "0000:18:00.0", "0000:3b:00.0", "0000:86:00.0"
    devs = [(a, "pci0000:17", "gpu", 0), (b, "pci0000:3a", "gpu", 0), (c, "pci0000:85", "gpu", 1)]
    gpus = [_gpu(0, a, [NvLink(0, True, "00000000:3B:00.0", "gpu"), NvLink(1, True, b, "gpu"),
                        NvLink(2, False, b, "gpu")]),
            _gpu(1, b, [NvLink(0, True, a, "gpu"), NvLink(1, True, a, "gpu")]),
            _gpu(2, c, [])]
    topo = classify(tree(*devs, numa_nodes=(0, 1), gpus=gpus))
    assert topo.path("GPU0", "GPU1") == "NV2"
    assert topo.path("GPU0", "GPU2") == "SYS"             # no NVLink: the PCIe path


def test_rails_pick_every_nic_at_the_best_path_in_natural_order():
    devs = [("0000:00:01.0", "pci0000:00", "bridge", 0), ("0000:01:00.0", "0000:00:01.0", "bridge", 0),
            ("0000:02:00.0", "0000:01:00.0", "bridge", 0), ("0000:02:01.0", "0000:01:00.0", "bridge", 0),
            ("0000:02:02.0", "0000:01:00.0", "bridge", 0),
            ("0000:03:00.0", "0000:02:00.0", "gpu", 0), ("0000:04:00.0", "0000:02:01.0", "nic", 0),
            ("0000:05:00.0", "0000:02:02.0", "nic", 0), ("0000:80:00.0", "pci0000:80", "nic", 1)]
    hcas = [Hca("mlx5_10", pci_address="0000:04:00.0"), Hca("mlx5_2", pci_address="0000:05:00.0"),
            Hca("mlx5_0", pci_address="0000:80:00.0")]
    topo = classify(tree(*devs, numa_nodes=(0, 1), hcas=hcas))
    assert [e.name for e in topo.nics()] == ["mlx5_0", "mlx5_2", "mlx5_10"]
    assert topo.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_2", "NIC2": "mlx5_10"}
    assert topo.rails["GPU0"] == ("mlx5_2", "mlx5_10")
    assert topo.path("GPU0", "mlx5_0") == "SYS"
    facts = topo.facts()
    assert facts["rails"]["GPU0"] == {"nics": ["mlx5_2", "mlx5_10"], "path": "PIX"}


def test_pci_nics_stand_in_only_when_rdma_devices_are_unknown():
    snap = tree(*SWITCH, hcas=())
    unknown = classify(snap.replace(hcas=HcaSection(Status.unknown("static NCCL XML names no net"))))
    assert unknown.rails == {"GPU0": ("NIC0",)} and unknown.nic_names == {}
    # looked for RDMA devices and found none: no NIC column, as nvidia-smi shows it
    none = classify(snap.replace(hcas=HcaSection(Status.absent("no /sys/class/infiniband"))))
    assert none.nics() == () and none.rails == {"GPU0": ()}
    nothing = classify(tree(("0000:00:01.0", "pci0000:00", "bridge")))
    assert nothing.status.state == "absent" and nothing.endpoints == ()


def test_matrix_is_used_as_given():
    pm = PathMatrix(Status.ok("import:topo_matrix:x"), ("GPU0", "GPU1", "NIC0"),
                    {"GPU0": {"GPU0": "X", "GPU1": "SOC", "NIC0": "PIX"},
                     "GPU1": {"GPU0": "SYS", "GPU1": "X"}},           # NIC0 row and GPU1-NIC0 cut off
                    nic_names={"NIC0": "mlx5_4"}, numa_affinity={"GPU0": "0", "GPU1": "N/A"}, truncated=True)
    topo = classify(Snapshot(paths=pm))
    assert topo.source == "matrix"
    assert topo.path("GPU0", "GPU1") == "SYS"                 # SOC is SYS
    assert topo.path("NIC0", "GPU0") == "PIX"                 # filled from the other triangle
    assert topo.path("GPU1", "NIC0") is None
    assert topo.numa == {"GPU0": 0, "GPU1": None, "NIC0": 0}  # PIX implies GPU0's NUMA node
    assert topo.rails == {"GPU0": ("mlx5_4",), "GPU1": ()}
    assert topo.notes


def test_pci_tree_wins_over_matrix_and_nothing_is_unknown():
    snap = tree(*SWITCH).replace(paths=PathMatrix(Status.ok("m"), ("GPU0", "NIC0"),
                                                  {"GPU0": {"NIC0": "SYS"}}))
    assert classify(snap).path("GPU0", "NIC0") == "PIX"
    empty = classify(Snapshot())
    assert empty.status.state == "unknown" and empty.source == "none" and empty.matrix == {}


@pytest.mark.parametrize("snap", [
    Snapshot(pci=PciSection(Status.ok("t"), (PciDevice("0000:00:01.0", "0000:00:01.0"),))),  # self parent
    Snapshot(pci=PciSection(Status.ok("t"), (PciDevice("0000:01:00.0", "0000:02:00.0", kind="gpu"),
                                             PciDevice("0000:02:00.0", "0000:01:00.0")))),     # cycle
])
def test_malformed_trees_do_not_hang_or_crash(snap):
    classify(snap)
