"""capture(): run every probe against one root and assemble the Snapshot.

Each probe fills one section and says what it could not find. A probe that fails in a way
nobody foresaw turns its own section into "unknown, because <error>" and the rest of the
snapshot still fills: a doctor that crashes on the sick node is no use.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Callable, Mapping, TypeVar

from ncdoc.probes.gpus import GpuProbe, probe_gpus
from ncdoc.probes.hcas import probe_hcas
from ncdoc.probes.host import probe_host
from ncdoc.probes.nccl_env import read_nccl_env
from ncdoc.probes.net import probe_net
from ncdoc.probes.numa import probe_numa
from ncdoc.probes.pci import probe_pci
from ncdoc.probes.sysfs import SysfsReader
from ncdoc.probes.versions import probe_versions
from ncdoc.snapshot import (GpuSection, HcaSection, Host, NcclEnv, NetSection, NumaSection,
                            PciSection, Snapshot, Status, Versions)

T = TypeVar("T")


def _guarded(what: str, fn: Callable[[], tuple[T, list[str]]], empty: Callable[[Status], T],
             notes: list[str]) -> T:
    try:
        section, found = fn()
    except Exception as exc:  # noqa: BLE001 - the contract: a probe bug makes its section unknown
        reason = f"{what} probe failed: {type(exc).__name__}: {exc}"
        notes.append(reason)
        return empty(Status.unknown(reason))
    notes.extend(found)
    return section


def _with_notes(probe: GpuProbe) -> tuple[GpuProbe, list[str]]:
    return probe, probe.notes


def _import_verbs() -> Any:
    """pyverbs.device when installed (the 'verbs' extra), else None."""
    try:
        import pyverbs.device as verbs  # noqa: PLC0415 - optional, heavy
    except Exception:  # noqa: BLE001 - ImportError, or a broken rdma-core install
        return None
    return verbs


def capture(*, sysfs_root: str = "/", nvml: Any = None, verbs: Any = None,
            environ: Mapping[str, str] | None = None, home: str | None = None,
            use_verbs: bool = True) -> Snapshot:
    """Probe the node under `sysfs_root` ("/" = this machine) and return its Snapshot.

    nvml: a pynvml-like module (None: import pynvml on the live root; skip NVML on another root).
    verbs: a pyverbs.device-like module (None: import pyverbs on the live root when use_verbs).
    environ/home: the environment and home folder a job would start with (default: ours).
    """
    fs = SysfsReader(sysfs_root)
    env = dict(os.environ if environ is None else environ)
    if home is None:
        home = env.get("HOME")
    if verbs is None and use_verbs and fs.live:
        verbs = _import_verbs()
    if not use_verbs:
        verbs = None
    notes: list[str] = []

    host = _guarded("host", lambda: probe_host(fs, env), lambda s: Host(status=s), notes)
    pci = _guarded("PCI", lambda: probe_pci(fs), lambda s: PciSection(status=s), notes)
    numa = _guarded("NUMA", lambda: probe_numa(fs), lambda s: NumaSection(status=s), notes)
    gpu_probe = _guarded("GPU", lambda: _with_notes(probe_gpus(fs, nvml, pci)),
                         lambda s: GpuProbe(GpuSection(status=s)), notes)
    hcas = _guarded("RDMA", lambda: probe_hcas(fs, verbs), lambda s: HcaSection(status=s), notes)
    net = _guarded("network", lambda: probe_net(fs, hcas), lambda s: NetSection(status=s), notes)
    versions = _guarded(
        "versions", lambda: probe_versions(fs, env, nvml_driver=gpu_probe.driver, nvml_cuda=gpu_probe.cuda_driver),
        lambda s: Versions(status=s), notes)
    nccl_env = _guarded("NCCL environment",
                        lambda: (read_nccl_env(env, home=home, root=fs.root), []),
                        lambda s: NcclEnv(status=s), notes)
    return Snapshot(
        origin="live" if fs.live else f"sysfs:{fs.root}",
        created=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        host=host, versions=versions, gpus=gpu_probe.section, hcas=hcas, net=net,
        pci=pci, numa=numa, env=nccl_env, notes=tuple(dict.fromkeys(notes)),
    )
