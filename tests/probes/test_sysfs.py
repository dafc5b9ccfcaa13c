"""The sysfs reader and the probes against real /sys captures (hwloc's test data in ../shared/sysfs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

import pytest

from ncdoc.probes.hcas import probe_hcas
from ncdoc.probes.live import capture
from ncdoc.probes.net import probe_net
from ncdoc.probes.numa import probe_numa
from ncdoc.probes.pci import probe_pci
from ncdoc.probes.sysfs import SysfsReader, pci_address_of
from ncdoc.topology import natural_key
from paths import SHARED

SYSFS = SHARED / "sysfs"
CAPTURES = {"mlx4": "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2", "qib": "40intel64-2g2n4c+pcilocality.tar.bz2"}


# ---------------------------------------------------------------- the reader

def test_realpath_resolves_relative_links_inside_the_root(tmp_path):
    dev = tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    dev.mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
               tmp_path / "sys/bus/pci/devices/0000:01:00.0")
    fs = SysfsReader(str(tmp_path))
    assert fs.realpath("/sys/bus/pci/devices/0000:01:00.0") == "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"


def test_absolute_links_are_rerooted_and_loops_give_none(tmp_path):
    (tmp_path / "sys/devices/virtual/net/lo").mkdir(parents=True)
    (tmp_path / "sys/class/net").mkdir(parents=True)
    os.symlink("/sys/devices/virtual/net/lo", tmp_path / "sys/class/net/lo")
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    fs = SysfsReader(str(tmp_path))
    assert fs.realpath("/sys/class/net/lo") == "/sys/devices/virtual/net/lo"
    assert fs.realpath("/a") is None


def test_reads_hex_and_decimal_and_reports_missing(tmp_path):
    (tmp_path / "lid").write_text("0x3a4\n")
    (tmp_path / "mtu").write_text("9000\n")
    (tmp_path / "speed").write_text("-1\n")
    (tmp_path / "junk").write_text("fast\n")
    fs = SysfsReader(str(tmp_path))
    assert (fs.read_int("lid"), fs.read_int("mtu"), fs.read_int("speed")) == (932, 9000, -1)
    assert fs.read_int("junk") is None and fs.read_int("absent") is None and fs.text("absent") is None
    assert fs.listdir("no/such/dir") == [] and "does not exist" in fs.why_not("no/such/dir")


def test_helpers():
    assert sorted(["mlx5_10", "mlx5_2", "mlx5_1"], key=natural_key) == ["mlx5_1", "mlx5_2", "mlx5_10"]
    assert pci_address_of("/sys/devices/pci0000:00/0000:00:01.0/0000:18:00.0") == "0000:18:00.0"
    assert pci_address_of("/sys/devices/virtual/net/lo") is None


# ---------------------------------------------------------------- real captures

@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    if not SYSFS.is_dir():
        pytest.skip("needs ../shared/sysfs (real /sys captures)")
    out = {}
    for key, name in CAPTURES.items():
        archive = SYSFS / name
        if not archive.is_file():
            pytest.skip(f"needs ../shared/sysfs/{archive.name}")
        dest = tmp_path_factory.mktemp(key)
        if shutil.which("tar"):           # GNU tar is ~5x faster than tarfile on these 11k entries
            subprocess.run(["tar", "xjf", str(archive), "-C", str(dest)], check=True, timeout=120)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(dest, filter="data")
        (top,) = [p for p in dest.iterdir() if p.is_dir()]
        out[key] = str(top)
    return out


def test_mlx4_capture_port_and_placement(captures):
    fs = SysfsReader(captures["mlx4"])
    section, notes = probe_hcas(fs)
    assert section.status.state == "ok"
    hca = next(h for h in section.hcas if h.name == "mlx4_0")
    assert (hca.pci_address, hca.numa_node, hca.driver, hca.hca_type) == ("0000:82:00.0", 1, "mlx4_core", "MT4099")
    (port,) = hca.ports
    assert (port.num, port.state, port.phys_state, port.link_layer) == (1, "ACTIVE", "LinkUp", "InfiniBand")
    assert (port.rate_gbps, port.width, port.speed, port.rate_text) == (56.0, "4X", "FDR", "56 Gb/sec (4X FDR)")
    assert port.lid == 0x3A4 and port.sm_lid == 1
    assert [g.gid for g in port.gids] == ["fe80:0000:0000:0000:0002:c903:00f9:bfa1"]   # unset fe80::0 skipped
    assert port.counters["port_rcv_data"] == 5550796 and port.netdevs == ("ib0",)
    assert port.active_mtu is None and any("MTU" in n for n in notes)      # no pyverbs: unknown, said so


def test_qib_capture_port_and_placement(captures):
    fs = SysfsReader(captures["qib"])
    section, _ = probe_hcas(fs)
    (hca,) = section.hcas
    assert (hca.name, hca.pci_address, hca.numa_node) == ("qib0", "0000:43:00.0", 2)
    port = hca.ports[0]
    assert (port.state, port.rate_gbps, port.speed, port.link_layer) == ("ACTIVE", 40.0, "QDR", "InfiniBand")
    pci, _ = probe_pci(fs)
    dev = next(d for d in pci.devices if d.address == "0000:43:00.0")
    assert (dev.parent, dev.class_code, dev.kind, dev.numa_node) == ("0000:40:03.0", "0x0c0600", "nic", 2)
    assert (dev.link_speed, dev.link_width) == ("8 GT/s", 4)
    root_port = next(d for d in pci.devices if d.address == "0000:40:03.0")
    assert root_port.parent == "pci0000:40" and root_port.kind == "bridge"


def test_capture_pci_numa_and_net(captures):
    fs = SysfsReader(captures["mlx4"])
    pci, _ = probe_pci(fs)
    by_addr = {d.address: d for d in pci.devices}
    assert by_addr["0000:82:00.0"].parent == "0000:80:02.2"
    assert by_addr["0000:80:02.2"].parent == "pci0000:80"
    assert all(d.parent for d in pci.devices)
    numa, _ = probe_numa(fs)
    assert [(n.id, n.cpulist) for n in numa.nodes] == [(0, "0-7"), (1, "8-15")]
    hcas, _ = probe_hcas(fs)
    net, notes = probe_net(fs, hcas)
    ifs = {n.name: n for n in net.interfaces}
    assert ifs["ib0"].kind == "ipoib" and ifs["ib0"].hca == "mlx4_0" and ifs["ib0"].mtu == 2044
    assert ifs["eth0"].driver == "igb" and ifs["eth0"].speed_mbps == 1000 and ifs["eth0"].pci_address == "0000:02:00.0"
    assert ifs["eth1"].operstate == "down" and ifs["eth1"].speed_mbps is None
    # the capture kept only the class links of virtual devices: kinds come from what is left
    assert ifs["lo"].kind == "loopback" and ifs["eth0.1015"].kind == "vlan" and ifs["br0"].virtual


def test_capture_whole_snapshot_round_trips(captures):
    for root in captures.values():
        snap = capture(sysfs_root=root, environ={}, home=None)
        assert snap.gpus.status.state == "absent"            # PCI readable, no NVIDIA device on it
        assert snap.hcas.status.state == "ok" and snap.pci.status.state == "ok"
        again = type(snap).from_dict(snap.to_dict())
        assert again == snap
