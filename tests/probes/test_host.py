"""Host facts, versions and NUMA from fake /proc, /sys and library folders."""

from __future__ import annotations

import os
from pathlib import Path

from ncdoc.probes.host import probe_host
from ncdoc.probes.numa import probe_numa
from ncdoc.probes.sysfs import SysfsReader
from ncdoc.probes.versions import decode_nccl_version, probe_versions


def _tree(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> SysfsReader:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel, target in (links or {}).items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    return SysfsReader(str(root))


CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)   Platinum 8480C\n"
           "flags\t\t: fpu sse2 hypervisor\n\nprocessor\t: 1\nvendor_id\t: Other\n")


def test_host_facts(tmp_path):
    fs = _tree(tmp_path, {
        "/proc/cpuinfo": CPUINFO, "/proc/sys/kernel/hostname": "node7\n", "/proc/sys/kernel/osrelease": "5.15.0-1\n",
        "/proc/sys/kernel/arch": "x86_64\n", "/etc/os-release": 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n',
        "/sys/devices/virtual/dmi/id/sys_vendor": "Microsoft Corporation\n",
        "/proc/modules": "nvidia_peermem 16384 0 - Live 0x0\nib_core 1 0 - Live 0x0\nmlx5_core 1 0 - Live 0x0\n",
        "/proc/cmdline": "ro quiet intel_iommu=on iommu=pt\n", "/dev/infiniband/uverbs0": "",
        "/.dockerenv": "", "/proc/1/cgroup": "0::/kubepods/burstable/pod1/abc\n",
    }, {"/sys/class/dmi/id": "../../devices/virtual/dmi/id", "/sys/class/iommu/dmar0": "../../devices/virtual/iommu/dmar0"})
    (tmp_path / "sys/devices/virtual/iommu/dmar0").mkdir(parents=True)
    host, notes = probe_host(fs, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert (host.hostname, host.kernel, host.arch, host.os) == ("node7", "5.15.0-1", "x86_64", "Ubuntu 22.04.4 LTS")
    assert (host.cpu_vendor, host.cpu_model) == ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480C")
    assert host.hypervisor == "Microsoft"
    assert host.container == ("docker", "kubernetes")
    assert host.iommu == "passthrough"
    assert host.modules["nvidia_peermem"] and host.modules["ib_core"] and not host.modules["nv_peer_mem"]
    assert host.dev_infiniband == ("uverbs0",) and not notes


def test_iommu_states(tmp_path):
    fs = _tree(tmp_path / "a", {"/proc/cmdline": "ro intel_iommu=off\n"})
    assert probe_host(fs, {})[0].iommu == "off"
    fs = _tree(tmp_path / "b", {"/proc/cmdline": "ro\n"})
    assert probe_host(fs, {})[0].iommu is None                 # no /sys/class/iommu: cannot tell
    (tmp_path / "b/sys/class/iommu").mkdir(parents=True)
    assert probe_host(fs, {})[0].iommu == "off"                # the class exists and holds no unit
    (tmp_path / "b/sys/class/iommu/ivhd0").mkdir()
    assert probe_host(fs, {})[0].iommu == "on"


def test_missing_proc_leaves_unknowns_and_a_note(tmp_path):
    host, notes = probe_host(SysfsReader(str(tmp_path)), {})
    assert host.status.state == "ok" and host.hostname is None and host.modules == {}
    assert host.dev_infiniband == () and host.hypervisor is None
    assert notes == ["kernel modules unknown: neither /proc/modules nor /sys/module can be read"]


def test_nccl_version_codes():
    assert decode_nccl_version(22105) == "2.21.5"
    assert decode_nccl_version(2804) == "2.8.4"
    assert decode_nccl_version(23007) == "2.30.7"


def test_libnccl_search_order_versions_and_plugins(tmp_path):
    site = "/usr/local/lib/python3.10/dist-packages"
    fs = _tree(tmp_path, {
        f"{site}/nvidia/nccl/lib/libnccl.so.2": "",
        f"{site}/nvidia_nccl_cu12-2.20.5.dist-info/METADATA": "Name: nvidia-nccl-cu12\n",
        f"{site}/torch/lib/libnccl.so.2.18.1": "",
        "/opt/nccl/build/lib/libnccl.so.2.23.4": "", "/opt/nccl/build/lib/libnccl-tuner-example.so": "",
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "",
        "/opt/plugin/libnccl-net.so.0.0.0": "",
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n",
    }, {"/usr/lib/x86_64-linux-gnu/libnccl.so.2": "libnccl.so.2.21.5",
        "/opt/plugin/libnccl-net.so": "libnccl-net.so.0.0.0"})
    env = {"LD_LIBRARY_PATH": "/opt/nccl/build/lib:/opt/plugin"}
    versions, notes = probe_versions(fs, env)
    assert [(lib.origin, lib.version) for lib in versions.nccl_libs] == [
        ("pip:nvidia-nccl-cu12", "2.20.5"), ("torch", "2.18.1"), ("LD_LIBRARY_PATH", "2.23.4"), ("system", "2.21.5")]
    assert versions.nccl == "2.20.5" and not notes
    assert versions.net_plugins == ("/opt/plugin/libnccl-net.so",)
    assert versions.tuner_plugins == ("/opt/nccl/build/lib/libnccl-tuner-example.so",)
    assert versions.driver == "550.54.15"
    versions, _ = probe_versions(fs, env, nvml_driver="550.90.07", nvml_cuda="12.4")
    assert (versions.driver, versions.cuda_driver) == ("550.90.07", "12.4")


def test_no_nccl_is_said(tmp_path):
    versions, notes = probe_versions(SysfsReader(str(tmp_path)), {})
    assert versions.nccl is None and versions.nccl_libs == () and notes and "no libnccl" in notes[0]


def test_numa(tmp_path):
    fs = _tree(tmp_path, {"/sys/devices/system/node/node0/cpulist": "0-3\n",
                          "/sys/devices/system/node/node10/cpulist": "4-7\n",
                          "/sys/devices/system/node/online": "0,10\n"})
    numa, _ = probe_numa(fs)
    assert [(n.id, n.cpulist) for n in numa.nodes] == [(0, "0-3"), (10, "4-7")]
    numa, _ = probe_numa(SysfsReader(str(tmp_path / "none")))
    assert numa.status.state == "absent" and "without NUMA" in numa.status.reason
