"""Versions: NVIDIA driver, CUDA driver API, the libnccl a job would load, NCCL plugins, rdma-core.

The libnccl search follows where a job finds it, most specific first: the pip wheel
(nvidia-nccl-cu12 and friends, which PyTorch loads by path), a copy bundled inside torch/lib,
LD_LIBRARY_PATH, then the system library folders. The version comes from the file name
(libnccl.so.2.21.5) or the wheel's dist-info, and only on the live node, when neither says,
from ncclGetVersion() through ctypes.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import sys
from typing import Mapping

from ncdoc.probes.sysfs import SysfsReader
from ncdoc.snapshot import NcclLib, Status, Versions

SYSTEM_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib64", "/usr/lib", "/usr/local/nccl/lib", "/usr/local/lib", "/usr/local/cuda/lib64",
    "/opt/nccl/lib",
)
SITE_GLOBS = (
    "/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
    "/opt/conda/lib/python3*/site-packages",
    # virtual environments images put under /opt (/opt/torch/.venv, /opt/venv)
    "/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages",
)
_SO_VERSION = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)")
_DIST_INFO = re.compile(r"^(nvidia_nccl_cu\d+)-(\d+\.\d+\.\d+)[^/]*\.dist-info$")
_DRIVER = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def decode_nccl_version(code: int) -> str:
    """ncclGetVersion's integer: major*10000+minor*100+patch from 2.9 on, major*1000+minor*100+patch before."""
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def _driver(fs: SysfsReader, nvml_driver: str | None) -> str | None:
    if nvml_driver:
        return nvml_driver
    text = fs.text("/proc/driver/nvidia/version")
    if text:
        m = _DRIVER.search(text)
        if m:
            return m.group(1)
    return fs.text("/sys/module/nvidia/version")


def _site_dirs(fs: SysfsReader) -> list[str]:
    dirs: list[str] = []
    if fs.live:
        dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for pattern in SITE_GLOBS:
        dirs += ["/" + os.path.relpath(p, fs.root) for p in sorted(glob.glob(fs.path(pattern)))]
    return list(dict.fromkeys(os.path.normpath(d) for d in dirs))


def _pick(fs: SysfsReader, folder: str) -> str | None:
    """The libnccl in `folder` a loader would take: the soname libnccl.so.2 first."""
    names = fs.listdir(folder) or []
    for wanted in ("libnccl.so.2",):
        if wanted in names:
            return f"{folder}/{wanted}"
    versioned = sorted(n for n in names if _SO_VERSION.fullmatch(n))
    if versioned:
        return f"{folder}/{versioned[-1]}"
    return f"{folder}/libnccl.so" if "libnccl.so" in names else None


def _file_version(fs: SysfsReader, path: str) -> str | None:
    real = fs.realpath(path) or path
    m = _SO_VERSION.search(os.path.basename(real)) or _SO_VERSION.search(os.path.basename(path))
    return m.group(1) if m else None


def _ctypes_version(path: str) -> str | None:
    try:
        lib = ctypes.CDLL(path)
        code = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return decode_nccl_version(code.value) if code.value > 0 else None


def _candidates(fs: SysfsReader, environ: Mapping[str, str]) -> tuple[list[NcclLib], list[str]]:
    """(libnccl candidates in load order, folders searched for plugins)."""
    found: list[NcclLib] = []
    folders: list[str] = []
    seen: set[str] = set()

    def add(folder: str, origin: str, version_hint: str | None = None) -> None:
        folder = os.path.normpath(folder)
        if folder not in folders:
            folders.append(folder)
        path = _pick(fs, folder)
        if not path:
            return
        real = fs.realpath(path) or path
        if real in seen:
            return
        seen.add(real)
        version = _file_version(fs, path) or version_hint
        if version is None and fs.live:
            version = _ctypes_version(path)
        found.append(NcclLib(path=path, version=version, origin=origin))

    sites = _site_dirs(fs)
    for site in sites:
        entries = fs.listdir(site) or []
        wheels = [m for e in entries if (m := _DIST_INFO.match(e))]
        dist = wheels[0].group(1).replace("_", "-") if wheels else "nvidia-nccl"
        add(f"{site}/nvidia/nccl/lib", f"pip:{dist}", wheels[0].group(2) if wheels else None)
    for site in sites:
        add(f"{site}/torch/lib", "torch")
    for folder in (environ.get("LD_LIBRARY_PATH") or "").split(":"):
        if folder:
            add(folder, "LD_LIBRARY_PATH")
    for folder in SYSTEM_LIB_DIRS:
        add(folder, "system")
    return found, folders


def _plugins(fs: SysfsReader, folders: list[str], prefix: str) -> tuple[str, ...]:
    """Plugin libraries by path, one per real file (libnccl-net.so -> libnccl-net.so.0.0.0 counts once)."""
    out: dict[str, str] = {}
    for folder in folders:
        for name in fs.listdir(folder) or []:
            if name.startswith(prefix) and ".so" in name:
                path = f"{folder}/{name}"
                out.setdefault(fs.realpath(path) or path, path)
    return tuple(out.values())


def _rdma_core(fs: SysfsReader) -> str | None:
    text = fs.text("/var/lib/dpkg/status")
    if not text:
        return None
    for package in ("rdma-core", "ibverbs-providers", "libibverbs1"):
        at = text.find(f"Package: {package}\n")
        if at < 0:
            continue
        block = text[at:text.find("\n\n", at) if text.find("\n\n", at) > 0 else len(text)]
        m = re.search(r"^Version: (\S+)", block, re.M)
        if m and "install ok installed" in block:
            return m.group(1)
    return None


def probe_versions(fs: SysfsReader, environ: Mapping[str, str], *, nvml_driver: str | None = None,
                   nvml_cuda: str | None = None) -> tuple[Versions, list[str]]:
    notes: list[str] = []
    libs, folders = _candidates(fs, environ)
    if not libs:
        notes.append("no libnccl found (pip wheel, torch, LD_LIBRARY_PATH or system folders)")
    driver = _driver(fs, nvml_driver)
    versions = Versions(
        status=Status.ok(source="nvml+files" if nvml_driver else "files"),
        driver=driver,
        cuda_driver=nvml_cuda,
        nccl=libs[0].version if libs else None,
        nccl_libs=tuple(libs),
        net_plugins=_plugins(fs, folders, "libnccl-net"),
        tuner_plugins=_plugins(fs, folders, "libnccl-tuner"),
        rdma_core=_rdma_core(fs),
    )
    return versions, notes
