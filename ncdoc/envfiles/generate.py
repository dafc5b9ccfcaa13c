"""A correct starting NCCL env from a node's topology (`ncdoc env generate`).

Only what NCCL cannot get right by itself goes in: which HCAs are the compute rails,
which interface carries bootstrap traffic, the RoCE GID index where auto-selection is
missing or ambiguous, and topology-file guidance on VMs. Tunables stay at NCCL's
defaults here; `ncdoc tune` adds them only when a measurement justifies it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncdoc.nccl.parse import version_tuple
from ncdoc.snapshot import Gid, Hca, NetIf, Snapshot
from ncdoc.topology import natural_key


@dataclass(frozen=True)
class EnvLine:
    name: str
    value: str
    why: str


@dataclass(frozen=True)
class GeneratedEnv:
    lines: tuple[EnvLine, ...]
    notes: tuple[str, ...]          # guidance that is not a variable (commented in the file)

    def values(self) -> dict[str, str]:
        return {line.name: line.value for line in self.lines}

    def comments(self) -> dict[str, str]:
        return {line.name: line.why for line in self.lines}


_FAST_PATHS = ("NV", "PIX", "PXB")



def _active_ports(hca: Hca) -> list[int]:
    return [p.num for p in hca.ports if (p.state or "").upper() == "ACTIVE"]


def _link_layer(hca: Hca) -> str | None:
    layers = {p.link_layer for p in hca.ports if p.link_layer}
    return layers.pop() if len(layers) == 1 else None


def compute_hcas(snapshot: Snapshot) -> tuple[list[tuple[str, int]], list[str]]:
    """The (HCA, port) pairs NCCL should use, in rail order, and why others were left out."""
    from ncdoc.topology import classify, path_rank

    left_out: list[str] = []
    hcas = list(snapshot.hcas.hcas)
    usable: dict[str, Hca] = {}
    for h in hcas:
        if not _active_ports(h):
            left_out.append(f"{h.name}: no ACTIVE port")
            continue
        usable[h.name] = h
    # On an InfiniBand fabric, Ethernet-only devices are storage or management NICs:
    # NCCL cannot merge the two link layers in one communicator.
    layers = {_link_layer(h) for h in usable.values()}
    if "InfiniBand" in layers and "Ethernet" in layers:
        for name, h in list(usable.items()):
            if _link_layer(h) == "Ethernet":
                left_out.append(f"{name}: Ethernet port on an InfiniBand fabric (storage or management)")
                del usable[name]

    topo = classify(snapshot)
    ordered: list[str] = []
    gpu_labels = [e.label for e in topo.endpoints if e.kind == "gpu"]
    if topo.status.known and gpu_labels:
        for g in gpu_labels:
            near = [n for n in topo.rails.get(g, ()) if n in usable]
            if not near:
                # this GPU's nearest NIC is unusable; take the closest usable one
                ranked = sorted(usable, key=lambda n: path_rank(topo.path(g, n) or "SYS"))
                near = ranked[:1]
            for n in near:
                if n not in ordered:
                    ordered.append(n)
        # NICs no GPU is near are storage/management rails when every GPU has a close NIC.
        all_close = all(
            (nn := topo.nearest_nic(g)) is not None and nn[1].startswith(_FAST_PATHS) for g in gpu_labels)
        for n in usable:
            if n not in ordered:
                if all_close:
                    left_out.append(f"{n}: not the nearest NIC of any GPU (storage or management)")
                else:
                    ordered.append(n)
    else:
        ordered = sorted(usable, key=natural_key)
    pairs = [(n, p) for n in ordered for p in _active_ports(usable[n])]
    return pairs, left_out


def _routable_v4(iface: NetIf) -> list[str]:
    out = []
    for a in iface.addresses:
        ip = a.split("/")[0]
        if ":" in ip or ip.startswith("127.") or ip.startswith("169.254."):
            continue
        out.append(ip)
    return out


def bootstrap_interface(snapshot: Snapshot) -> tuple[NetIf | None, str]:
    """A routable, non-virtual interface for NCCL's bootstrap and socket traffic."""
    # Bonds and VLANs are virtual devices in sysfs but carry real traffic; bridges, veth,
    # docker and virbr do not leave the host.
    candidates = [i for i in snapshot.net.interfaces
                  if (not i.virtual or i.kind in ("bond", "vlan"))
                  and i.kind not in ("loopback", "veth", "docker", "virbr", "tun", "bridge")
                  and i.master is None and (i.operstate or "up").lower() in ("up", "unknown")
                  and _routable_v4(i)]
    if not candidates:
        return None, "no up, non-virtual interface with a routable IPv4 address"
    # Prefer a management bond or plain Ethernet port over the RDMA rails' own netdevs and
    # IPoIB for the control path: those share the HCA with the data path, and rail
    # addresses are often point-to-point (/31) subnets that other nodes cannot all reach.
    order = {"bond": 0, "physical": 1, "vlan": 2, "ipoib": 3}
    candidates.sort(key=lambda i: (i.hca is not None, order.get(i.kind, 4), natural_key(i.name)))
    return candidates[0], ""


def _auto_gid(gids: tuple[Gid, ...]) -> int | None:
    """NCCL >= 2.21's default choice: the first valid IPv4-mapped RoCE v2 GID (nccl_facts 2.3)."""
    for g in gids:
        if g.ipv4 and g.roce_version == 2 and not g.link_local and g.gid.strip("0:") != "":
            return g.index
    return None


def generate(snapshot: Snapshot, *, nccl_version: str | None = None) -> GeneratedEnv:
    lines: list[EnvLine] = []
    notes: list[str] = []
    version = nccl_version or snapshot.versions.nccl

    pairs, left_out = compute_hcas(snapshot)
    if pairs:
        value = "=" + ",".join(f"{n}:{p}" for n, p in pairs)
        why = (f"the {len(pairs)} compute rail port(s) in GPU order; '=' makes NCCL match names exactly "
               f"(without it mlx5_1 also matches mlx5_10)")
        if left_out:
            why += "; left out: " + "; ".join(left_out)
        lines.append(EnvLine("NCCL_IB_HCA", value, why))
    elif snapshot.hcas.status.known:
        notes.append("No usable RDMA port: NCCL will use TCP sockets. " + "; ".join(left_out))

    iface, reason = bootstrap_interface(snapshot)
    if iface is not None:
        lines.append(EnvLine("NCCL_SOCKET_IFNAME", "=" + iface.name,
                             f"{iface.name} ({', '.join(_routable_v4(iface))}) is up, has a routable address and leaves the host; "
                             "pinning it keeps NCCL off docker, veth, virbr and link-local interfaces"))
    elif snapshot.net.status.known:
        notes.append(f"NCCL_SOCKET_IFNAME not set: {reason}.")

    roce = [snapshot.hca(n) for n, _ in pairs]
    roce_ports = [(h, p) for h in roce if h for p in h.ports
                  if p.link_layer == "Ethernet" and (p.state or "").upper() == "ACTIVE"]
    if roce_ports:
        choices = {(h.name, p.num): _auto_gid(p.gids) for h, p in roce_ports}
        distinct = {c for c in choices.values() if c is not None}
        vt = version_tuple(version)
        if len(distinct) == 1:
            idx = distinct.pop()
            if vt is None or vt < (2, 21):
                when = "this NCCL is older than 2.21" if vt else "the NCCL version is unknown"
                lines.append(EnvLine("NCCL_IB_GID_INDEX", str(idx),
                                     f"GID {idx} is the IPv4-mapped RoCE v2 entry on every rail; {when}, "
                                     "and before 2.21 NCCL uses GID 0 (link-local, RoCE v1)"))
        elif len(distinct) > 1:
            notes.append("RoCE v2 IPv4 GIDs sit at different indexes on different ports "
                         f"({choices}); one NCCL_IB_GID_INDEX cannot fit all: align the GID tables, "
                         "or rely on NCCL >= 2.21 auto-selection.")
        else:
            notes.append("No RoCE v2 GID with an IPv4 address on the rail ports: assign IPv4 addresses to "
                         "the RoCE netdevs, or NCCL will pick a link-local or RoCE v1 GID.")

    topo_hint = _virtual_topology_hint(snapshot)
    if topo_hint:
        notes.append(topo_hint)
    return GeneratedEnv(tuple(lines), tuple(notes))


def _virtual_topology_hint(snapshot: Snapshot) -> str | None:
    if not snapshot.host.hypervisor or snapshot.env.get("NCCL_TOPO_FILE"):
        return None
    bridges = [d for d in snapshot.pci.devices if d.kind == "bridge"]
    gpus = snapshot.gpus.gpus
    if gpus and not bridges:
        return (f"Virtual machine ({snapshot.host.hypervisor}) with a flattened PCI tree: NCCL cannot see which "
                "NIC is near which GPU. Set NCCL_TOPO_FILE to the vendor's topology XML for this VM type "
                "(Azure HPC images ship them under /opt/microsoft/, e.g. ndv5-topo.xml).")
    return None


def render(generated: GeneratedEnv, fmt: str) -> str:
    """The env in `fmt` (sh, dotenv, nccl.conf, slurm, k8s, json), each variable with its reason."""
    from ncdoc.envfiles.formats import comment_lines, render_env
    text = render_env(generated.values(), fmt, comments=generated.comments())
    if generated.notes and fmt == "json":
        import json
        data = json.loads(text)
        data["notes"] = list(generated.notes)
        text = json.dumps(data, indent=2) + "\n"
    elif generated.notes and fmt != "k8s":
        text = "".join(line + "\n" for line in comment_lines([f"NOTE: {n}" for n in generated.notes], fmt)) + text
    return text
