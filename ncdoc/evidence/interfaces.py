"""What kind of network interface a name and address seen in a log are.

NCCL picks socket interfaces by prefix (NCCL_SOCKET_IFNAME) or, unset, by its own order
(ib*, then anything but lo/docker*, then docker*, then lo); a job that bootstraps over
loopback, a link-local address or a container/VM bridge cannot reach its other nodes.
The kind names match ncdoc.snapshot.NetIf.kind.
"""

from __future__ import annotations

import ipaddress
from ncdoc.readers.numbers import is_digits

# name prefix -> kind, for interfaces a log only names (no sysfs to ask).
_NAME_KINDS = (
    ("lo", "loopback"),
    ("docker", "docker"), ("br-", "docker"),
    ("virbr", "virbr"),
    ("veth", "veth"),
    ("cni", "bridge"), ("flannel", "virtual"), ("cali", "virtual"), ("weave", "virtual"),
    ("kube-", "virtual"), ("cilium", "virtual"), ("vxlan", "virtual"), ("genev", "virtual"),
    ("lxcbr", "bridge"), ("lxc", "veth"), ("podman", "bridge"), ("tailscale", "tun"), ("wg", "tun"),
    ("tun", "tun"), ("tap", "tun"), ("zt", "tun"), ("vnet", "tun"), ("dummy", "virtual"),
    ("bond", "bond"), ("team", "bond"),
    ("ib", "ipoib"),
    ("br", "bridge"),
)
VIRTUAL_KINDS = frozenset({"docker", "virbr", "veth", "bridge", "tun", "virtual"})
# Bridges/veths that are always local to their host: Docker's, libvirt's, CNI's, LXC's and podman's.
# A generic br<N> (a host bridge over the uplink) or a container's veth uplink with a routable
# address is how many clusters reach the other nodes: those count as local only by their address.
_LOCAL_BRIDGE_PREFIXES = ("docker", "br-", "virbr", "cni", "lxcbr", "podman")
# the subnets Docker (docker0) and libvirt (virbr0) create by default: never routed off the host
_LOCAL_SUBNETS = tuple(ipaddress.ip_network(n) for n in ("172.17.0.0/16", "192.168.122.0/24"))


def iface_kind(name: str) -> str:
    """NetIf.kind guessed from an interface name alone."""
    if name == "lo" or name.startswith("lo:"):
        return "loopback"
    for prefix, kind in _NAME_KINDS:
        if prefix != "lo" and name.startswith(prefix):
            if prefix == "ib" and not (is_digits(name[2:3]) or name[2:3] in ("p", "s")):
                continue    # ib0, ibp12s0, ibs1 are IPoIB; "ibmveth" is not
            return kind
    if "." in name:
        return "vlan"
    return "physical"


def address_class(address: str) -> str:
    """"loopback" | "link_local" | "private" | "global" | "unknown" for an IPv4/IPv6 address text."""
    text = address.strip().strip("[]")
    if "%" in text:                  # fe80::1%eth1: the zone names the interface, not the address
        text = text.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return "unknown"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link_local"
    if ip.is_private:
        return "private"
    return "global"


def classify(name: str, address: str | None) -> tuple[str, str]:
    """(classification, kind): classification is "loopback" | "link_local" | "virtual" | "ok"."""
    kind = iface_kind(name)
    addr = address_class(address) if address else "unknown"
    if kind == "loopback" or addr == "loopback":
        return "loopback", kind
    if addr == "link_local":
        return "link_local", kind
    if address and _in_local_subnet(address):
        return "virtual", kind
    if kind in ("bridge", "veth") and not name.startswith(_LOCAL_BRIDGE_PREFIXES) and addr in ("private", "global"):
        return "ok", kind       # a host bridge (br0) or a container uplink veth with a routable address
    if kind in VIRTUAL_KINDS:
        return "virtual", kind
    return "ok", kind


def _in_local_subnet(address: str) -> bool:
    text = address.strip().strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return any(ip.version == n.version and ip in n for n in _LOCAL_SUBNETS)
