"""Versions: NVIDIA driver, CUDA driver API, the libnccl a job would load, NCCL plugins, rdma-core.

The libnccl search follows where a job finds it, most specific first: the pip wheel
(nvidia-nccl-cu12 and friends, which PyTorch loads by path), a copy bundled inside torch/lib,
LD_LIBRARY_PATH, then the system library folders. The version comes from the file name
(libnccl.so.2.21.5) or the wheel's dist-info, and only on the live node, when neither says,
from ncclGetVersion() through ctypes.

This runs in every `ncdoc check`, so it reads only what it needs: the NCCL folders (the wheel's,
torch's, LD_LIBRARY_PATH's) are listed once each; the big shared system folders are asked for
the few names the dynamic loader would open (libnccl.so.2, libnccl-net.so, ...) instead of being
listed; a site-packages folder is listed only when it holds nvidia/nccl; and the rdma-core
version is looked up only on a node with RDMA devices, reading dpkg's status file only up to
the package's entry.
"""

from __future__ import annotations

import os
import sys

from ncdoc.probes.sysfs import SysfsReader
from ncdoc.snapshot import NcclLib, Status, Versions

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Mapping

SYSTEM_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib64", "/usr/lib", "/usr/local/nccl/lib", "/usr/local/lib", "/usr/local/cuda/lib64",
    "/opt/nccl/lib",
)
# Folders holding many unrelated libraries: asked for the names a loader opens, never listed.
_SHARED_DIRS = frozenset(("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu",
                          "/usr/lib64", "/usr/lib", "/usr/local/lib", "/usr/local/cuda/lib64"))
SITE_GLOBS = (
    "/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
    "/opt/conda/lib/python3*/site-packages",
    # virtual environments images put under /opt (/opt/torch/.venv, /opt/venv)
    "/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages",
)
_DRIVER_MARK = "Kernel Module"
_DPKG_STATUS = "/var/lib/dpkg/status"
_DPKG_CHUNK = 1 << 16


def decode_nccl_version(code: int) -> str:
    """ncclGetVersion's integer: major*10000+minor*100+patch from 2.9 on, major*1000+minor*100+patch before."""
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def _is_version(text: str) -> bool:
    """"2.21.5": three dot-separated decimal numbers."""
    parts = text.split(".")
    return len(parts) == 3 and all(p.isdigit() and p.isascii() for p in parts)


def so_version(name: str) -> str | None:
    """"libnccl.so.2.21.5" (or a name ending in it) -> "2.21.5"; None without a full version."""
    at = name.find("libnccl.so.")
    if at < 0:
        return None
    tail = name[at + len("libnccl.so."):]
    parts = tail.split(".")
    if len(parts) < 3:
        return None
    head = ".".join(parts[:3])
    return head if _is_version(head) else None


def _driver_from_proc(text: str) -> str | None:
    """The version after "Kernel Module" (or "Kernel Module for <arch>") in /proc/driver/nvidia/version."""
    at = text.find(_DRIVER_MARK)
    if at < 0:
        return None
    words = text[at + len(_DRIVER_MARK):].split()
    if words and words[0] == "for":
        words = words[2:]
    if not words:
        return None
    parts = words[0].split(".")
    if len(parts) >= 2 and all(p.isdigit() for p in parts):
        return words[0]
    return None


def _driver(fs: SysfsReader, nvml_driver: str | None) -> str | None:
    if nvml_driver:
        return nvml_driver
    text = fs.text("/proc/driver/nvidia/version")
    if text:
        found = _driver_from_proc(text)
        if found:
            return found
    return fs.text("/sys/module/nvidia/version")


def _wild(name: str, pattern: str) -> bool:
    """fnmatch for patterns with '*' only (fnmatch itself imports re)."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return name == pattern
    if not name.startswith(parts[0]) or not name.endswith(parts[-1]) or len(name) < len(parts[0]) + len(parts[-1]):
        return False
    pos = len(parts[0])
    for middle in parts[1:-1]:
        at = name.find(middle, pos)
        if at < 0:
            return False
        pos = at + len(middle)
    return pos <= len(name) - len(parts[-1])


def _expand(fs: SysfsReader, pattern: str) -> list[str]:
    """Folders matching `pattern` (a path whose components may hold '*'), as in-root paths, sorted."""
    found = ["/"]
    for part in [p for p in pattern.split("/") if p]:
        nxt = []
        for base in found:
            if "*" not in part:
                cand = base.rstrip("/") + "/" + part
                if fs.is_dir(cand):
                    nxt.append(cand)
                continue
            for entry in fs.listdir(base) or ():
                if _wild(entry, part):
                    cand = base.rstrip("/") + "/" + entry
                    if fs.is_dir(cand):
                        nxt.append(cand)
        found = nxt
        if not found:
            break
    return sorted(found)


def _site_dirs(fs: SysfsReader) -> list[str]:
    dirs: list[str] = []
    if fs.live:
        dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for pattern in SITE_GLOBS:
        dirs += _expand(fs, pattern)
    return list(dict.fromkeys(os.path.normpath(d) for d in dirs))


class _Folders:
    """What each library folder holds, asked once: NCCL's own folders are listed, the big shared
    ones only asked for the names a loader would open."""

    def __init__(self, fs: SysfsReader, wanted: tuple[str, ...]):
        self.fs, self.wanted = fs, wanted
        self._names: dict[str, list[str]] = {}

    def names(self, folder: str) -> list[str]:
        got = self._names.get(folder)
        if got is None:
            if folder in _SHARED_DIRS:
                got = [n for n in self.wanted if self.fs.exists(f"{folder}/{n}")]
            else:
                got = [n for n in self.fs.listdir(folder) or () if n.startswith("libnccl")]
            self._names[folder] = got
        return got


def _pick(folders: _Folders, folder: str) -> str | None:
    """The libnccl in `folder` a loader would take: the soname libnccl.so.2 first."""
    names = folders.names(folder)
    if "libnccl.so.2" in names:
        return f"{folder}/libnccl.so.2"
    versioned = sorted((n for n in names if so_version(n) and n == f"libnccl.so.{so_version(n)}"),
                       key=lambda n: tuple(int(x) for x in so_version(n).split(".")))
    if versioned:
        return f"{folder}/{versioned[-1]}"
    return f"{folder}/libnccl.so" if "libnccl.so" in names else None


def _file_version(fs: SysfsReader, path: str) -> str | None:
    real = fs.realpath(path) or path
    return so_version(os.path.basename(real)) or so_version(os.path.basename(path))


def _ctypes_version(path: str) -> str | None:
    import ctypes       # only for a libnccl whose file name does not say its version
    try:
        lib = ctypes.CDLL(path)
        code = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return decode_nccl_version(code.value) if code.value > 0 else None


def _wheel(fs: SysfsReader, site: str) -> tuple[str, str | None]:
    """(distribution name, version) of the NCCL wheel installed in `site`."""
    for entry in fs.listdir(site) or ():
        if entry.startswith("nvidia_nccl_cu") and entry.endswith(".dist-info"):
            dist, _, rest = entry.partition("-")
            version = rest.split("-", 1)[0].removesuffix(".dist-info")
            head = ".".join(version.split(".")[:3])
            if dist[len("nvidia_nccl_cu"):].isdigit() and _is_version(head):
                return dist.replace("_", "-"), head
    return "nvidia-nccl", None


def _loader_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The library names NCCL and its plugins are loaded by, for the shared folders."""
    names = ["libnccl.so.2", "libnccl.so", "libnccl-net.so", "libnccl-tuner.so"]
    for var, kind in (("NCCL_NET_PLUGIN", "net"), ("NCCL_TUNER_PLUGIN", "tuner")):
        value = (environ.get(var) or "").strip()
        if value and "/" not in value and value.lower() != "none":
            names += [value, f"libnccl-{kind}-{value}.so"]
    return tuple(dict.fromkeys(names))


def _candidates(fs: SysfsReader, environ: Mapping[str, str],
                folders: _Folders) -> tuple[list[NcclLib], list[str]]:
    """(libnccl candidates in load order, folders searched for plugins)."""
    found: list[NcclLib] = []
    searched: list[str] = []
    seen: set[str] = set()

    def add(folder: str, origin: str, version_hint: str | None = None) -> None:
        folder = os.path.normpath(folder)
        if folder not in searched:
            searched.append(folder)
        path = _pick(folders, folder)
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
        lib = f"{site}/nvidia/nccl/lib"
        if fs.is_dir(lib):
            dist, version = _wheel(fs, site)
            add(lib, f"pip:{dist}", version)
        elif os.path.normpath(lib) not in searched:
            searched.append(os.path.normpath(lib))
    for site in sites:
        add(f"{site}/torch/lib", "torch")
    for folder in (environ.get("LD_LIBRARY_PATH") or "").split(":"):
        if folder:
            add(folder, "LD_LIBRARY_PATH")
    for folder in SYSTEM_LIB_DIRS:
        add(folder, "system")
    return found, searched


def _plugins(fs: SysfsReader, folders: _Folders, searched: list[str], prefix: str) -> tuple[str, ...]:
    """Plugin libraries by path, one per real file (libnccl-net.so -> libnccl-net.so.0.0.0 counts once)."""
    out: dict[str, str] = {}
    for folder in searched:
        for name in sorted(folders.names(folder)):
            if name.startswith(prefix) and ".so" in name:
                path = f"{folder}/{name}"
                out.setdefault(fs.realpath(path) or path, path)
    return tuple(out.values())


def dpkg_version(fs: SysfsReader, packages: tuple[str, ...], path: str = _DPKG_STATUS) -> str | None:
    """The installed version of the first of `packages` in dpkg's status file, reading it only up
    to that package's entry (the file is hundreds of KB on a full image)."""
    try:
        fh = open(fs.path(path), "rb")
    except OSError:
        return None
    wanted = {f"Package: {p}".encode(): p for p in packages}
    found: dict[str, str] = {}
    with fh:
        tail = b""
        while True:
            chunk = fh.read(_DPKG_CHUNK)
            data = tail + chunk
            stanzas = data.split(b"\n\n")
            tail = stanzas.pop() if chunk else b""
            for stanza in stanzas:
                head, _, body = stanza.lstrip(b"\n").partition(b"\n")
                name = wanted.get(head.strip())
                if name is None or name in found or b"install ok installed" not in body:
                    continue
                for line in body.split(b"\n"):
                    if line.startswith(b"Version: "):
                        found[name] = line[9:].strip().decode("utf-8", "replace")
                        break
            if packages[0] in found or not chunk:
                break
    return next((found[p] for p in packages if p in found), None)


def probe_versions(fs: SysfsReader, environ: Mapping[str, str], *, nvml_driver: str | None = None,
                   nvml_cuda: str | None = None, rdma: bool = True) -> tuple[Versions, list[str]]:
    """rdma: whether the node has RDMA devices (without them the rdma-core version is not looked up)."""
    notes: list[str] = []
    folders = _Folders(fs, _loader_names(environ))
    libs, searched = _candidates(fs, environ, folders)
    if not libs:
        notes.append("no libnccl found (pip wheel, torch, LD_LIBRARY_PATH or system folders)")
    driver = _driver(fs, nvml_driver)
    versions = Versions(
        status=Status.ok(source="nvml+files" if nvml_driver else "files"),
        driver=driver,
        cuda_driver=nvml_cuda,
        nccl=libs[0].version if libs else None,
        nccl_libs=tuple(libs),
        net_plugins=_plugins(fs, folders, searched, "libnccl-net"),
        tuner_plugins=_plugins(fs, folders, searched, "libnccl-tuner"),
        rdma_core=dpkg_version(fs, ("rdma-core", "ibverbs-providers", "libibverbs1")) if rdma else None,
    )
    return versions, notes
