#!/usr/bin/env python3
"""Capture a live node as a replayable test fixture: the files ncdoc's probes read, NVML's answers.

Run on a real GPU node (with ncdoc importable, e.g. PYTHONPATH=<repo>):

    python3 tests/capture/gather_node.py OUT_DIR

OUT_DIR gets
  root/           every /sys, /proc and other file or folder the probes touched, with sysfs's
                  relative symlinks kept as links, and the entries of every folder they listed
                  under /sys and /proc, the NCCL-related ones elsewhere; small files copied, device nodes,
                  shared libraries and binary attributes left empty)
  nvml.json       NVML's answers in ncdoc.examples.nvml_replay's recording format
  snapshot.json   the snapshot ncdoc took live, to compare a replay of root/ + nvml.json against
  paths.txt       the paths the probes asked for, in order

No NCCL_* variables are recorded: the environment is the capturing shell's.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

# Attribute files never read while copying a listed folder: binary, slow, or with side effects.
_SKIP = {"config", "rom", "vpd", "remove", "rescan", "reset", "new_id", "remove_id", "bind", "unbind",
         "driver_override", "reset_method", "d3cold_allowed"}
_MAX_FILE = 4 << 20


class _Recorder:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.listed: list[str] = []

    def install(self) -> None:
        from ncdoc.probes import sysfs

        recorder, original_path, original_listdir = self, sysfs.SysfsReader.path, sysfs.SysfsReader.listdir

        def path(reader: Any, rel: str) -> str:
            recorder.paths.append("/" + rel.lstrip("/"))
            return original_path(reader, rel)

        def listdir(reader: Any, rel: str) -> Any:
            recorder.listed.append("/" + rel.lstrip("/"))
            return original_listdir(reader, rel)

        sysfs.SysfsReader.path = path          # type: ignore[method-assign]
        sysfs.SysfsReader.listdir = listdir    # type: ignore[method-assign]


def _copy_file(src: str, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = b""
    name = os.path.basename(src)
    if name not in _SKIP and not name.startswith("resource") and ".so" not in name:
        try:
            with open(src, "rb") as fh:
                data = fh.read(_MAX_FILE)
        except OSError:
            data = b""
    dst.write_bytes(data)


def _replicate(live: str, out: Path, *, content: bool = True, depth: int = 0) -> None:
    """Recreate `live` (an absolute path) under `out`: each symlink on the way as the same link."""
    if depth > 40:
        return
    parts = [p for p in live.split("/") if p]
    cur = "/"
    for i, part in enumerate(parts):
        nxt = os.path.join(cur, part)
        dst = out / nxt.lstrip("/")
        try:
            st = os.lstat(nxt)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            if not os.path.lexists(dst):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.readlink(nxt), dst)
            # the link's own target, not its realpath: links on the way (/proc/self) are facts too
            literal = os.path.normpath(os.path.join(cur, os.readlink(nxt)))
            _replicate(literal, out, content=content and i == len(parts) - 1, depth=depth + 1)
            cur = os.path.realpath(nxt)
            continue
        last = i == len(parts) - 1
        if stat.S_ISDIR(st.st_mode):
            dst.mkdir(parents=True, exist_ok=True)
        elif last and stat.S_ISREG(st.st_mode):
            if not dst.exists():
                if content:
                    _copy_file(nxt, dst)
                else:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_bytes(b"")
        elif last:
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                dst.write_bytes(b"")          # a device node or socket: its name is the fact
        cur = nxt


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__.removeprefix("NVMLError_") or "Unknown"


def record_nvml(nvml: Any) -> dict[str, Any]:
    """NVML's answers, in the format ncdoc.examples.nvml_replay.RecordedNvml replays."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return {"init_error": _error_name(exc)}

    def ask(fn: str, *args: Any) -> Any:
        try:
            value = getattr(nvml, fn)(*args)
        except nvml.NVMLError as exc:
            return {"error": _error_name(exc)}
        return value.decode() if isinstance(value, bytes) else value

    def pci(info: Any) -> Any:
        if isinstance(info, dict):
            return info
        bus_id = info.busId.decode() if isinstance(info.busId, bytes) else info.busId
        return {"busId": bus_id, "domain": int(info.domain), "bus": int(info.bus), "device": int(info.device),
                "pciDeviceId": int(info.pciDeviceId), "pciSubSystemId": int(info.pciSubSystemId)}

    answers: dict[str, Any] = {"driver_version": ask("nvmlSystemGetDriverVersion"),
                               "cuda_driver_version": ask("nvmlSystemGetCudaDriverVersion"),
                               "devices": [], "p2p": {}}
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    for handle in handles:
        dev: dict[str, Any] = {"name": ask("nvmlDeviceGetName", handle), "uuid": ask("nvmlDeviceGetUUID", handle),
                               "pci": pci(ask("nvmlDeviceGetPciInfo", handle))}
        numa = ask("nvmlDeviceGetNumaNodeId", handle)
        dev["numa_node"] = None if isinstance(numa, dict) and numa.get("error") == "NotSupported" else numa
        cc = ask("nvmlDeviceGetCudaComputeCapability", handle)
        dev["cuda_compute_capability"] = list(cc) if isinstance(cc, tuple) else cc
        mem = ask("nvmlDeviceGetMemoryInfo", handle)
        dev["memory_total"] = mem if isinstance(mem, dict) else int(mem.total)
        links: Any = []
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            state = ask("nvmlDeviceGetNvLinkState", handle, link)
            if isinstance(state, dict):
                if link == 0 and state.get("error") != "InvalidArgument":
                    links = state
                break
            entry: dict[str, Any] = {"state": int(state)}
            if state:
                entry["remote_type"] = ask("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
                entry["remote_pci"] = pci(ask("nvmlDeviceGetNvLinkRemotePciInfo", handle, link))
            links.append(entry)
        dev["nvlinks"] = links
        dev["fabric"] = _fabric(nvml, handle)
        pending = ask("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        if not isinstance(pending, dict):          # a GPU without HBM answers NotSupported: leave it out
            dev["retired_pages_pending"] = int(pending)
        rows = ask("nvmlDeviceGetRemappedRows", handle)
        if isinstance(rows, (tuple, list)) and len(rows) >= 4:
            dev["remapped_rows"] = {"corrected": int(rows[0]), "uncorrected": int(rows[1]),
                                    "pending": bool(rows[2]), "failure": bool(rows[3])}
        answers["devices"].append(dev)
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            answers["p2p"][f"{a}-{b}"] = {str(i): ask("nvmlDeviceGetP2PStatus", handles[a], handles[b], i)
                                         for i in (0, 1)}
    nvml.nvmlShutdown()
    return answers


def _fabric(nvml: Any, handle: Any) -> dict[str, Any]:
    from ncdoc.probes.gpus import read_fabric_info

    info, error = read_fabric_info(nvml, handle, nvml.NVMLError)
    if info is None:
        return {"error": (error or "Unknown").removeprefix("NVMLError_")}
    return {"state": int(info.state), "status": int(info.status), "clique_id": int(info.cliqueId)}


def _kernel_names(root: Path) -> None:
    """What /proc/sys/kernel says of the host, where this kernel's /proc would not let it be read."""
    uname = os.uname()
    for name, value in (("hostname", uname.nodename), ("osrelease", uname.release), ("arch", uname.machine)):
        dst = root / "proc/sys/kernel" / name
        if not dst.exists() or not dst.read_bytes().strip():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(value + "\n")


def _addresses(root: Path) -> None:
    """`ip -j addr show`, kept where ncdoc.probes.net looks for it in a captured tree."""
    import subprocess

    try:
        done = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return
    dst = root / ".ncdoc" / "ip-addr.json"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(done.stdout)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    root = out / "root"
    root.mkdir(parents=True, exist_ok=True)
    import pynvml

    (out / "nvml.json").write_text(json.dumps(record_nvml(pynvml), indent=1) + "\n")
    recorder = _Recorder()
    recorder.install()
    from ncdoc.probes.live import capture

    snapshot = capture()
    (out / "snapshot.json").write_text(snapshot.to_json() if hasattr(snapshot, "to_json") else
                                       json.dumps(snapshot.to_dict(), indent=1))
    for path in dict.fromkeys(recorder.paths):
        _replicate(path, root)
    for folder in dict.fromkeys(recorder.listed):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        system = folder.startswith(("/sys", "/proc", "/dev"))
        for name in names:
            # elsewhere (library and site-packages folders) only the NCCL-related names are facts
            if system or "nccl" in name.lower():
                _replicate(os.path.join(folder, name), root, content=not folder.startswith("/dev") and system)
    _kernel_names(root)
    _addresses(root)
    (out / "paths.txt").write_text("\n".join(dict.fromkeys(recorder.paths)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
