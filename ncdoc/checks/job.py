"""Checks of the node against the job about to start on it (rules/job.yaml): the GPUs it was given,
whether NVML and the driver work, GPUs in a bad state, an RDMA path for a multi-node job, and
probes that did not answer in time.

The job's expectations are facts in the snapshot (snapshot.job, filled by ncdoc.probes.job from
the launcher's variables and ncdoc's options); nothing here reads the environment. The facts
each check needs are declared with its rule (rules/job.yaml: needs).
"""

from __future__ import annotations

from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit
from ncdoc.nccl.devices import is_active
from ncdoc.readers.numbers import is_digits

# NVML errors other rules explain better, or that say nothing about the node.
_NOT_INIT_FAILURES = ("", "NotInstalled", "Timeout", "LibRmVersionMismatch")


# ncdoc.engine.job_facts is imported where a claim is judged: a job stating nothing needs none of it.

def _claim_ev(c) -> Evidence:
    from ncdoc.engine.job_facts import claim_text
    where = "job" if c.source.startswith(("-", "config:")) else "env"
    return Evidence(claim_text(c), c.source[7:] if c.source.startswith("config:") else where)


@check("fewer_gpus_than_allocated")
def fewer_gpus_than_allocated(ctx: Context):
    snap = ctx.snapshot
    claims = snap.job.gpus
    if not claims:
        return
    from ncdoc.engine.job_facts import claim_text, usable_gpus
    have, how = usable_gpus(snap)
    short = sorted((c for c in claims if c.value > have), key=lambda c: -c.value)
    if short:
        top = short[0]
        yield Hit(f"the job was given {top.value} GPU(s) on this node ({claim_text(top)}) but {how}: "
                  f"{top.value - have} missing; ranks on the missing GPUs fail at CUDA or NCCL init",
                  tuple(_claim_ev(c) for c in short) + (Evidence(how, "gpus"),), subject="gpus")
        return
    # CUDA_VISIBLE_DEVICES names devices by index or UUID: one that does not exist hides every
    # device after it from CUDA.
    cvd = next((c for c in claims if c.source == "CUDA_VISIBLE_DEVICES"), None)
    if cvd is None or snap.gpus.status.state != "ok":
        return
    uuids = {g.uuid for g in snap.gpus.gpus if g.uuid}
    for pos, item in enumerate(cvd.items):
        if is_digits(item):
            bad = int(item) >= have
        elif item.startswith("GPU-"):
            bad = bool(uuids) and not any(u.startswith(item) for u in uuids)
        else:
            continue                       # MIG devices and other forms: not judged here
        if bad:
            what = f"GPU {item}, but {how} (0-{have - 1})" if is_digits(item) else \
                f"{item}, which is none of this node's GPUs ({how})"
            yield Hit(f"CUDA_VISIBLE_DEVICES={cvd.text} names {what}: CUDA stops at it, so the job sees only "
                      f"{pos} GPU(s)", (_claim_ev(cvd), Evidence(how, "gpus")), subject="CUDA_VISIBLE_DEVICES")
            return


def nvidia_driver_evidence(host) -> list[Evidence]:
    """What shows that an NVIDIA driver is there (device nodes, /proc/driver/nvidia); [] when nothing does."""
    out = []
    if host.status.known and host.dev_nvidia:
        out.append(Evidence("/dev: " + " ".join(host.dev_nvidia[:6]) + (" ..." if len(host.dev_nvidia) > 6 else ""),
                            "host"))
    if host.status.known and host.proc_driver_nvidia:
        out.append(Evidence("/proc/driver/nvidia exists (the kernel driver is loaded)", "host"))
    return out


@check("nvml_init_failed")
def nvml_init_failed(ctx: Context):
    snap = ctx.snapshot
    gpus = snap.gpus
    if gpus.nvml_error_kind in _NOT_INIT_FAILURES or "version mismatch" in gpus.nvml_error.lower():
        return
    present = nvidia_driver_evidence(snap.host)
    if not present:
        return                             # no NVIDIA driver at all: nothing for NVML to talk to
    yield Hit(f"NVML cannot start ({gpus.nvml_error or gpus.nvml_error_kind}) although NVIDIA devices exist: CUDA and "
              "NCCL fail the same way on this node", (Evidence(f"NVML: {gpus.nvml_error or gpus.nvml_error_kind}", "gpus"),
                                                      *present), subject="nvml")


@check("driver_library_mismatch")
def driver_library_mismatch(ctx: Context):
    gpus = ctx.snapshot.gpus
    if gpus.nvml_error_kind != "LibRmVersionMismatch" and "version mismatch" not in gpus.nvml_error.lower():
        return
    v = ctx.snapshot.versions
    kernel = v.driver if v.status.known and v.driver else None
    yield Hit("the NVIDIA kernel module and the user-space driver libraries are different versions "
              f"(NVML: {gpus.nvml_error or 'Driver/library version mismatch'})"
              + (f"; the loaded kernel module is {kernel}" if kernel else "")
              + ": nvidia-smi, CUDA and NCCL all fail until they match",
              (Evidence(f"NVML: {gpus.nvml_error}", "gpus"),)
              + ((Evidence(f"kernel module {kernel}", "/proc/driver/nvidia/version"),) if kernel else ()),
              subject="driver")


_LOST = {"GpuIsLost": "the GPU has fallen off the bus (XID 79)", "ResetRequired": "the GPU needs a reset",
         "GpuRequiresReset": "the GPU needs a reset"}


@check("gpu_in_bad_state")
def gpu_in_bad_state(ctx: Context):
    gpus = ctx.snapshot.gpus
    for f in gpus.failed:
        yield Hit(f"GPU {f.index}: {_LOST.get(f.kind, 'NVML cannot use it')} (NVML: {f.error}): a rank on it fails",
                  (Evidence(f"GPU {f.index}: {f.kind or 'error'}: {f.error}", "gpus"),), subject=f"GPU {f.index}")
    for g in gpus.gpus:
        where = f"GPU {g.index} ({g.pci_bus_id})"
        if g.remapped_rows_failure:
            yield Hit(f"{where}: an HBM row remap failed: the GPU cannot retire its bad memory and needs service",
                      (Evidence(f"{where}: remapped rows failure", "gpus"),), subject=f"GPU {g.index}")
        if g.remapped_rows_pending:
            yield Hit(f"{where}: HBM rows were remapped since the last reset; the remap takes effect only after a "
                      "GPU reset", (Evidence(f"{where}: remapped rows pending", "gpus"),), severity="warning",
                      fix="Drain the node and reset the GPU (nvidia-smi -r) or reboot it.", subject=f"GPU {g.index}")
        if g.retired_pages_pending:
            yield Hit(f"{where}: memory pages are pending retirement; they are retired only after a GPU reset",
                      (Evidence(f"{where}: retired pages pending", "gpus"),), severity="warning",
                      fix="Drain the node and reset the GPU (nvidia-smi -r) or reboot it.", subject=f"GPU {g.index}")


@check("multi_node_job_without_rdma")
def multi_node_job_without_rdma(ctx: Context):
    snap = ctx.snapshot
    if not (snap.job.nodes or snap.job.ranks):
        return                             # nothing says how many nodes the job spans
    from ncdoc.engine.job_facts import job_span
    multi, why = job_span(snap)
    if not multi:
        return
    hcas = snap.hcas.hcas
    if not hcas:
        if snap.versions.status.known and snap.versions.net_plugins:
            return                         # a net plugin may carry the traffic (net-plugin rules judge it)
        yield Hit(f"the job spans several nodes ({why}) but this node has no RDMA device "
                  f"({snap.hcas.status.reason or 'none found'}): NCCL carries every transfer between nodes over "
                  "TCP sockets, at a small fraction of the fabric's bandwidth",
                  (Evidence(why, "job"), Evidence(snap.hcas.status.reason or "no RDMA device", "hcas")), subject="rdma")
        return
    ports = [(h, p) for h in hcas for p in h.ports]
    if ports and not any(is_active(p) for _, p in ports):
        listed = ", ".join(f"{h.name}:{p.num} {p.state or '?'}" for h, p in ports[:6]) + (" ..." if len(ports) > 6 else "")
        yield Hit(f"the job spans several nodes ({why}) but every RDMA port of this node is down ({listed}): NCCL "
                  "falls back to TCP sockets between nodes", (Evidence(why, "job"),)
                  + tuple(Evidence(f"{h.name} port {p.num}: {p.state or '?'} ({p.phys_state or '?'})",
                                   f"hcas/{h.name}/port {p.num}") for h, p in ports[:6]), subject="rdma")


@check("probe_timed_out")
def probe_timed_out(ctx: Context):
    for what in ctx.snapshot.probes.timed_out:
        yield Hit(f"{what}: the node was not fully checked, and a driver that hangs here hangs the job too",
                  (Evidence(what, "probes"),), subject=what.split(" ", 1)[0])
