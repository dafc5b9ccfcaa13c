"""Simulator clusters: presets, validation, and clusters built from snapshots."""

import sys

import pytest

from ncdoc.errors import UsageError
from ncdoc.snapshot import Gpu, GpuSection, Hca, HcaSection, Host, NvLink, Port, Snapshot, Status, Versions
from ncdoc.tuner.sim import PRESETS, SimCluster, cluster_from_snapshot, preset, simulate


def test_presets_cover_the_named_scenarios():
    for name in ("h100-ib-2node", "h100-roce-2node", "h100-1node", "h100-socket-2node", "a100-ib-4node",
                 "l40s-pcie-2node", "h100-ib-8node", "h100-ib-16node"):
        assert name in PRESETS
    for name in PRESETS:
        c = preset(name)
        assert c.name == name and c.nranks == c.nodes * c.gpus_per_node
    h = preset("h100-ib-2node")
    assert (h.nvlink_bw, h.pcie_bw, h.nic_bw) == (pytest.approx(370.8), 48.0, 50.0)
    assert preset("h100-roce-2node").link_layer == "RoCE" and preset("h100-roce-2node").ecmp_paths > 1


def test_bad_cluster_descriptions_are_usage_errors():
    with pytest.raises(UsageError, match="unknown simulator preset"):
        preset("dgx-z9000")
    with pytest.raises(UsageError, match="unknown fabric"):
        SimCluster(fabric="omnipath")
    with pytest.raises(UsageError, match="gpu_nic_paths"):
        SimCluster(gpus_per_node=2, gpu_nic_paths=("PIX",))
    with pytest.raises(UsageError, match="link layer"):
        SimCluster(fabric="ib", link_layer="RoCE")
    assert SimCluster(gpu_nic_paths=("NODE",) * 8).nic_paths == ("PHB",) * 8


def _snapshot(peermem=True, link_layer="InfiniBand", cpu="GenuineIntel"):
    gpus = tuple(Gpu(index=i, name="NVIDIA H100 80GB HBM3", pci_bus_id=f"0000:{0x18 + i:02x}:00.0",
                     compute_capability="9.0",
                     nvlinks=tuple(NvLink(link=k, active=True, remote_type="switch") for k in range(18)))
                 for i in range(8))
    hcas = tuple(Hca(name=f"mlx5_{i}", ports=(Port(num=1, state="ACTIVE", rate_gbps=400.0, link_layer=link_layer),))
                 for i in range(8))
    return Snapshot(host=Host(status=Status.ok(), cpu_vendor=cpu, modules={"nvidia_peermem": peermem}),
                    versions=Versions(status=Status.ok(), nccl="2.23.4"),
                    gpus=GpuSection(status=Status.ok(), gpus=gpus, fabric_manager="completed"),
                    hcas=HcaSection(status=Status.ok(), hcas=hcas))


def test_cluster_from_a_hand_built_snapshot():
    c = cluster_from_snapshot(_snapshot(), 4, gpu_nic_paths=("PIX",) * 8, congestion=0.2)
    assert (c.nodes, c.gpus_per_node, c.sm, c.nvlink_links, c.nvswitch, c.nvls) == (4, 8, 90, 18, True, True)
    assert (c.nics_per_node, c.nic_rate_gbps, c.fabric, c.gdr, c.cpu_vendor) == (8, 400.0, "ib", True, "Intel")
    assert c.nccl_version == "2.23.4" and c.congestion == 0.2
    roce = cluster_from_snapshot(_snapshot(peermem=False, link_layer="Ethernet", cpu="AuthenticAMD"), 2)
    assert (roce.fabric, roce.link_layer, roce.gdr, roce.cpu_vendor) == ("roce", "RoCE", False, "AMD")
    assert simulate(roce, {}, "all_reduce", [1 << 30])[0].busbw < simulate(c, {}, "all_reduce", [1 << 30])[0].busbw


def test_cluster_from_snapshot_without_the_topology_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "ncdoc.topology", None)     # import fails: fall back to defaults
    c = cluster_from_snapshot(_snapshot(), 2)
    assert c.nic_paths == ("PIX",) * 8
    c = cluster_from_snapshot(_snapshot(), 2, gpu_nic_paths=("PIX",) * 4 + ("SYS",) * 4)
    assert c.nic_paths[-1] == "SYS"


def test_cluster_from_bundled_examples():
    machines = pytest.importorskip("ncdoc.examples.machines")
    try:
        dgx = machines.load_example("dgx-h100")
        no_peermem = machines.load_example("dgx-h100-no-peermem")
    except Exception as exc:    # examples are another module's data; their absence is not ours to fail
        pytest.skip(f"bundled examples unavailable: {exc}")
    c = cluster_from_snapshot(dgx, 2)
    assert (c.gpus_per_node, c.sm, c.nics_per_node, c.fabric, c.gdr) == (8, 90, 8, "ib", True)
    assert set(c.nic_paths) == {"PIX"}
    slow = cluster_from_snapshot(no_peermem, 2)
    assert not slow.gdr
    big = [1 << 30]
    assert simulate(slow, {}, "all_reduce", big)[0].busbw < 0.6 * simulate(c, {}, "all_reduce", big)[0].busbw
