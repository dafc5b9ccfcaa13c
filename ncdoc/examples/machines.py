"""Fixture machines: YAML specs -> fake sysfs trees + recorded NVML/verbs answers -> Snapshots.

The bundled examples (ncdoc/examples/<name>.yaml, shipped in the wheel) describe real
machine layouts compactly: host facts, NUMA nodes, PCI devices by address with the bridges
above them as a path from the host bridge, RDMA ports, interfaces, the NCCL environment.
`build_machine` writes the tree the kernel would show for it (real names, real file
contents, real relative symlinks) plus the NVML answers a driver would give; the real
probes then read it, so an example exercises exactly the code a live node does.

Spec keys (unknown keys are rejected): description, base (an example to overlay: dicts
merge, null deletes a key), host {hostname, kernel, os, arch, cpu_vendor, cpu_model,
virtual, dmi {sys_vendor, product_name}, cmdline, iommu_units, modules, container,
driver, cuda_driver, probe_as_root}, env, home, files, links, numa {id: cpulist},
host_bridges {pciDDDD:BB: {numa, vmbus|under}}, bridge_parts {role: part}, bridges
{addr: {part, acs_ctrl, link}}, acs {role: ctrl}, devices {addr: {path, part, ...}},
net {name: {kind, addresses, mtu, operstate, master, parent, driver, mac, speed}},
nvml {init_error, fabric_state, p2p {same_numa, cross_numa}}, verbs (bool), parts.
"""

from __future__ import annotations

import functools
import json
import os
import re
import struct
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ncdoc.errors import InputError, UsageError, shown
from ncdoc.readers.yaml_lines import check_keys
from ncdoc.examples import stored
from ncdoc.examples.tree import (Built, NetDev, PciNode, Rdma, TreeWriter, auto_netdev_name, digest,
                                expand_pci, guid_for, ib_hw_address, mac_for,
                                write_netdev, write_pci, write_rdma, port_facts, ip_json)
from ncdoc.resources import examples_dir
from ncdoc.snapshot import Snapshot
from ncdoc.startup.compiled_patterns import precompiled

SPEC_KEYS = {"description", "base", "host", "env", "home", "files", "links", "numa", "host_bridges",
             "bridge_parts", "bridges", "acs", "devices", "net", "nvml", "verbs", "parts"}
DEVICE_KEYS = {"path", "part", "rdma", "netdev", "addresses", "mtu", "operstate", "master", "port",
               "link", "numa", "driver", "fw_ver", "nvlinks_down"}
NET_KEYS = {"kind", "addresses", "mtu", "operstate", "master", "parent", "driver", "mac", "speed"}
P2P_CODES = {"OK": 0, "chipset_not_supported": 1, "gpu_not_supported": 2, "topology_not_supported": 3,
             "disabled_by_regkey": 4, "not_supported": 5, "unknown": 6}
_MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


@dataclass(frozen=True)
class Machine:
    name: str
    root: str                                 # the fake tree: pass as sysfs_root
    nvml_answers: str                         # JSON file for RecordedNvml
    verbs_answers: str | None                 # JSON file for RecordedVerbs, when the spec records verbs
    environ: dict[str, str] = field(default_factory=dict)
    home: str | None = None                   # in-root path of the user's home folder
    description: str = ""

    def nvml(self) -> Any:
        from ncdoc.examples.nvml_replay import RecordedNvml  # noqa: PLC0415 - imports pynvml
        return RecordedNvml(self.nvml_answers)

    def verbs(self) -> Any:
        from ncdoc.examples.verbs_replay import RecordedVerbs  # noqa: PLC0415
        return RecordedVerbs(self.verbs_answers) if self.verbs_answers else None

    def capture(self) -> Snapshot:
        from ncdoc.probes.live import capture  # noqa: PLC0415
        return capture(sysfs_root=self.root, nvml=self.nvml(), verbs=self.verbs(), environ=self.environ,
                       home=self.home, use_verbs=self.verbs_answers is not None)


# ---------------------------------------------------------------- specs

class _SpecLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1 without base-60 numbers: 0000:18:00.0 is a PCI address, not a float."""


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_SpecLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"))
_SpecLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def _read_yaml(path: Path) -> dict[str, Any]:
    from ncdoc.readers.textfile import read_user_text   # a spec may be the user's own file
    from ncdoc.readers.yaml_lines import load_plain   # screened and bounded: the file may be anyone's
    text = read_user_text(path, "a machine spec")
    data = load_plain(text, str(path), _SpecLoader)
    if not isinstance(data, dict):
        raise InputError("a machine spec must be a mapping", path=str(path))
    return data


def merge(base: Any, over: Any) -> Any:
    """Overlay `over` on `base`: mappings merge key by key, None deletes, anything else replaces."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def list_examples() -> list[tuple[str, str]]:
    """(name, one-line description) of every bundled example, sorted by name."""
    out = []
    for path in sorted(examples_dir().glob("*.yaml"), key=lambda p: p.stem):
        if not path.name.startswith("_"):
            out.append((path.stem, str(_read_yaml(path).get("description", "")).strip()))
    return out


_BASE = precompiled(r"[\w./-]{1,200}")


def load_spec(spec_or_name: dict[str, Any] | str | Path, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A spec (dict, YAML file path or bundled example name) with its `base` overlays applied."""
    if isinstance(spec_or_name, dict):
        spec = dict(spec_or_name)
    else:
        text = str(spec_or_name)
        path = Path(text) if text.endswith((".yaml", ".yml")) else examples_dir() / f"{text}.yaml"
        try:
            found = path.is_file()
        except (OSError, ValueError):       # a name too long for the file system, a NUL in it
            found = False
        if not found:
            known = ", ".join(n for n, _ in list_examples())
            raise UsageError(f"unknown example {shown(text)} (known: {known})")
        spec = _read_yaml(path)
        spec.setdefault("name", path.stem)
    base = spec.pop("base", None)
    if base:
        if not isinstance(base, str) or not _BASE.fullmatch(base):
            raise InputError(f"machine spec base {shown(base)} is not the name of a bundled example or a .yaml file")
        if base in _seen:
            raise InputError(f"machine spec overlays loop through {base!r}")
        name = spec.get("name")
        spec = merge(load_spec(base, _seen + (base,)), spec)
        spec["name"] = name or spec.get("name")
    check_keys(spec, SPEC_KEYS | {"name"}, "a machine spec", spec.get("name"))
    for key in ("host", "env", "files", "links", "numa", "host_bridges", "bridge_parts", "bridges", "acs", "devices",
                "net", "nvml", "parts"):
        if not isinstance(spec.get(key) or {}, dict):
            raise InputError(f"machine spec key {key!r} must be a mapping, got {type(spec[key]).__name__}",
                             path=str(spec_or_name) if not isinstance(spec_or_name, dict) else None)
    for addr, entry in (spec.get("devices") or {}).items():
        if entry is not None:
            check_keys(entry, DEVICE_KEYS, f"device {addr}", spec.get("name"))
    for name, entry in (spec.get("net") or {}).items():
        if entry is not None:
            check_keys(entry, NET_KEYS, f"interface {name}", spec.get("name"))
    return spec


@functools.lru_cache(maxsize=1)
def _bundled_parts() -> dict[str, Any]:
    return _read_yaml(examples_dir() / "_parts.yaml")


# ---------------------------------------------------------------- build

def build_machine(spec_or_name: dict[str, Any] | str | Path, dest_dir: str | Path) -> Machine:
    """Write the machine's fake root under dest_dir/root and its recordings beside it.

    A spec may be anyone's file: whatever in it does not fit what a field must be (a part that does
    not exist, a PCI class that is no hex number, a mapping where a list belongs) is an InputError
    naming the problem, raised from here; the tree never reaches outside dest_dir (TreeWriter)."""
    spec = load_spec(spec_or_name)
    try:
        return _build(spec, Path(dest_dir))
    except KeyError as exc:
        raise InputError(f"machine spec names an unknown part or field: {shown(exc.args[0] if exc.args else exc)}",
                         path=_spec_path(spec_or_name)) from None
    except (ValueError, TypeError, AttributeError, IndexError, OverflowError, struct.error) as exc:
        raise InputError("malformed machine spec", path=_spec_path(spec_or_name), cause=str(exc)) from None


def _spec_path(spec_or_name) -> str | None:
    return str(spec_or_name) if isinstance(spec_or_name, (str, Path)) else None


def _build(spec: dict[str, Any], dest: Path) -> Machine:
    parts = {**_bundled_parts(), **(spec.get("parts") or {})}
    root = dest / "root"
    root.mkdir(parents=True, exist_ok=True)
    tw = TreeWriter(str(root))
    host = spec.get("host") or {}
    cpulists = {int(k): str(v) for k, v in (spec.get("numa") or {}).items()}
    nodes = expand_pci(spec, parts)
    built = _devices(spec, nodes)
    names = {d.name for d in built.netdevs}
    for dev in built.netdevs:
        if dev.master and dev.master not in names:
            raise InputError(f"interface {shown(dev.name)}: its master {shown(dev.master)} is not defined")
    write_pci(tw, spec, nodes, cpulists)
    for rdma in built.rdma:
        write_rdma(tw, spec, rdma)
    slaves = {d.name: [s.name for s in built.netdevs if s.master == d.name] for d in built.netdevs}
    for dev in built.netdevs:
        write_netdev(tw, dev, slaves[dev.name])
        if dev.master:
            tw.link(f"{dev.dir}/master", next(m.dir for m in built.netdevs if m.name == dev.master))
        if dev.kind == "bridge":
            for slave in slaves[dev.name]:
                sdir = next(s.dir for s in built.netdevs if s.name == slave)
                tw.mkdir(f"{sdir}/brport")
                tw.link(f"{dev.dir}/brif/{slave}", f"{sdir}/brport")
    tw.file(".ncdoc/ip-addr.json", json.dumps(ip_json(built.netdevs), indent=1) + "\n")
    _host_files(tw, spec, host, cpulists, built)
    nvml_path = dest / "nvml.json"
    nvml_path.write_text(json.dumps(_nvml_answers(spec, built), indent=1), encoding="utf-8")
    verbs_path = None
    if spec.get("verbs"):
        verbs_path = dest / "verbs.json"
        verbs_path.write_text(json.dumps(_verbs_answers(built), indent=1), encoding="utf-8")
    environ = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    return Machine(name=str(spec.get("name") or "custom"), root=str(root), nvml_answers=str(nvml_path),
                   verbs_answers=str(verbs_path) if verbs_path else None, environ=environ,
                   home=spec.get("home") or environ.get("HOME"), description=str(spec.get("description", "")))


def _devices(spec: dict[str, Any], nodes: dict[str, PciNode]) -> Built:
    host = spec.get("host") or {}
    gpus = [n for n in nodes.values() if n.role == "device" and "gpu" in n.part]
    rdma: list[Rdma] = []
    netdevs: list[NetDev] = []
    counters: dict[str, int] = {}
    lid = 0x10
    for node in sorted(nodes.values(), key=lambda n: n.address):
        if node.role != "device" or not ({"rdma", "nic"} & set(node.part)):
            continue
        entry, rpart = node.entry, node.part.get("rdma")
        infiniband = bool(rpart) and rpart["link_layer"] == "InfiniBand"
        ports = {1: port_facts(entry, rpart, lid)} if rpart else {}
        lid += 1
        seed = f"{host.get('hostname')}/{node.address}"
        mac = (ib_hw_address(guid_for(seed)) if infiniband
               else mac_for(seed, "b8:3f:d2" if rpart else "3c:ec:ef"))
        facts = rpart or node.part["nic"]
        up = not ports or ports[1]["state"] == "ACTIVE"
        dev = NetDev(
            name=entry.get("netdev") or auto_netdev_name(node, nodes, infiniband),
            dir="", kind="infiniband" if infiniband else "ether",
            mtu=int(entry.get("mtu", facts.get("netdev_mtu", 1500))), mac=mac,
            operstate=entry.get("operstate", "up" if up else "down"),
            addresses=list(entry.get("addresses") or []), speed=facts.get("speed_mbps"),
            master=entry.get("master"), device_dir=node.dir)
        dev.dir = f"{node.dir}/net/{dev.name}"
        netdevs.append(dev)
        if rpart:
            prefix = "mlx5_"
            name = entry.get("rdma") or f"{prefix}{counters.get(prefix, 0)}"
            counters[prefix] = counters.get(prefix, 0) + 1
            rdma.append(Rdma(name=name, node=node, netdev=dev, ports=ports))
    netdevs.insert(0, NetDev(name="lo", dir="sys/devices/virtual/net/lo", kind="loopback", mtu=65536,
                             mac="00:00:00:00:00:00", operstate="unknown", addresses=["127.0.0.1/8", "::1/128"]))
    for name, entry in sorted((spec.get("net") or {}).items()):
        if entry is None:
            continue
        parent = entry.get("parent")
        first_slave = next((d.mac for d in netdevs if d.master == name), None)
        oui = "02:42:ac" if name.startswith(("docker", "veth")) else "00:0d:3a" if parent else "02:00:5e"
        netdevs.append(NetDev(
            name=name, dir=f"sys/devices/{parent}/net/{name}" if parent else f"sys/devices/virtual/net/{name}",
            kind=entry.get("kind", "ether"), mtu=int(entry.get("mtu", 1500)),
            mac=entry.get("mac") or first_slave or mac_for(f"{host.get('hostname')}/{name}", oui),
            operstate=entry.get("operstate", "up"), addresses=list(entry.get("addresses") or []),
            speed=entry.get("speed"), master=entry.get("master"),
            device_dir=f"sys/devices/{parent}" if parent else None, driver=entry.get("driver")))
    for i, dev in enumerate(netdevs, start=1):
        dev.ifindex = i
    return Built(nodes=nodes, gpus=sorted(gpus, key=lambda n: n.address), rdma=rdma, netdevs=netdevs)


def _host_files(tw: TreeWriter, spec: dict[str, Any], host: dict[str, Any], cpulists: dict[int, str],
                built: Built) -> None:
    hostname = host.get("hostname", "node")
    tw.file("proc/sys/kernel/hostname", hostname + "\n")
    tw.file("etc/hostname", hostname + "\n")
    tw.file("proc/sys/kernel/osrelease", host.get("kernel", "6.8.0-40-generic") + "\n")
    tw.file("proc/sys/kernel/arch", host.get("arch", "x86_64") + "\n")
    os_name = host.get("os", "Ubuntu 22.04.4 LTS")
    tw.file("etc/os-release", f'PRETTY_NAME="{os_name}"\nNAME="{os_name.split()[0]}"\n')
    flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht"
    if host.get("virtual"):
        flags += " hypervisor"
    block = (f"vendor_id\t: {host.get('cpu_vendor', 'GenuineIntel')}\ncpu family\t: 6\n"
             f"model name\t: {host.get('cpu_model', 'Intel(R) Xeon(R) CPU')}\nflags\t\t: {flags}\n")
    tw.file("proc/cpuinfo", "".join(f"processor\t: {i}\n{block}\n" for i in range(2)))
    tw.file("proc/cmdline", host.get("cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{host.get('kernel', '')} ro quiet") + "\n")
    modules = list(host.get("modules") or [])
    tw.file("proc/modules", "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in modules))
    tw.file("proc/1/cgroup", "0::/\n" if host.get("container") else "0::/init.scope\n")
    if "docker" in (host.get("container") or []):
        tw.file(".dockerenv", "")
    if "podman" in (host.get("container") or []):
        tw.file("run/.containerenv", "")
    if host.get("driver") and "nvidia" in modules:
        # what the driver creates: a device node per GPU, the control and UVM nodes
        for i in range(len(built.gpus)):
            tw.file(f"dev/nvidia{i}", "")
        for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
            tw.file(f"dev/{name}", "")
        tw.file("proc/driver/nvidia/version",
                f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {host['driver']}  Tue Mar  5 22:42:15 UTC 2024\n"
                "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
        tw.file("sys/module/nvidia/version", host["driver"] + "\n")
    dmi = host.get("dmi") or {}
    for key, value in dmi.items():
        tw.file(f"sys/devices/virtual/dmi/id/{key}", f"{value}\n")
    if dmi:
        tw.link("sys/class/dmi/id", "sys/devices/virtual/dmi/id")
    tw.mkdir("sys/class/iommu")
    for unit in host.get("iommu_units") or []:
        tw.mkdir(f"sys/devices/virtual/iommu/{unit}")
        tw.link(f"sys/class/iommu/{unit}", f"sys/devices/virtual/iommu/{unit}")
    for node, cpus in cpulists.items():
        tw.file(f"sys/devices/system/node/node{node}/cpulist", cpus + "\n")
    if cpulists:
        tw.file("sys/devices/system/node/online", f"0-{max(cpulists)}\n" if len(cpulists) > 1 else "0\n")
    tw.mkdir("sys/class/net")
    tw.mkdir("sys/bus/pci/devices")
    if built.rdma and "ib_uverbs" in modules:
        tw.file("dev/infiniband/rdma_cm", "")
        for i in range(len(built.rdma)):
            for kind in ("uverbs", "umad", "issm"):
                tw.file(f"dev/infiniband/{kind}{i}", "")
    home = spec.get("home")
    if home:
        tw.mkdir(str(home).lstrip("/"))
    for path, content in (spec.get("files") or {}).items():
        tw.file(str(path), str(content))
    for path, target in (spec.get("links") or {}).items():
        tw.raw_link(str(path), str(target))


def _nvml_answers(spec: dict[str, Any], built: Built) -> dict[str, Any]:
    """What NVML answers on this machine, in the recording format of ncdoc.examples.nvml_replay."""
    host, nvml = spec.get("host") or {}, spec.get("nvml") or {}
    devices = []
    for node in built.gpus:
        gpu, part = node.part["gpu"], node.part
        domain, bus, rest = node.address.split(":")
        slot, fn = rest.split(".")
        down = set(node.entry.get("nvlinks_down") or [])
        remote = {"switch": 2, "gpu": 0}.get(gpu.get("nvlink_remote", ""), 255)
        links: Any = ([{"state": 0 if i in down else 1, "remote_type": remote,
                        "remote_pci": {"error": "NotSupported"}} for i in range(gpu["nvlinks"])]
                      if gpu.get("nvlinks") else {"error": "NotSupported"})
        fabric: Any = {"error": "NotSupported"}
        if gpu.get("nvlink_remote") == "switch":
            fabric = {"state": int(nvml.get("fabric_state", 3)), "status": int(nvml.get("fabric_status", 0)),
                      "clique_id": 32766}
        devices.append({
            "name": gpu["name"],
            "uuid": "GPU-" + str(uuid.UUID(bytes=digest("uuid", host.get("hostname"), node.address)[:16])),
            "pci": {"busId": f"{int(domain, 16):08X}:{bus.upper()}:{slot.upper()}.{fn}",
                    "domain": int(domain, 16), "bus": int(bus, 16), "device": int(slot, 16),
                    "pciDeviceId": (int(part["device"], 16) << 16) | int(part["vendor"], 16),
                    "pciSubSystemId": (int(part.get("subsystem_device", "0x0"), 16) << 16) | int(part["vendor"], 16)},
            "numa_node": None,          # x86 GPUs are not NUMA nodes: NVML says "not supported"
            "cuda_compute_capability": gpu["cc"],
            "memory_total": int(gpu["memory_mib"]) * 1024 * 1024,
            "nvlinks": links,
            "fabric": fabric,
        })
    policy = {"same_numa": "OK", "cross_numa": "OK", **(nvml.get("p2p") or {})}
    p2p = {}
    for i, a in enumerate(built.gpus):
        for j in range(i + 1, len(built.gpus)):
            b = built.gpus[j]
            nvlinked = a.part["gpu"].get("nvlinks") and b.part["gpu"].get("nvlinks")
            key = "same_numa" if nvlinked or a.numa == b.numa else "cross_numa"
            code = P2P_CODES[policy[key]]
            p2p[f"{i}-{j}"] = {"0": code, "1": code}
    answers: dict[str, Any] = {"driver_version": host.get("driver"), "cuda_driver_version": host.get("cuda_driver"),
                               "devices": devices, "p2p": p2p}
    if nvml.get("init_error") or not host.get("driver"):
        answers["init_error"] = nvml.get("init_error") or "LibraryNotFound"
    return answers


def _verbs_answers(built: Built) -> dict[str, Any]:
    from ncdoc.probes.hcas import roce_mtu  # noqa: PLC0415 - same derivation the kernel makes

    devices = {}
    for rdma in built.rdma:
        rpart = rdma.node.part["rdma"]
        ports = {}
        for num, port in rdma.ports.items():
            eth = port["link_layer"] == "Ethernet"
            active = roce_mtu(rdma.netdev.mtu) if eth and rdma.netdev else rpart.get("active_mtu", 4096)
            ports[str(num)] = {"state": {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}[port["state"]],
                               "active_mtu": _MTU_ENUM.get(active or 1024, 3), "max_mtu": _MTU_ENUM[rpart["max_mtu"]],
                               "link_layer": 2 if eth else 1, "lid": port["lid"], "sm_lid": port["sm_lid"]}
        devices[rdma.name] = {"phys_port_cnt": len(ports), "fw_version": rpart["fw_ver"],
                              "vendor_part_id": int(rdma.node.part["device"], 16), "ports": ports}
    return {"devices": devices}


# ---------------------------------------------------------------- examples

def capture_example(name: str) -> Snapshot:
    """Build bundled example `name` in a temporary folder, probe it, return its Snapshot: what the
    stored snapshot (ncdoc.examples.stored) must equal, and what `ncdoc snapshot --example` prints."""
    # tmpfs where there is one: an example is ~1500 small files, written and read once.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    # the prefix is a plain word: `name` may be a spec's path
    with tempfile.TemporaryDirectory(prefix="ncdoc-example-", dir=shm) as tmp:
        machine = build_machine(name, tmp)
        snapshot = machine.capture()
    return snapshot.replace(origin=f"example:{name}")


# The bundled examples are read from their stored snapshots (fast, no tree to build).
load_example = stored.load_example
