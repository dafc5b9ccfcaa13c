"""Fixture machines: every bundled example builds, probes, round-trips and says what it claims."""

from __future__ import annotations

import json
import os

import pytest

from ncdoc.errors import InputError, UsageError
from ncdoc.examples.machines import build_machine, list_examples, load_example, load_spec, merge
from ncdoc.snapshot import Snapshot

EXAMPLES = [name for name, _ in list_examples()]
REQUIRED = {"dgx-h100", "h100-roce", "azure-ndv5", "l40s-pcie", "workstation-2gpu", "dgx-h100-port-down",
            "dgx-h100-half-rate", "dgx-h100-no-peermem", "dgx-h100-acs", "l40s-nic-other-socket"}


@pytest.fixture(scope="module")
def snaps():
    return {name: load_example(name) for name in EXAMPLES}


def test_the_issue_examples_are_bundled_with_descriptions():
    assert REQUIRED <= set(EXAMPLES)
    assert all(desc and "\n" not in desc for _, desc in list_examples())


@pytest.mark.parametrize("name", EXAMPLES)
def test_round_trip(name, snaps, tmp_path):
    snap = snaps[name]
    assert snap.origin == f"example:{name}"
    path = tmp_path / "s.json"
    path.write_text(snap.to_json())
    assert Snapshot.load(path) == snap
    assert json.loads(snap.to_json())["schema_version"] == 1


def test_load_example_reads_the_stored_snapshot_without_building_a_tree(monkeypatch):
    # the builder is for captures (`ncdoc snapshot --example`, the stored files' check); --example
    # itself only reads the stored snapshot
    import ncdoc.examples.machines as machines

    def no_tree(*args, **kwargs):
        raise AssertionError("load_example built a tree")
    monkeypatch.setattr(machines, "build_machine", no_tree)
    assert load_example("dgx-h100").origin == "example:dgx-h100"


def _pci_chain(snap, address):
    by = {d.address: d for d in snap.pci.devices}
    chain = []
    while address in by:
        address = by[address].parent
        chain.append(address)
    return chain


def test_dgx_h100_layout(snaps):
    s = snaps["dgx-h100"]
    assert [g.name for g in s.gpus.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
    assert all(sum(l.active for l in g.nvlinks) == 18 for g in s.gpus.gpus)
    assert s.gpus.fabric_manager == "completed" and {p.status for p in s.gpus.p2p} == {"OK"}
    ib = [h for h in s.hcas.hcas if h.ports[0].link_layer == "InfiniBand"]
    eth = [h for h in s.hcas.hcas if h.ports[0].link_layer == "Ethernet"]
    assert [h.name for h in ib] == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert len(eth) == 4 and {h.pci_address[:-2] for h in eth} == {"0000:29:00", "0000:aa:00"}
    assert all(h.ports[0].rate_text == "400 Gb/sec (4X NDR)" for h in ib)
    # every GPU shares its PCIe switch (the upstream port two levels up) with exactly one IB NIC
    for gpu in s.gpus.gpus:
        switch = _pci_chain(s, gpu.pci_bus_id)[1]
        mates = [h.name for h in ib if _pci_chain(s, h.pci_address)[1] == switch]
        assert len(mates) == 1, (gpu.pci_bus_id, mates)
    assert [g.numa_node for g in s.gpus.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert s.host.modules["nvidia_peermem"] and s.host.iommu == "passthrough"
    assert s.versions.nccl == "2.21.5" and s.versions.net_plugins


def test_broken_variants_differ_from_the_base_exactly_where_they_say(snaps):
    base = snaps["dgx-h100"]
    port = {h.name: h.ports[0] for h in snaps["dgx-h100-port-down"].hcas.hcas}["mlx5_4"]
    assert (port.state, port.phys_state, port.lid) == ("DOWN", "Polling", 0)
    assert snaps["dgx-h100-port-down"].netif("ibp79s0").operstate == "down"
    half = {h.name: h.ports[0] for h in snaps["dgx-h100-half-rate"].hcas.hcas}["mlx5_5"]
    assert (half.rate_gbps, half.speed) == (200.0, "HDR") and half.counters["symbol_error"] == 1482
    x8 = snaps["dgx-h100-pcie-x8"].pci_device("0000:9a:00.0")
    assert (x8.link_width, x8.max_link_width) == (8, 16)
    assert not snaps["dgx-h100-no-peermem"].host.modules["nvidia_peermem"]
    acs = {d.address: d.acs_ctrl for d in snaps["dgx-h100-acs"].pci.devices}
    assert acs["0000:17:00.0"] == "0x001d" and acs["0000:15:01.0"] == "0x0000"
    assert base.pci_device("0000:17:00.0").acs_ctrl == "0x0000"
    assert snaps["dgx-h100-fm-not-started"].gpus.fabric_manager == "not_started"
    assert base.hcas == snaps["dgx-h100-acs"].hcas            # the ACS overlay touches nothing else


def test_other_machines(snaps):
    roce = snaps["h100-roce"]
    assert all(h.ports[0].link_layer == "Ethernet" for h in roce.hcas.hcas) and len(roce.hcas.hcas) == 8
    assert {g.type for g in roce.hcas.hcas[0].ports[0].gids} == {"IB/RoCE v1", "RoCE v2"}
    assert roce.netif("bond0").slaves == ("eno1", "eno2")
    assert [v.source for v in roce.env.shadowed] == ["file:/etc/nccl.conf"]
    az = snaps["azure-ndv5"]
    assert az.host.hypervisor == "Microsoft"
    assert [h.name for h in az.hcas.hcas][1:] == [f"mlx5_ib{i}" for i in range(8)]
    assert all(d.parent == f"pci{d.address[:4]}:00" for d in az.pci.devices)      # flat: no bridges
    assert not [d for d in az.pci.devices if d.kind == "bridge"]
    l40s = snaps["l40s-pcie"]
    assert all(g.nvlinks == () for g in l40s.gpus.gpus) and l40s.gpus.fabric_manager == "not_supported"
    assert {p.status for p in l40s.gpus.p2p} == {"OK", "chipset_not_supported"}
    other = snaps["l40s-nic-other-socket"]
    assert {g.numa_node for g in other.gpus.gpus} == {0} and [h.numa_node for h in other.hcas.hcas] == [1]
    ws = snaps["workstation-2gpu"]
    assert len(ws.gpus.gpus) == 2 and ws.hcas.status.state == "absent"
    assert ws.env.get("NCCL_P2P_LEVEL") == "SYS" and ws.env.files == ("/home/alice/.nccl.conf",)


def test_tree_uses_real_names_contents_and_relative_symlinks(tmp_path):
    m = build_machine("dgx-h100", tmp_path)
    root = m.root
    link = os.path.join(root, "sys/class/infiniband/mlx5_0")
    assert os.path.islink(link) and os.readlink(link) == (
        "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/infiniband/mlx5_0")
    bus = os.readlink(os.path.join(root, "sys/bus/pci/devices/0000:1b:00.0"))
    assert bus == "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0/0000:1b:00.0"
    port = os.path.join(link, "ports/1")
    read = lambda rel: open(os.path.join(port, rel)).read()  # noqa: E731
    assert (read("state"), read("phys_state"), read("rate"), read("link_layer")) == (
        "4: ACTIVE\n", "5: LinkUp\n", "400 Gb/sec (4X NDR)\n", "InfiniBand\n")
    assert read("gids/0").startswith("fe80:0000:0000:0000:")
    dev = os.path.join(root, "sys/bus/pci/devices/0000:1b:00.0")
    assert open(os.path.join(dev, "class")).read() == "0x030200\n"
    assert open(os.path.join(dev, "current_link_speed")).read() == "32.0 GT/s PCIe\n"
    nvml = json.load(open(m.nvml_answers))
    assert nvml["devices"][0]["pci"]["busId"] == "00000000:1B:00.0" and len(nvml["devices"]) == 8


def test_spec_errors():
    with pytest.raises(UsageError):
        load_example("no-such-machine")
    with pytest.raises(InputError):
        load_spec({"devices": {}, "colour": "blue"})
    with pytest.raises(InputError):
        load_spec({"devices": {"0000:01:00.0": {"path": "pci0000:00", "part": "l40s", "speed": 3}}})


def test_build_errors_are_input_errors(tmp_path):
    bad_part = {"devices": {"0000:01:00.0": {"path": "pci0000:00", "part": "no-such-part"}}}
    no_master = {"devices": {"0000:01:00.0": {"path": "pci0000:00", "part": "intel-i211", "master": "bond9"}}}
    for i, spec in enumerate((bad_part, no_master)):
        with pytest.raises(InputError):
            build_machine(spec, tmp_path / str(i))


def test_overlay_merge():
    assert merge({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"c": None, "d": 3}, "l": [2]}) == {"a": {"b": 1, "d": 3},
                                                                                            "l": [2]}
    spec = load_spec("dgx-h100-no-peermem")
    assert "nvidia_peermem" not in spec["host"]["modules"] and spec["name"] == "dgx-h100-no-peermem"
