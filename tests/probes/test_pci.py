"""The PCIe tree: parents from resolved paths, link facts, ACS from config space bytes."""

from __future__ import annotations

import struct

import pytest

from ncdoc.examples.machines import build_machine
from ncdoc.probes.pci import acs_control, probe_pci
from ncdoc.probes.sysfs import SysfsReader


@pytest.fixture(scope="module")
def l40s(tmp_path_factory):
    return build_machine("l40s-pcie", tmp_path_factory.mktemp("l40s"))


def _config(caps: list[tuple[int, int, int]]) -> bytes:
    """4 KiB config space with extended capabilities (id, offset, control) chained in order."""
    data = bytearray(4096)
    for i, (cap_id, offset, ctrl) in enumerate(caps):
        nxt = caps[i + 1][1] if i + 1 < len(caps) else 0
        struct.pack_into("<IHH", data, offset, cap_id | (1 << 16) | (nxt << 20), 0x5F, ctrl)
    return bytes(data)


def test_acs_control_walks_the_extended_capability_list():
    assert acs_control(_config([(0x0001, 0x100, 0), (0x000D, 0x148, 0x001D)])) == "0x001d"
    assert acs_control(_config([(0x000D, 0x100, 0x0000)])) == "0x0000"
    assert acs_control(_config([(0x0001, 0x100, 0), (0x0019, 0x180, 0)])) == "none"
    assert acs_control(bytes(64)) is None                    # not root: only the first 64 bytes
    assert acs_control(bytes(4096)) is None                  # no extended capabilities at all
    assert acs_control(None) is None


def test_every_bridge_is_present_with_parent_links(l40s):
    pci, notes = probe_pci(SysfsReader(l40s.root))
    assert pci.status.state == "ok" and not notes
    by = {d.address: d for d in pci.devices}
    chain, addr = [], "0000:1b:00.0"
    while addr in by:
        chain.append(addr)
        addr = by[addr].parent
    assert chain + [addr] == ["0000:1b:00.0", "0000:1a:00.0", "0000:19:00.0", "0000:18:00.0", "0000:17:00.0",
                              "0000:16:01.0", "pci0000:16"]
    gpu, nic = by["0000:1b:00.0"], by["0000:21:00.0"]
    assert (gpu.kind, gpu.class_code, gpu.vendor, gpu.device, gpu.numa_node) == ("gpu", "0x030200", "0x10de", "0x26b9", 0)
    assert (gpu.link_speed, gpu.link_width, gpu.max_link_speed, gpu.max_link_width) == ("16.0 GT/s PCIe", 16,
                                                                                         "16.0 GT/s PCIe", 16)
    assert (nic.kind, nic.driver, nic.parent) == ("nic", "mlx5_core", "0000:18:02.0")
    assert by["0000:18:00.0"].acs_ctrl == "0x0000" and by["0000:17:00.0"].acs_ctrl is None   # upstream: no ACS
    assert by["0000:03:00.0"].kind == "other"                  # the BMC's VGA is not a GPU
    assert by["0000:a2:00.0"].numa_node == 1


def test_non_root_config_reads_leave_acs_unknown(tmp_path):
    spec = {"host": {"probe_as_root": False}, "host_bridges": {"pci0000:00": {"numa": 0}},
            "devices": {"0000:01:00.0": {"path": "pci0000:00/00:01.0", "part": "l40s"}}}
    machine = build_machine(spec, tmp_path)
    pci, _ = probe_pci(SysfsReader(machine.root))
    assert {d.address: d.acs_ctrl for d in pci.devices} == {"0000:00:01.0": None, "0000:01:00.0": None}


def test_no_pci_bus(tmp_path):
    pci, notes = probe_pci(SysfsReader(str(tmp_path)))
    assert pci.status.state == "unknown" and notes
