"""Host facts: names, kernel, CPU, virtualisation, IOMMU, the kernel modules NCCL depends on, and
the NVIDIA and RDMA device nodes a job can open.

Read from files only (no `platform`, `socket` or `re`: this runs in every `ncdoc check`)."""

from __future__ import annotations

import os

from ncdoc.probes.sysfs import SysfsReader
from ncdoc.snapshot import Host, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Mapping

# /proc/cpuinfo is generated as it is read, one CPU after the other; only the first block is
# used, so only its start is read (the whole file is ~1 KB per CPU, and slow on big machines).
_CPUINFO_HEAD = 16384

# Modules whose presence changes what NCCL can do: GPUDirect RDMA needs nvidia_peermem (or
# the older out-of-tree nv_peer_mem), verbs needs ib_core/ib_uverbs and the HCA's driver,
# GPUDirect Storage needs nvidia_fs, GDRCopy needs gdrdrv.
MODULES_OF_INTEREST = (
    "nvidia", "nvidia_peermem", "nv_peer_mem", "nvidia_fs", "gdrdrv",
    "ib_core", "ib_uverbs", "rdma_ucm", "mlx5_core", "mlx5_ib",
)

# DMI sys_vendor -> the name people use for the hypervisor
_DMI_VENDORS = (
    ("microsoft", "Microsoft"), ("amazon", "Amazon EC2"), ("google", "Google"),
    ("qemu", "KVM"), ("vmware", "VMware"), ("xen", "Xen"), ("oracle", "Oracle"),
    ("openstack", "OpenStack"), ("alibaba", "Alibaba Cloud"), ("nutanix", "Nutanix"),
)


def _cpuinfo(fs: SysfsReader) -> dict[str, str]:
    """Fields of the first processor block of /proc/cpuinfo."""
    head = fs.read_bytes("/proc/cpuinfo", _CPUINFO_HEAD)
    text = head.decode("utf-8", "replace") if head else ""
    fields: dict[str, str] = {}
    for line in text.split("\n"):
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _os_name(fs: SysfsReader) -> str | None:
    for rel in ("/etc/os-release", "/usr/lib/os-release"):
        text = fs.text(rel)
        if text is None:
            continue
        values = {}
        for line in text.split("\n"):
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip().strip('"')
        return values.get("PRETTY_NAME") or values.get("NAME")
    return None


def _hypervisor(fs: SysfsReader, cpu: dict[str, str]) -> str | None:
    flagged = "hypervisor" in cpu.get("flags", "").split()
    vendor = fs.text("/sys/class/dmi/id/sys_vendor") or ""
    product = fs.text("/sys/class/dmi/id/product_name") or ""
    xen = fs.text("/sys/hypervisor/type")
    if xen:
        return xen.capitalize()
    for needle, name in _DMI_VENDORS:
        if needle in vendor.lower() or (flagged and needle in product.lower()):
            # Microsoft also sells bare-metal Surface machines: only a VM when the CPU says so
            # or the product says "Virtual Machine".
            if needle == "microsoft" and not (flagged or "virtual" in product.lower()):
                continue
            return name
    if flagged:
        return "unknown hypervisor"
    return None


def _containers(fs: SysfsReader, environ: Mapping[str, str]) -> tuple[str, ...]:
    hints: list[str] = []
    if fs.exists("/.dockerenv"):
        hints.append("docker")
    if fs.exists("/run/.containerenv"):
        hints.append("podman")
    cgroup = fs.text("/proc/1/cgroup") or fs.text("/proc/self/cgroup") or ""
    for needle, hint in (("kubepods", "kubernetes"), ("docker", "docker"),
                         ("libpod", "podman"), ("lxc", "lxc"), ("containerd", "containerd")):
        if needle in cgroup and hint not in hints:
            hints.append(hint)
    if environ.get("KUBERNETES_SERVICE_HOST") and "kubernetes" not in hints:
        hints.append("kubernetes")
    return tuple(hints)


def _iommu(fs: SysfsReader) -> str | None:
    cmdline = (fs.text("/proc/cmdline") or "").split()
    args = {}
    for arg in cmdline:
        key, _, value = arg.partition("=")
        args[key] = value
    if args.get("iommu") == "off" or args.get("intel_iommu") == "off" or args.get("amd_iommu") == "off":
        return "off"
    passthrough = args.get("iommu") == "pt" or args.get("amd_iommu") == "pt" or "pt" in args.get("intel_iommu", "").split(",")
    units = fs.listdir("/sys/class/iommu")
    if units is None or (not units and not fs.is_dir("/sys/class/iommu")):
        groups = fs.listdir("/sys/kernel/iommu_groups")
        if groups:
            return "passthrough" if passthrough else "on"
        return None                  # no way to tell
    if not units:
        return "off"
    return "passthrough" if passthrough else "on"


def _modules(fs: SysfsReader) -> tuple[dict[str, bool], str | None]:
    text = fs.text("/proc/modules")
    if text is not None:
        loaded = {line.split(" ", 1)[0] for line in text.split("\n") if line}
        return {m: m in loaded for m in MODULES_OF_INTEREST}, None
    listing = fs.listdir("/sys/module")
    if listing:
        # /sys/module also lists built-in modules that have parameters; a loadable module
        # appears there exactly while it is loaded.
        present = set(listing)
        return {m: m in present for m in MODULES_OF_INTEREST}, None
    return {}, "neither /proc/modules nor /sys/module can be read"


def probe_host(fs: SysfsReader, environ: Mapping[str, str]) -> tuple[Host, list[str]]:
    notes: list[str] = []
    cpu = _cpuinfo(fs)
    hostname = fs.text("/proc/sys/kernel/hostname") or fs.text("/etc/hostname")
    kernel = fs.text("/proc/sys/kernel/osrelease")
    arch = fs.text("/proc/sys/kernel/arch")
    if fs.live:
        uname = os.uname()
        hostname = hostname or uname.nodename
        kernel = kernel or uname.release
        arch = arch or uname.machine
    modules, problem = _modules(fs)
    if problem:
        notes.append(f"kernel modules unknown: {problem}")
    dev_ib = fs.listdir("/dev/infiniband")
    dev = fs.listdir("/dev")
    cpu_model = cpu.get("model name") or cpu.get("Model") or cpu.get("cpu model")
    vendor = cpu.get("vendor_id") or _arm_vendor(cpu)
    host = Host(
        status=Status.ok(source="files:/proc,/sys,/etc/os-release"),
        hostname=hostname,
        kernel=kernel,
        os=_os_name(fs),
        arch=arch,
        cpu_vendor=vendor,
        cpu_model=" ".join(cpu_model.split()) if cpu_model else None,
        hypervisor=_hypervisor(fs, cpu),
        container=_containers(fs, environ),
        iommu=_iommu(fs),
        modules=modules,
        dev_infiniband=tuple(dev_ib) if dev_ib is not None else None,
        dev_nvidia=tuple(n for n in dev if n.startswith("nvidia")) if dev is not None else None,
        proc_driver_nvidia=fs.is_dir("/proc/driver/nvidia"),
    )
    return host, notes


def _arm_vendor(cpu: dict[str, str]) -> str | None:
    # aarch64 cpuinfo has "CPU implementer : 0x41" (Arm Ltd; NVIDIA Grace is Neoverse V2 = 0x41)
    implementer = cpu.get("CPU implementer")
    return {"0x41": "ARM", "0x4e": "NVIDIA", "0x48": "HiSilicon", "0xc0": "Ampere"}.get(implementer or "")
