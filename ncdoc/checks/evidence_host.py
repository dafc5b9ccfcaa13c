"""Checks over what a run and its host say about the CUDA driver, the NCCL build and the process limits:
a driver older than the CUDA runtime, a kernel module that does not match the driver's libraries, an
NCCL (or nccl-tests) build without the GPU's architecture, a locked-memory limit too low for RDMA.

They read CUDA errors from NCCL logs and nccl-tests output alike (evidence_common.cuda_errors), NCCL's
own version lines, and host command output (ncdoc.evidence.host_output: ulimit -a, nvidia-smi, the
kernel module's version).
"""

from __future__ import annotations

from ncdoc.checks.evidence_common import cite_cuda, cite_kind, cite_problems, cuda_errors, gpu_name, merge_evidence
from ncdoc.engine.rules import Context, check
from ncdoc.evidence.host_output import driver_branch
from ncdoc.findings import Evidence, Hit
from ncdoc.nccl import cuda_versions as cv
from ncdoc.readers.numbers import is_digits
from ncdoc.startup.compiled_patterns import precompiled


def _hosts(ctx: Context) -> list:
    return list(ctx.evidence.get("host_output", ()))


def _host_ev(h, *kinds: str, limit: int = 3) -> tuple[Evidence, ...]:
    out: list[Evidence] = []
    for k in kinds:
        for c in h.evidence.get(k, ()):
            e = Evidence(c.text.strip(), h.source, c.line)
            if e not in out:
                out.append(e)
    return tuple(out[:limit])


def _build(ctx: Context) -> tuple[tuple[int, int] | None, str]:
    """The CUDA the job's NCCL (or nccl-tests) was built with, and where that was read."""
    for log in ctx.logs:
        v = cv.version(getattr(log, "cuda_build", None))
        if v:
            return v, f"NCCL {log.nccl_version or ''}+cuda{cv.text(v)}".replace(" +", "+")
    for r in ctx.evidence.get("ras", ()):
        v = cv.version(r.cuda_build) or cv.version(r.cuda_runtime)
        if v:
            return v, f"the CUDA runtime RAS reports ({cv.text(v)})"
    for h in _hosts(ctx):
        v = cv.version(h.nvcc)
        if v:
            return v, f"nvcc {cv.text(v)} (the toolkit on the path, which may not be the runtime the job loads)"
    return None, ""


def _driver(ctx: Context) -> tuple[int | None, tuple[int, int] | None, str]:
    """(driver branch, the CUDA version the driver reports, where) from host output, logs and RAS."""
    branch, cuda, where = None, None, ""
    for h in _hosts(ctx):
        v = h.driver_version or h.kernel_module
        if v:
            branch, where = driver_branch(v), f"driver {v}"
        if h.smi_cuda:
            cuda = cv.version(h.smi_cuda)
    for log in ctx.logs:
        if cuda is None and getattr(log, "cuda_driver", None):
            cuda = cv.version(log.cuda_driver)
            where = where or f"the driver's CUDA {log.cuda_driver} (cudaDriverVersion)"
    for r in ctx.evidence.get("ras", ()):
        if cuda is None and r.cuda_driver:
            cuda = cv.version(r.cuda_driver)
            where = where or f"the driver's CUDA {cv.text(cuda)} (RAS)"
    if cuda is None and branch is not None:
        cuda = cv.max_cuda_for_driver(branch)
    return branch, cuda, where


# ---------------------------------------------------------------- the driver and the CUDA runtime

@check("cuda_driver_too_old")
def cuda_driver_too_old(ctx: Context):
    """CUDA error 35 (driver older than the runtime), or an NCCL built for a CUDA major release the driver does
    not run."""
    errors = [e for e in cuda_errors(ctx) if e.code in (35, 222)]
    said = [h for h in _hosts(ctx) if h.driver_too_old or h.insufficient_driver]   # a framework's own words
    build, built_where = _build(ctx)
    branch, driver_cuda, driver_where = _driver(ctx)
    if said and driver_cuda is None:
        driver_cuda = next((cv.version(h.driver_too_old) for h in said if h.driver_too_old), None)
        driver_where = driver_where or (f"the driver (CUDA {cv.text(driver_cuda)}, as the framework found it)"
                                        if driver_cuda else "")
    if not errors and not said and not (build and driver_cuda and build[0] > driver_cuda[0]):
        return          # no error seen: only a build for a newer CUDA major release than the driver runs must fail
    runs = f"{driver_where} runs CUDA up to {cv.text(driver_cuda)}" if driver_cuda and driver_where else ""
    need = cv.min_driver_for_cuda(build)
    parts = []
    if errors:
        e = errors[0]
        parts.append(f"CUDA error {e.code} ('{e.text}') from {'nccl-tests' if e.origin == 'tests' else 'NCCL'}"
                     + (f" at {e.where}" if e.where else "") + ": the installed NVIDIA driver is older than the CUDA "
                     "runtime the job loads")
    elif said:
        parts.append("the framework reports the NVIDIA driver too old for the CUDA runtime it was built with")
    else:
        parts.append(f"{built_where} needs a driver for CUDA {build[0]}.x, but the driver runs CUDA "
                     f"{cv.text(driver_cuda)}: CUDA calls fail with 'driver version is insufficient'")
    if runs:
        parts.append(runs)
    if build and errors:
        parts.append(f"the job uses {built_where}")
    ev = merge_evidence(cite_cuda(errors, 2),
                        *(_host_ev(h, "driver_too_old", "smi", "kernel_module", "nvcc") for h in _hosts(ctx)),
                        *(cite_kind(log, "nccl_version", limit=1) for log in ctx.logs))
    fix = ("Upgrade the NVIDIA driver" + (f" to branch {need} or newer (CUDA {cv.text(build)} needs it)" if need else "")
           + ", or use a build of the framework / NCCL / nccl-tests for the CUDA the driver runs (nvidia-smi's "
             "'CUDA Version'); in a container on a datacenter GPU the cuda-compat package lets a newer CUDA run on "
             "an older driver. Check LD_LIBRARY_PATH for a libcudart newer than the one you expect.")
    yield Hit("; ".join(parts), ev, fix=fix, subject="cuda-driver")


@check("ev_driver_library_mismatch")
def ev_driver_library_mismatch(ctx: Context):
    """NVML or CUDA say the NVIDIA kernel module and the user-space driver libraries differ."""
    probs = [(log, p) for log in ctx.logs for k in ("driver_library_mismatch", "nvml_init_failed")
             for p in log.problems_of(k) if k == "driver_library_mismatch" or "mismatch" in p.message.lower()]
    cuda803 = [e for e in cuda_errors(ctx) if e.code == 803]
    hosts = [h for h in _hosts(ctx) if (h.nvml_error and "mismatch" in h.nvml_error.lower()) or
             (h.kernel_module and any(v != h.kernel_module for v in h.userspace_versions.values()))]
    if not (probs or cuda803 or hosts):
        return
    module = next((h.kernel_module for h in _hosts(ctx) if h.kernel_module), None)
    user = {k: v for h in _hosts(ctx) for k, v in h.userspace_versions.items()}
    differ = {k: v for k, v in user.items() if module and v != module}
    said = []
    if probs or any(h.nvml_error for h in hosts):
        said.append("NVML refuses to start ('Driver/library version mismatch')")
    if cuda803:
        said.append("CUDA reports error 803 (unsupported driver / CUDA driver combination)")
    msg = " and ".join(said) or "the driver's versions disagree"
    if module and differ:
        msg += (f": the loaded kernel module is {module} but the user-space driver is "
                + ", ".join(f"{v} ({k})" for k, v in list(differ.items())[:3]))
    elif user:
        msg += ": user-space " + ", ".join(f"{k} {v}" for k, v in list(user.items())[:2])
    msg += (" - the driver was updated without reloading the kernel module (or the packages are half upgraded); "
            "nvidia-smi, CUDA and NCCL fail on this node until they match")
    ev = merge_evidence(*(cite_problems(log, [p], 1) for log, p in probs[:2]), cite_cuda(cuda803, 1),
                        *(_host_ev(h, "nvml", "kernel_module", "packages", "smi") for h in _hosts(ctx)))
    yield Hit(msg, ev, fix="Reboot the node (or stop everything using the GPUs and reload the nvidia modules) so the "
                           "kernel module matches the libraries; if the installed packages themselves disagree, repair "
                           "them first (apt --fix-broken install / one driver version for kernel module and "
                           "libnvidia-*), then reboot; in containers take the host's driver libraries through the NVIDIA "
                           "container toolkit instead of baking them into the image.",
              subject="driver-library")


# ---------------------------------------------------------------- NCCL built without the GPU's architecture

_ARCH_CODES = (500, 209, 98, 200)


@check("nccl_missing_gpu_arch")
def nccl_missing_gpu_arch(ctx: Context):
    """A CUDA error that says the binary has no kernel for this GPU ('named symbol not found' when NCCL looks up
    its kernels, 'no kernel image is available', 'invalid device function')."""
    errors = [e for e in cuda_errors(ctx) if e.code in _ARCH_CODES]
    framework = [h for h in _hosts(ctx) if h.gpu_sm]
    if not errors:
        if framework:
            yield _framework_arch(framework[0])
        return
    e = errors[0]
    tests_kernel = e.origin == "tests"
    what = "nccl-tests (its own kernels)" if tests_kernel else "NCCL"
    gpu = gpu_name(ctx) or next((g.name for g in (ctx.snapshot.gpus.gpus if ctx.snapshot else ())), None) or next(
        (h.gpu_name for h in framework), None)
    cc = next((g.compute_capability for g in (ctx.snapshot.gpus.gpus if ctx.snapshot else ()) if
               g.compute_capability), None) or next((_cc(h.gpu_sm) for h in framework), None) or cv.gpu_arch(gpu)
    build, built_where = _build(ctx)
    msg = (f"CUDA error {e.code} ('{e.text}') from {what}" + (f" at {e.where}" if e.where else "")
           + ": the library was built without kernels for this GPU's architecture"
           + (" (NCCL looks its kernels up at init and launch)" if e.code == 500 else ""))
    if gpu or cc:
        msg += f"; the GPU is {gpu or 'of compute capability'}" + (f" (compute capability {cc})" if cc else "")
    can = cv.cuda_builds_arch(build, cc)
    if can is False:
        need = cv.arch_needs(cc)
        msg += (f"; {built_where} cannot contain kernels for compute capability {cc}"
                + (f" (that needs CUDA {cv.text(need)} or newer)" if need and build < need else
                   " (that CUDA no longer builds for it)"))
    elif build:
        msg += f"; {built_where}"
    fix = ("Use " + ("an nccl-tests build" if tests_kernel else "an NCCL build") + " that includes this GPU's compute "
           "capability: NVIDIA's packages (libnccl2, the nvidia-nccl-cu* wheels) carry every architecture their CUDA "
           "supports; a source build needs NVCC_GENCODE with it (e.g. \"-gencode=arch=compute_90,code=sm_90\" for "
           "H100)" + (f", and a CUDA of at least {cv.text(cv.arch_needs(cc))}" if cv.arch_needs(cc) else "")
           + ". With a framework, install its build for this GPU's CUDA and check which libnccl the process loads "
             "(NCCL_DEBUG=VERSION, LD_LIBRARY_PATH): another package may bring an older one.")
    ev = merge_evidence(cite_cuda(errors, 2), *(cite_kind(log, "nccl_version", limit=1) for log in ctx.logs))
    yield Hit(msg, ev, fix=fix, subject="gpu-arch")


def _cc(sm: str) -> str:
    """"12.0" of sm_120 / "120", "9.0" of "90"."""
    return f"{sm[:-1]}.{sm[-1]}" if sm and is_digits(sm) and len(sm) >= 2 else sm


def _framework_arch(h) -> Hit:
    """The framework says its build has no kernels for the GPU: the NCCL it bundles is built for the same list."""
    archs = " ".join(h.framework_archs)
    return Hit(f"the framework build has no kernels for {h.gpu_name or 'this GPU'} (compute capability {_cc(h.gpu_sm)})"
               + (f": it supports {archs}" if archs else "")
               + "; the NCCL it bundles is built for the same architectures, so collectives fail with 'named symbol "
                 "not found' or 'no kernel image is available'",
               tuple(Evidence(c.text.strip(), h.source, c.line) for c in h.evidence.get("gpu_arch", ())[:2]),
               fix="Install the framework build for a CUDA that supports this GPU (for Blackwell, CUDA 12.8 or newer "
                   "wheels) together with its NCCL; check which libnccl the process loads.",
               severity="warning", subject="gpu-arch")


# ---------------------------------------------------------------- the locked-memory limit

_REGISTER = ("ibv_reg_mr", "ibv_reg_mr_iova", "ibv_reg_mr_iova2", "ibv_create_cq", "ibv_create_qp", "ibv_alloc_pd",
             "ibv_reg_dmabuf_mr")
_REGISTERS = precompiled(r"reg|[Rr]egister|MR\b")
_LOW_KIB = 1 << 20        # below 1 GiB of locked memory RDMA buffers of a multi-GPU job do not fit


def _registration_failures(ctx: Context) -> tuple[list, list]:
    """(ENOMEM registration failures, failures without an errno) from NCCL logs, aws-ofi-nccl, other RDMA libraries."""
    enomem, unknown = [], []
    for log in ctx.logs:
        for p in log.problems_of("ibv_call_failed"):
            call = p.details.get("call", "")
            if call not in _REGISTER or call == "ibv_reg_dmabuf_mr" and p.code != 12:
                continue
            (enomem if p.code == 12 else unknown if p.code is None else []).append((log, p))
        for p in log.problems_of("ofi_error"):
            if "register memory" in p.message and ("-12" in p.message or "Cannot allocate memory" in p.message):
                enomem.append((log, p))
    return enomem, unknown


@check("memlock_limit_too_low")
def memlock_limit_too_low(ctx: Context):
    """Memory registration (ibv_reg_mr, CQ creation) failing with ENOMEM, or a locked-memory limit (ulimit -l)
    too small for RDMA."""
    enomem, unknown = _registration_failures(ctx)
    hosts = _hosts(ctx)
    others = [(h, r) for h in hosts for r in h.registrations]
    limits = [h for h in hosts if h.memlock_kib is not None]
    low = [h for h in limits if h.memlock_kib < _LOW_KIB]
    if not (enomem or unknown or others or limits):
        return
    if limits and not low and not (enomem or unknown or others):
        return
    lim = low[0].memlock_kib if low else (limits[0].memlock_kib if limits else None)
    limit = f"the locked-memory limit is {lim} KiB (ulimit -l)" if lim is not None else ""
    parts = []
    if enomem:
        calls = sorted({p.details.get("call") or "memory registration" for _, p in enomem})
        parts.append(f"{', '.join(calls)} failed with ENOMEM ('Cannot allocate memory')")
    if others and not enomem:
        parts.append(f"another RDMA library reports ENOMEM: '{others[0][1].call}: Cannot allocate memory'")
    if unknown and not (enomem or others):
        parts.append(f"{unknown[0][1].details.get('call', 'ibv_reg_mr')} failed (this NCCL or plugin prints no "
                     "errno)")
    if limit:
        parts.append(limit)
    # a registration failing with ENOMEM is the limit; creating a CQ or QP can also run out of device resources
    registering = bool(enomem) or any(_REGISTERS.search(r.call) for _, r in others)
    observed = registering or (others and low)
    if observed or (unknown and low):
        why = ("RDMA pins every buffer it registers, and the process may lock only that much memory: registration "
               "fails and NCCL (or the RDMA library) aborts the connection")
        sev = "error"
    elif unknown or others:
        why = ("a failed registration or queue creation is most often the locked-memory limit (ulimit -l) of the "
               "job's processes, above all in containers started without --ulimit memlock=-1; check it inside the job")
        sev = "warning"
    else:
        why = ("NCCL's RDMA transports pin their buffers and need an unlimited locked-memory limit; at this limit "
               "memory registration fails as soon as the job uses InfiniBand/RoCE or EFA")
        sev = "warning"
    ev = merge_evidence(*(cite_problems(log, [p], 1) for log, p in (enomem + unknown)[:2]),
                        *(_host_ev(h, "registration", "memlock") for h in hosts))
    yield Hit("; ".join(parts) + ": " + why, ev,
              fix="Run the job with an unlimited locked-memory limit: `ulimit -l unlimited` in the job's shell "
                  "(/etc/security/limits.conf `* - memlock unlimited` applies to new login sessions only); Slurm: "
                  "slurmd's LimitMEMLOCK=infinity and PropagateResourceLimits; Docker: --ulimit memlock=-1 (and the "
                  "daemon's LimitMEMLOCK=infinity); check it where the ranks run (`srun bash -c 'ulimit -l'`, "
                  "`mpirun ... bash -c 'ulimit -l'`).",
              severity=sev, subject="memlock")
