"""RDMA devices from sysfs, with and without pyverbs, on fixture trees and edited copies of them."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ncdoc.examples.machines import build_machine
from ncdoc.probes.hcas import parse_rate, probe_hcas, roce_mtu
from ncdoc.probes.sysfs import SysfsReader
from ncdoc.examples.verbs_replay import RecordedVerbs
from ncdoc.snapshot import Status


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    return build_machine("dgx-h100", tmp_path_factory.mktemp("dgx"))


@pytest.fixture(scope="module")
def roce(tmp_path_factory):
    return build_machine("h100-roce", tmp_path_factory.mktemp("roce"))


def test_rate_and_mtu_helpers():
    assert parse_rate("400 Gb/sec (4X NDR)") == (400.0, "4X", "NDR")
    assert parse_rate("2.5 Gb/sec (1X SDR)") == (2.5, "1X", "SDR")
    assert parse_rate("garbage") == (None, None, None)
    # iboe_get_mtu: netdev MTU minus 96 bytes of RoCE headers, rounded down to an IB MTU
    assert [roce_mtu(m) for m in (9000, 4192, 4191, 1500, 1120, 1119, 0)] == [4096, 4096, 2048, 1024, 1024, 512, None]


def test_ib_ports_without_pyverbs_fall_back_to_sysfs(dgx):
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=None)
    assert section.status.state == "ok" and section.status.source == "sysfs:/sys/class/infiniband"
    names = [h.name for h in section.hcas]
    assert names[:3] == ["mlx5_0", "mlx5_1", "mlx5_2"] and names[-1] == "mlx5_11"
    ib = section.hcas[0]
    assert (ib.pci_address, ib.numa_node, ib.hca_type, ib.vendor_part_id, ib.driver) == (
        "0000:18:00.0", 0, "MT4129", 0x1021, "mlx5_core")
    port = ib.ports[0]
    assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == ("ACTIVE", "LinkUp", 400.0, "InfiniBand")
    assert port.active_mtu is None and port.max_mtu is None
    assert any("pyverbs is not installed" in n for n in notes)
    assert port.gids[0].gid.startswith("fe80:0000:0000:0000:") and port.gids[0].type is None
    assert port.netdevs == ("ibp24s0",) and "symbol_error" in port.counters and "out_of_sequence" in port.counters


def test_pyverbs_supplies_the_mtu(dgx):
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=dgx.verbs())
    assert section.status.source.endswith("+pyverbs") and not notes
    assert all(p.active_mtu == 4096 and p.max_mtu == 4096 for h in section.hcas for p in h.ports)


def test_pyverbs_with_no_device_means_sysfs_only(dgx):
    # no /sys/class/infiniband_verbs: pyverbs raises PyverbsRDMAError, which means "no devices"
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=RecordedVerbs({"devices": {}}))
    assert section.status == Status.ok(source="sysfs:/sys/class/infiniband")
    assert section.hcas[0].ports[0].active_mtu is None and section.hcas[0].ports[0].state == "ACTIVE"
    assert notes == ["HCA facts from sysfs only, InfiniBand port MTUs unknown: libibverbs lists no device "
                     "(Failed to get devices list: is ib_uverbs loaded?)"]
    # uverbs there, but no provider claims the devices: pyverbs returns [], the same "no devices"
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=RecordedVerbs({"devices": {}, "uverbs": True}))
    assert section.status.state == "ok" and len(section.hcas) == 12
    assert notes == ["HCA facts from sysfs only, InfiniBand port MTUs unknown: libibverbs lists none of them "
                     "(no userspace provider: ibverbs-providers missing or too old?)"]


def test_why_pyverbs_was_not_used_is_a_note(dgx, roce):
    _, notes = probe_hcas(SysfsReader(dgx.root), no_verbs="pyverbs failed to import (ImportError: "
                          "/lib/x86_64-linux-gnu/libibverbs.so.1: version `IBVERBS_PRIVATE_59' not found)")
    assert notes == ["HCA facts from sysfs only, InfiniBand port MTUs unknown: pyverbs failed to import "
                     "(ImportError: /lib/x86_64-linux-gnu/libibverbs.so.1: version `IBVERBS_PRIVATE_59' not found)"]
    # RoCE MTUs follow from the netdevs, so nothing is unknown, but the source is still said
    section, notes = probe_hcas(SysfsReader(roce.root))
    assert notes == ["HCA facts from sysfs only: pyverbs is not installed (the 'verbs' extra)"]
    assert section.status.source == "sysfs:/sys/class/infiniband"


def _answers(machine) -> dict:
    return json.loads(open(machine.verbs_answers, encoding="utf-8").read())


def test_devices_pyverbs_cannot_open_keep_their_sysfs_facts(dgx):
    # a container that sees the devices but has no /dev/infiniband: every open fails with ENOENT
    answers = _answers(dgx)
    for record in answers["devices"].values():
        record["open_errno"] = 2
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=RecordedVerbs(answers))
    assert section.status.source == "sysfs:/sys/class/infiniband" and len(section.hcas) == 12
    assert notes == ["HCA facts from sysfs only, InfiniBand port MTUs unknown: pyverbs could not query any of the "
                     "12 devices (Failed to open device mlx5_0. Errno: 2, No such file or directory)"]
    # one device missing from the list, one failing: the rest still get their MTUs from pyverbs
    answers = _answers(dgx)
    del answers["devices"]["mlx5_11"]
    answers["devices"]["mlx5_3"]["open_errno"] = 13
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=RecordedVerbs(answers))
    assert section.status.source == "sysfs:/sys/class/infiniband+pyverbs"
    mtus = {h.name: h.ports[0].active_mtu for h in section.hcas}
    assert mtus["mlx5_0"] == 4096 and mtus["mlx5_3"] is None and mtus["mlx5_11"] is None
    assert notes == ["InfiniBand port MTUs unknown for some devices: pyverbs could not query mlx5_3 "
                     "(Failed to open device mlx5_3. Errno: 13, Permission denied); pyverbs does not list mlx5_11"]


def test_a_pyverbs_failure_other_than_no_devices_is_said(dgx):
    class Broken:
        def get_device_list(self):
            raise OSError(24, "Too many open files")
    section, notes = probe_hcas(SysfsReader(dgx.root), verbs=Broken())
    assert section.status.state == "ok" and notes == [
        "HCA facts from sysfs only, InfiniBand port MTUs unknown: pyverbs failed (OSError: [Errno 24] Too many open files)"]


def test_intflag_answers_as_a_cython3_pyverbs_gives_them(dgx):
    plain, _ = probe_hcas(SysfsReader(dgx.root), verbs=dgx.verbs())
    flags, notes = probe_hcas(SysfsReader(dgx.root), verbs=RecordedVerbs(dgx.verbs_answers, enum_types=True))
    assert flags == plain and not notes


def test_roce_gid_table_and_mtu_from_netdev(roce):
    section, _ = probe_hcas(SysfsReader(roce.root), verbs=None)
    port = section.hcas[0].ports[0]
    assert port.link_layer == "Ethernet" and port.active_mtu == 4096       # netdev MTU 9000
    table = [(g.index, g.type, g.link_local, g.ipv4, g.netdev) for g in port.gids]
    assert table == [(0, "IB/RoCE v1", True, None, "enp24s0np0"), (1, "RoCE v2", True, None, "enp24s0np0"),
                     (2, "IB/RoCE v1", False, "10.20.0.15", "enp24s0np0"),
                     (3, "RoCE v2", False, "10.20.0.15", "enp24s0np0")]
    assert port.netdevs == ("enp24s0np0",)


def test_missing_and_unreadable_files_become_unknown_fields(dgx, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(dgx.root, root, symlinks=True)
    fs = SysfsReader(str(root))
    port_dir = fs.path(fs.realpath("/sys/class/infiniband/mlx5_0/ports/1"))
    os.remove(os.path.join(port_dir, "rate"))
    os.remove(os.path.join(port_dir, "state"))
    os.mkdir(os.path.join(port_dir, "state"))                  # reading it now fails with EISDIR
    section, _ = probe_hcas(fs)
    port = section.hcas[0].ports[0]
    assert port.state is None and port.rate_gbps is None and port.rate_text is None
    assert port.phys_state == "LinkUp"                          # the rest still fills


def test_no_class_dir_is_absent_and_unreadable_is_unknown(tmp_path, monkeypatch):
    fs = SysfsReader(str(tmp_path))
    section, notes = probe_hcas(fs)
    assert section.status.state == "absent" and "does not exist" in section.status.reason
    assert notes == ["no RDMA devices: /sys/class/infiniband does not exist (no RDMA driver loaded)"]
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    section, notes = probe_hcas(fs)
    assert section.status.state == "absent" and notes == ["no RDMA devices: /sys/class/infiniband is empty"]
    real = os.listdir

    def denied(path):
        if str(path).endswith("sys/class/infiniband"):
            raise PermissionError(13, "Permission denied")
        return real(path)
    monkeypatch.setattr(os, "listdir", denied)
    monkeypatch.setattr(os, "access", lambda *_a, **_k: False)
    section, _ = probe_hcas(fs)
    assert section.status.state == "unknown" and "permission denied" in section.status.reason
