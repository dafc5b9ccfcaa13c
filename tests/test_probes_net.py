"""IP interfaces: kinds, bonds and bridges, HCA links, addresses from `ip -j addr` and fallbacks."""

from __future__ import annotations

import json

import pytest

from ncdoc.machines import build_machine
from ncdoc.probes.hcas import probe_hcas
from ncdoc.probes.net import parse_if_inet6, parse_ip_json, parse_ip_oneline, probe_net
from ncdoc.probes.sysfs import SysfsReader

IP_J = json.dumps([
    {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP"], "mtu": 65536, "addr_info": [
        {"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host", "label": "lo"},
        {"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host"}]},
    {"ifindex": 2, "ifname": "eth0", "mtu": 1500, "addr_info": [
        {"family": "inet", "local": "10.0.0.5", "prefixlen": 24, "broadcast": "10.0.0.255", "scope": "global"}]},
    {"ifindex": 3, "ifname": "ib0", "mtu": 2044, "addr_info": []},
])


def test_parsers():
    assert parse_ip_json(IP_J) == {"lo": ["127.0.0.1/8", "::1/128"], "eth0": ["10.0.0.5/24"], "ib0": []}
    oneline = ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
               "2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever\n")
    assert parse_ip_oneline(oneline) == {"lo": ["127.0.0.1/8"], "eth0": ["fe80::1/64"]}
    assert parse_if_inet6("fe800000000000000000000000000001 02 40 20 80     eth0\n") == {"eth0": ["fe80::1/64"]}


@pytest.mark.parametrize("name", ["h100-roce", "workstation-2gpu", "azure-ndv5"])
def test_fixture_interfaces(name, tmp_path):
    machine = build_machine(name, tmp_path)
    fs = SysfsReader(machine.root)
    net, notes = probe_net(fs, probe_hcas(fs)[0])
    assert net.status.state == "ok" and not notes
    ifs = {n.name: n for n in net.interfaces}
    assert ifs["lo"].kind == "loopback" and "127.0.0.1/8" in ifs["lo"].addresses
    if name == "h100-roce":
        assert ifs["bond0"].kind == "bond" and ifs["bond0"].slaves == ("eno1", "eno2")
        assert ifs["eno1"].master == "bond0" and ifs["eno1"].addresses == ()
        assert "192.168.40.17/24" in ifs["bond0"].addresses
        rail = ifs["enp24s0np0"]
        assert (rail.hca, rail.pci_address, rail.driver, rail.mtu, rail.speed_mbps) == (
            "mlx5_0", "0000:18:00.0", "mlx5_core", 9000, 400000)
    if name == "workstation-2gpu":
        assert ifs["docker0"].kind == "docker" and ifs["docker0"].slaves == ("veth7c2a9e1",)
        assert ifs["veth7c2a9e1"].kind == "veth" and ifs["veth7c2a9e1"].master == "docker0"
        assert ifs["enp5s0"].kind == "physical" and not ifs["enp5s0"].virtual
    if name == "azure-ndv5":
        assert ifs["eth0"].driver == "hv_netvsc" and ifs["eth0"].pci_address is None
        assert ifs["enP27381s1"].master == "eth0" and ifs["enP27381s1"].hca == "mlx5_an0"
        assert ifs["ib3"].kind == "ipoib" and ifs["ib3"].hca == "mlx5_ib3"


def test_without_recorded_addresses_a_tree_falls_back_to_if_inet6(tmp_path):
    machine = build_machine("workstation-2gpu", tmp_path)
    (tmp_path / "root/.ncdoc/ip-addr.json").unlink()
    fs = SysfsReader(machine.root)
    net, notes = probe_net(fs, probe_hcas(fs)[0])
    assert all(n.addresses == () for n in net.interfaces)
    assert notes and "IP addresses unknown" in notes[0]
    (tmp_path / "root/proc/net").mkdir(parents=True)
    (tmp_path / "root/proc/net/if_inet6").write_text("fe800000000000000000000000000001 02 40 20 80 enp5s0\n")
    net, notes = probe_net(fs, probe_hcas(fs)[0])
    assert {n.name: n.addresses for n in net.interfaces}["enp5s0"] == ("fe80::1/64",)
    assert notes == ["IPv4 addresses unknown: only /proc/net/if_inet6 could be read"]
