"""IP interfaces: kinds, bonds and bridges, HCA links, addresses from /proc (or a recorded `ip -j addr`)."""

from __future__ import annotations

import json

import pytest

from ncdoc.examples.machines import build_machine
from ncdoc.probes.hcas import probe_hcas
from ncdoc.probes.net import ipv4_from_proc, ipv6_text, parse_fib_local, parse_if_inet6, parse_ip_json, probe_net
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


# The kernel's own formats: /proc/net/fib_trie (Main and Local tables) and /proc/net/route
# (little-endian hex). A node with a docker bridge and a routed default: gateway routes hold no address.
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.12.0.0/16 2 0 2
        +-- 10.12.4.0/30 2 0 2
           |-- 10.12.4.0
              /16 link UNICAST
           |-- 10.12.4.17
              /32 host LOCAL
        |-- 10.12.255.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /32 link BROADCAST
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 172.17.0.1
        /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.12.4.17
        /32 host LOCAL
     |-- 127.0.0.1
        /32 host LOCAL
     |-- 172.17.0.1
        /32 host LOCAL
"""
ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "enp5s0\t00000000\t01000C0A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
         "enp5s0\t00000C0A\t00000000\t0001\t0\t0\t100\t0000FFFF\t0\t0\t0\n"
         "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")


def test_ipv4_from_the_routing_tables():
    assert parse_fib_local(FIB_TRIE) == ["10.12.4.17", "127.0.0.1", "172.17.0.1"]
    assert ipv4_from_proc(FIB_TRIE, ROUTE) == {"enp5s0": ["10.12.4.17/16"], "lo": ["127.0.0.1/8"],
                                               "docker0": ["172.17.0.1/16"]}


def test_a_tree_without_ip_output_reads_ipv4_from_proc(tmp_path):
    machine = build_machine("workstation-2gpu", tmp_path)
    (tmp_path / "root/.ncdoc/ip-addr.json").unlink()
    proc = tmp_path / "root/proc/net"
    proc.mkdir(parents=True)
    (proc / "fib_trie").write_text(FIB_TRIE)
    (proc / "route").write_text(ROUTE)
    (proc / "if_inet6").write_text("fe800000000000000000000000000001 02 40 20 80   enp5s0\n")
    fs = SysfsReader(machine.root)
    net, notes = probe_net(fs, probe_hcas(fs)[0])
    assert notes == []
    assert {n.name: n.addresses for n in net.interfaces}["enp5s0"] == ("10.12.4.17/16", "fe80::1/64")
    assert net.status.source.endswith("/proc/net/fib_trie+route+if_inet6")


@pytest.mark.parametrize("hexaddr", ["00000000000000000000000000000001", "fe800000000000000000000000000001",
                                     "20010db8000000000001000000000001", "20010db8000100000000000000000000",
                                     "00000000000000000000000000000000", "20010db800000000000000000000abcd",
                                     "fd000000000000020000000000000002", "fe8000000000000000fc00fffe000001"])
def test_ipv6_text_is_what_ip_and_python_print(hexaddr):
    import ipaddress
    packed = bytes.fromhex(hexaddr)
    assert ipv6_text(packed) == str(ipaddress.IPv6Address(packed))
