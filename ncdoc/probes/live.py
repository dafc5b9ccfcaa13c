"""capture(): run every probe against one root and assemble the Snapshot.

Each probe fills one section and says what it could not find. A probe that fails in a way
nobody foresaw turns its own section into "unknown, because <error>" and the rest of the
snapshot still fills: a doctor that crashes on the sick node is no use.

NVML is asked in a child process (ncdoc.probes.nvml_process) started right after the host probe,
so it runs while the other probes read sysfs, and it is stopped when it has not answered by the
deadline: the GPU section then says so, and the snapshot names the probe in `probes.timed_out`.
On a node with no NVIDIA device node (/dev/nvidia*) and no NVIDIA driver (/proc/driver/nvidia),
NVML is not asked at all and pynvml is never imported. Each probe's time is kept in
`probes.timings` (`ncdoc check --timings`).
"""

from __future__ import annotations

import os
import time

from ncdoc.errors import DeadlineExceeded
from ncdoc.probes.gpus import GpuProbe, gpus_from, probe_gpus, without_nvml
from ncdoc.probes.hcas import CLASS_DIR as HCA_CLASS_DIR, NOT_INSTALLED, probe_hcas
from ncdoc.probes.host import probe_host
from ncdoc.probes.job import probe_job
from ncdoc.probes.nccl_env import read_nccl_env
from ncdoc.probes.net import probe_net
from ncdoc.probes.numa import probe_numa
from ncdoc.probes.pci import probe_pci
from ncdoc.probes.sysfs import SysfsReader
from ncdoc.probes.versions import probe_versions
from ncdoc.snapshot import (GpuSection, HcaSection, Host, JobSection, NcclEnv, NetSection, NumaSection,
                            PciSection, ProbeRun, ProbeTiming, Snapshot, Status, Versions)

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

# NVML's time when the caller sets none (`ncdoc snapshot`, `ncdoc doctor`): generous, since nvmlInit
# on GPUs without persistence mode takes seconds, but finite, since it can also hang.
DEFAULT_NVML_TIMEOUT_S = 30.0
NO_NVIDIA_DEVICES = ("no NVIDIA device node (/dev/nvidia*) and no NVIDIA driver (/proc/driver/nvidia): "
                     "NVML not queried")


class _Run:
    """The probes' bookkeeping: notes for the snapshot, each probe's time, what timed out."""

    def __init__(self):
        self.notes: list[str] = []
        self.timings: list[ProbeTiming] = []
        self.timed_out: list[str] = []

    def guarded(self, what: str, fn: Callable[[], tuple[Any, list[str]]], empty: Callable[[Status], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            section, found = fn()
        except DeadlineExceeded:
            raise                 # the whole check's deadline: not this probe's bug, the check stops
        except Exception as exc:  # noqa: BLE001 - the contract: a probe bug makes its section unknown
            reason = f"{what} probe failed: {type(exc).__name__}: {exc}"
            self.notes.append(reason)
            section, found = empty(Status.unknown(reason)), []
        self.timings.append(ProbeTiming(name=what, ms=round((time.perf_counter() - t0) * 1000, 2)))
        self.notes.extend(found)
        return section


def _import_verbs() -> tuple[Any, str]:
    """(pyverbs.device, "") when the 'verbs' extra imports; (None, why) when it is absent or broken.

    A broken install (built against another rdma-core: "version `IBVERBS_PRIVATE_59' not found";
    built for another Python: "No module named 'pyverbs.device'") says so, rather than passing
    for "not installed".
    """
    import importlib.util  # noqa: PLC0415 - only on a live capture

    try:
        if importlib.util.find_spec("pyverbs") is None:
            return None, NOT_INSTALLED
    except (ImportError, ValueError) as exc:
        return None, f"pyverbs cannot be found ({type(exc).__name__}: {exc})"
    import logging  # noqa: PLC0415 - pyverbs imports it anyway

    # pyverbs.base calls logging.basicConfig(level=INFO) when imported: with no handler on the
    # root logger, that would start printing every library's INFO records on stderr.
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        import pyverbs.device as verbs  # noqa: PLC0415 - optional, heavy
    except Exception as exc:  # noqa: BLE001 - ImportError, or whatever a broken rdma-core raises
        return None, f"pyverbs failed to import ({type(exc).__name__}: {exc})"
    finally:
        if guard is not None:
            root.removeHandler(guard)
    return verbs, ""


def _verbs_for(fs: SysfsReader, verbs: Any, use_verbs: bool) -> tuple[Any, str]:
    """The pyverbs.device-like module the HCA probe asks, or (None, why there is none)."""
    if not use_verbs:
        return None, NOT_INSTALLED          # the caller captures a node without pyverbs
    if verbs is not None:
        return verbs, ""
    if not fs.live:
        return None, f"pyverbs asks this machine's devices, not the tree under {fs.root}"
    if not fs.listdir(HCA_CLASS_DIR):       # nothing for pyverbs to add, and its import costs ~0.1 s
        return None, f"no RDMA device in {HCA_CLASS_DIR}"
    return _import_verbs()


def nvidia_present(host: Host) -> bool:
    """Whether the node shows an NVIDIA device node or driver (unknown counts as present: ask NVML)."""
    if not host.status.known or host.dev_nvidia is None:
        return True
    return bool(host.dev_nvidia) or bool(host.proc_driver_nvidia)


def _now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def capture(*, sysfs_root: str = "/", nvml: Any = None, verbs: Any = None,
            environ: Mapping[str, str] | None = None, home: str | None = None,
            use_verbs: bool = True, timeout_s: float | None = None, job: Mapping[str, Any] | None = None) -> Snapshot:
    """Probe the node under `sysfs_root` ("/" = this machine) and return its Snapshot.

    nvml: None: on the live root, ask pynvml in a child process when the node shows NVIDIA devices
          (on another root, NVML is not asked); a pynvml-like module: ask it in this process (replays);
          a module name ("pynvml"): ask that module in a child process, on any root.
    timeout_s: how long NVML may take (default DEFAULT_NVML_TIMEOUT_S).
    verbs: a pyverbs.device-like module (None: import pyverbs on the live root when use_verbs).
    use_verbs=False: capture as a node without pyverbs (an example machine that records none).
    environ/home: the environment and home folder a job would start with (default: ours).
    job: ncdoc's own claims about the job (probe_job's keywords: expect_gpus, nodes, config_gpus).
    """
    fs = SysfsReader(sysfs_root)
    env = dict(os.environ if environ is None else environ)
    if home is None:
        home = env.get("HOME")
    verbs, no_verbs = _verbs_for(fs, verbs, use_verbs)
    nvml_time = DEFAULT_NVML_TIMEOUT_S if timeout_s is None else timeout_s
    run = _Run()

    host = run.guarded("host", lambda: probe_host(fs, env), lambda s: Host(status=s))
    pending = None
    t_nvml = time.perf_counter()
    if isinstance(nvml, str) or (nvml is None and fs.live and nvidia_present(host)):
        from ncdoc.probes import nvml_process
        pending = nvml_process.start(fs, nvml if isinstance(nvml, str) else "pynvml")
    pci = run.guarded("PCI", lambda: probe_pci(fs), lambda s: PciSection(status=s))
    numa = run.guarded("NUMA", lambda: probe_numa(fs), lambda s: NumaSection(status=s))
    hcas = run.guarded("RDMA", lambda: probe_hcas(fs, verbs, no_verbs=no_verbs), lambda s: HcaSection(status=s))
    net = run.guarded("network", lambda: probe_net(fs, hcas), lambda s: NetSection(status=s))
    nccl_env = run.guarded("NCCL environment", lambda: (read_nccl_env(env, home=home, root=fs.root), []),
                           lambda s: NcclEnv(status=s))
    jobs = run.guarded("job", lambda: (probe_job(env, **dict(job or {})), []), lambda s: JobSection(status=s))

    def gpus() -> tuple[GpuProbe, list[str]]:
        if pending is not None:
            from ncdoc.probes import nvml_process
            left = nvml_time - (time.perf_counter() - t_nvml)
            answer, stopped = nvml_process.finish(pending, left)
            if stopped:
                run.timed_out.append(answer.error_text)
            probe = gpus_from(answer, pci)
        elif nvml is not None and not isinstance(nvml, str):
            probe = probe_gpus(fs, nvml, pci)
        elif fs.live:
            probe = without_nvml(NO_NVIDIA_DEVICES, pci)
        else:
            probe = without_nvml("NVML not queried: the snapshot root is not this machine", pci)
        return probe, probe.notes

    gpu_probe = run.guarded("NVML" if pending is not None else "GPU", gpus,
                            lambda s: GpuProbe(GpuSection(status=s)))
    if pending is not None:            # NVML's time runs from its start, alongside the other probes
        run.timings[-1] = ProbeTiming(name="NVML", ms=round((time.perf_counter() - t_nvml) * 1000, 2),
                                      timed_out=bool(run.timed_out))
    rdma = bool(hcas.hcas) or not hcas.status.known
    versions = run.guarded(
        "versions", lambda: probe_versions(fs, env, nvml_driver=gpu_probe.driver, nvml_cuda=gpu_probe.cuda_driver,
                                           rdma=rdma),
        lambda s: Versions(status=s))
    return Snapshot(
        origin="live" if fs.live else f"sysfs:{fs.root}",
        created=_now_utc(),
        host=host, versions=versions, gpus=gpu_probe.section, hcas=hcas, net=net,
        pci=pci, numa=numa, env=nccl_env, job=jobs,
        probes=ProbeRun(deadline_s=nvml_time if pending is not None else None, timings=tuple(run.timings),
                        timed_out=tuple(run.timed_out)),
        notes=tuple(dict.fromkeys(run.notes)),
    )
