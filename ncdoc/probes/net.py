"""IP interfaces from /sys/class/net, with their addresses from the kernel's own tables in /proc.

Addresses are the one fact sysfs does not hold. They are read from /proc rather than from a
child `ip` process (which cost `ncdoc check` a fork and an exec on every run, and is missing
from many container images): /proc/net/fib_trie lists the host's local IPv4 addresses,
/proc/net/route which interface holds each directly connected subnet, and /proc/net/if_inet6
every IPv6 address with its interface and prefix. An IPv4 address whose subnet has no route
(a /32 on a dummy interface) is not attributed to an interface. A fake or captured tree may
carry the JSON output of `ip -j addr show` as <root>/.ncdoc/ip-addr.json instead, which is
read first.
"""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader, pci_address_of
from ncdoc.snapshot import HcaSection, NetIf, NetSection, Status

CLASS_DIR = "/sys/class/net"
RECORDED_ADDRESSES = "/.ncdoc/ip-addr.json"
_ARPHRD_INFINIBAND, _ARPHRD_LOOPBACK = 32, 772


def parse_ip_json(text: str) -> dict[str, list[str]]:
    """`ip -j addr show` output -> {ifname: ["10.0.0.11/24", "fe80::1/64", ...]}."""
    import json         # fake and captured trees only
    data = json.loads(text)
    out: dict[str, list[str]] = {}
    for link in data if isinstance(data, list) else []:
        name = link.get("ifname")
        if not name:
            continue
        addrs = out.setdefault(name, [])
        for info in link.get("addr_info") or []:
            if info.get("family") in ("inet", "inet6") and info.get("local"):
                addrs.append(f"{info['local']}/{info.get('prefixlen', '')}".rstrip("/"))
    return out


def ipv6_text(packed: bytes) -> str:
    """16 address bytes as RFC 5952 text (what `ip` and Python's ipaddress print): lower-case hex,
    leading zeros dropped, the longest run of two or more zero groups (the first on a tie) as '::'."""
    groups = [int.from_bytes(packed[i:i + 2], "big") for i in range(0, 16, 2)]
    best, best_len, i = -1, 1, 0
    while i < 8:
        if groups[i] == 0:
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i > best_len:
                best, best_len = i, j - i
            i = j
        else:
            i += 1
    if best < 0:
        return ":".join(f"{g:x}" for g in groups)
    head = ":".join(f"{g:x}" for g in groups[:best])
    tail = ":".join(f"{g:x}" for g in groups[best + best_len:])
    return f"{head}::{tail}"


def parse_if_inet6(text: str) -> dict[str, list[str]]:
    """/proc/net/if_inet6 lines ("fe80...0001 02 40 20 80 eth0") -> IPv6 addresses per interface."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        try:
            addr = ipv6_text(bytes.fromhex(fields[0]))
            prefix = int(fields[2], 16)
        except ValueError:
            continue
        out.setdefault(fields[5], []).append(f"{addr}/{prefix}")
    return out


def _ipv4_int(text: str) -> int | None:
    """"10.0.0.11" -> its 32-bit value; None when it is not a dotted quad."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and p.isascii() and len(p) <= 3 for p in parts):
        return None
    value = 0
    for p in parts:
        octet = int(p)
        if octet > 255:
            return None
        value = value << 8 | octet
    return value


def parse_fib_local(text: str) -> list[str]:
    """/proc/net/fib_trie -> the host's own IPv4 addresses ("|-- 10.0.0.11" then "/32 host LOCAL")."""
    out: dict[str, None] = {}
    last = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|-- "):
            last = s[4:].strip()
        elif last and s.startswith("/32 host LOCAL"):
            out.setdefault(last, None)
            last = None
    return list(out)


def _hex_ip(value: str) -> int:
    """/proc/net/route's little-endian hex ("000200C0" = 192.0.2.0) as an address integer."""
    return int.from_bytes(bytes.fromhex(value), "little")


def ipv4_from_proc(fib_trie: str, route: str, loopback: str = "lo") -> dict[str, list[str]]:
    """IPv4 addresses per interface from the routing tables: each local address goes to the
    interface whose directly connected subnet (no gateway) holds it, the longest prefix winning;
    127/8 goes to the loopback interface."""
    subnets: list[tuple[int, int, int, str]] = []          # (prefix length, network, mask, interface)
    for line in route.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            dest, gateway, mask = _hex_ip(f[1]), _hex_ip(f[2]), _hex_ip(f[7])
        except ValueError:
            continue
        if gateway == 0 and mask:
            subnets.append((bin(mask).count("1"), dest & mask, mask, f[0]))
    subnets.sort(reverse=True)
    out: dict[str, list[str]] = {}
    for addr in parse_fib_local(fib_trie):
        value = _ipv4_int(addr)
        if value is None:
            continue
        if value >> 24 == 127:
            out.setdefault(loopback, []).append(f"{addr}/8")
            continue
        for plen, net, mask, iface in subnets:
            if value & mask == net:
                out.setdefault(iface, []).append(f"{addr}/{plen}")
                break
    return out


def read_addresses(fs: SysfsReader) -> tuple[dict[str, list[str]] | None, str]:
    """(addresses per interface or None when unknown, where they came from)."""
    recorded = fs.text(RECORDED_ADDRESSES)
    if recorded is not None:
        try:
            return parse_ip_json(recorded), f"file:{RECORDED_ADDRESSES}"
        except ValueError:
            pass
    inet6 = fs.text("/proc/net/if_inet6")
    fib, route = fs.text("/proc/net/fib_trie"), fs.text("/proc/net/route")
    if fib is None or route is None:
        if inet6 is not None:
            return parse_if_inet6(inet6), "/proc/net/if_inet6 (IPv6 only)"
        return None, ""
    found = ipv4_from_proc(fib, route)
    for name, addrs in (parse_if_inet6(inet6) if inet6 else {}).items():
        found.setdefault(name, []).extend(addrs)
    return found, "/proc/net/fib_trie+route" + ("+if_inet6" if inet6 is not None else "")


def _kind(fs: SysfsReader, name: str, base: str, virtual: bool, arp_type: int | None) -> str:
    devtype = ""
    for line in (fs.text(f"{base}/uevent") or "").splitlines():
        if line.startswith("DEVTYPE="):
            devtype = line.split("=", 1)[1]
    if arp_type == _ARPHRD_LOOPBACK or name == "lo":
        return "loopback"
    if arp_type == _ARPHRD_INFINIBAND:
        return "ipoib"
    if devtype == "bond" or fs.is_dir(f"{base}/bonding"):
        return "bond"
    if devtype == "bridge" or fs.is_dir(f"{base}/bridge"):
        return "docker" if name.startswith(("docker", "br-")) else "virbr" if name.startswith("virbr") else "bridge"
    if devtype == "vlan":
        return "vlan"
    if name.startswith("veth"):
        return "veth"
    if fs.exists(f"{base}/tun_flags"):
        return "tun"
    if virtual:
        # A capture may keep only the class link of a virtual device: fall back on its name.
        if name.startswith("docker"):
            return "docker"
        if name.startswith("virbr"):
            return "virbr"
        if "." in name:
            return "vlan"
        return "virtual"
    return "physical"


def _hca_by_netdev(hcas: HcaSection) -> dict[str, str]:
    out: dict[str, str] = {}
    for hca in hcas.hcas:
        for port in hca.ports:
            for netdev in port.netdevs:
                out.setdefault(netdev, hca.name)
    return out


def _read_if(fs: SysfsReader, name: str, addresses: dict[str, list[str]] | None,
             hca_of: dict[str, str]) -> NetIf:
    base = f"{CLASS_DIR}/{name}"
    resolved = fs.realpath(base) or ""
    virtual = "/devices/virtual/" in resolved
    arp_type = fs.read_int(f"{base}/type")
    kind = _kind(fs, name, base, virtual, arp_type)
    speed = fs.read_int(f"{base}/speed")
    slaves_text = fs.text(f"{base}/bonding/slaves")
    slaves = tuple(slaves_text.split()) if slaves_text else tuple(fs.listdir(f"{base}/brif") or ())
    rdma = fs.listdir(f"{base}/device/infiniband") or []
    return NetIf(
        name=name,
        addresses=tuple((addresses or {}).get(name, ())),
        mtu=fs.read_int(f"{base}/mtu"),
        operstate=fs.text(f"{base}/operstate"),
        speed_mbps=speed if speed is not None and speed > 0 else None,
        driver=fs.link_name(f"{base}/device/driver"),
        kind=kind,
        virtual=virtual or kind in ("loopback", "bond", "bridge", "docker", "virbr", "vlan", "veth", "tun"),
        master=fs.link_name(f"{base}/master"),
        slaves=slaves,
        hca=hca_of.get(name) or (rdma[0] if len(rdma) == 1 else None),
        pci_address=pci_address_of(fs.realpath(f"{base}/device")),
    )


def probe_net(fs: SysfsReader, hcas: HcaSection) -> tuple[NetSection, list[str]]:
    names = fs.listdir(CLASS_DIR)
    if names is None:
        reason = fs.why_not(CLASS_DIR)
        return NetSection(status=Status.unknown(reason)), [f"network interfaces unknown: {reason}"]
    if not names:
        return (NetSection(status=Status.absent(f"{CLASS_DIR} lists no interfaces", source=f"sysfs:{CLASS_DIR}")),
                ["no network interfaces found"])
    addresses, addr_source = read_addresses(fs)
    notes: list[str] = []
    if addresses is None:
        notes.append("IP addresses unknown: /proc/net/fib_trie, /proc/net/route and /proc/net/if_inet6 cannot be read"
                     if fs.live else f"IP addresses unknown: this tree holds no {RECORDED_ADDRESSES} "
                     "(the output of `ip -j addr show`) and no /proc/net/if_inet6")
    elif "IPv6 only" in addr_source:
        notes.append("IPv4 addresses unknown: only /proc/net/if_inet6 could be read")
    hca_of = _hca_by_netdev(hcas)
    interfaces = tuple(_read_if(fs, n, addresses, hca_of) for n in names)
    source = f"sysfs:{CLASS_DIR}" + (f"+{addr_source}" if addr_source else "")
    return NetSection(status=Status.ok(source=source), interfaces=interfaces), notes


