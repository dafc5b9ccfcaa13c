"""What people paste about the host a job ran on, read as facts: `ulimit -a` (the locked-memory limit),
nvidia-smi and NVML failures ("Failed to initialize NVML: Driver/library version mismatch", "NVML
library version: 550.144", the table header's driver and CUDA versions), the kernel module's
/proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06"), the
driver packages `dpkg -l` lists, `nvcc --version`, the kernel's "NVRM: API mismatch" line, and
memory registrations other RDMA libraries (UCX, libfabric, perftest) report failing with ENOMEM.

Formats: bash's `ulimit -a` rows ("max locked memory       (kbytes, -l) 64"), nvidia-smi's header
("| NVIDIA-SMI 384.81    Driver Version: 384.81    CUDA Version: 12.2 |"), NVML's nvmlErrorString texts,
dpkg's "ii  <name>  <version>  <arch>  <description>" rows. Lines may carry launcher or CI prefixes.

    host = parse_host_output(lines, source="session.txt")     # HostOutput; .empty when none of it was there
"""

from __future__ import annotations
from collections.abc import Iterable

from ncdoc.startup.record import field, record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence.citation import Citation, CitationBook
from ncdoc.evidence.report_markers import HOST_MARKERS
from ncdoc.evidence.wrappers import strip_wrappers
from ncdoc.evidence.lazy_re import lazy
from ncdoc.readers.numbers import is_digits

_MEMLOCK = lazy(r"^max locked memory\s+\(kbytes, -l\)\s+(\S+)")
_NVML_FAIL = lazy(r"Failed to initialize NVML: (.*\S|.)\s*$")
_NVML_LIB = lazy(r"NVML library version: (\d+(?:\.\d+)+)")
_NVRM = lazy(r"NVRM version: NVIDIA UNIX (?:Open )?(?:\S+ )?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")
_SMI_HEAD = lazy(r"NVIDIA-SMI (\d+(?:\.\d+)+)\s+Driver Version: (\d+(?:\.\d+)+)(?:\s+CUDA Version: (\d+\.\d+))?")
_SMI_FAILED = lazy(r"NVIDIA-SMI has failed because (.*\S|.)\s*$")
_SMI_RC = lazy(r"nvidia-smi failed with return code (\d{1,20}(?!\d))")
_DPKG = lazy(r"^[a-z][a-zA-Z]\s+((?:lib)?nvidia[\w.+\-]*|cuda-drivers[\w.+\-]*|nvidia-smi)(?::\w+)?\s+"
                   r"(?:\d+:)?(\d+\.\d+(?:\.\d+)?)")
_API_MISMATCH = lazy(r"NVRM: API mismatch: the client has the version (\d+(?:\.\d+)+), but\s+(?:NVRM: )?this "
                           r"kernel module has the version (\d+(?:\.\d+)+)")
_NVCC = lazy(r"Cuda compilation tools, release (\d+\.\d+)")
# "ibv_create_cq(cqe=4096) failed: Cannot allocate memory" (UCX), "Unable to create extended CQ: Cannot allocate
# memory" (libfabric's EFA provider), "Couldn't register MR ... Cannot allocate memory" (perftest)
_ENOMEM = lazy(r"(ibv_\w+|[Cc]ouldn't (?:register|create|allocate) \w+|Unable to (?:create|register) [\w ]{1,40}?)"
                     r"(?:\([^)]{0,80}\))?(?: failed)?: Cannot allocate memory")

# PyTorch's own words for the driver and the GPU (torch/cuda/__init__.py): "The NVIDIA driver on your system is too old
# (found version 11040)", "<GPU> with CUDA capability sm_120 is not compatible with the current PyTorch installation.
# The current PyTorch install supports CUDA capabilities sm_50 sm_60 ... sm_90."
_TORCH_OLD = lazy(r"NVIDIA driver on your system is too old \(found version (\d{1,20}(?!\d))\)")
# led by its literal; the GPU's name is the text before it (a leading "(\S.*?)" is retried from every character)
_TORCH_ARCH = lazy(r" with CUDA capability sm_(\d{1,20}(?!\d)) is not compatible with the current PyTorch installation")
_TORCH_SUPPORTS = lazy(r"supports CUDA capabilities ((?:sm_\d+\s*)+)")
_INSUFFICIENT = "CUDA driver version is insufficient for CUDA runtime version"

MARKERS = HOST_MARKERS            # what a text must hold for this parser to find anything (report_markers)


@record
class Registration:
    """A memory registration or queue creation another RDMA library reported failing with ENOMEM."""
    call: str
    text: str
    line: int


@record
class HostOutput:
    source: str = ""
    memlock_kib: int | None = None         # `ulimit -l` in KiB; None when unknown or unlimited
    memlock_unlimited: bool | None = None  # True: "unlimited"; None: not shown
    nvml_error: str | None = None          # "Driver/library version mismatch"
    nvml_library: str | None = None        # "550.144"
    kernel_module: str | None = None       # "520.56.06" (/proc/driver/nvidia/version, or the API-mismatch line)
    client_version: str | None = None      # the user-space side of an "NVRM: API mismatch"
    smi_version: str | None = None         # nvidia-smi's own version
    driver_version: str | None = None      # nvidia-smi's "Driver Version"
    smi_cuda: str | None = None            # nvidia-smi's "CUDA Version": the newest CUDA the driver runs
    smi_failed: str | None = None          # "couldn't communicate with the NVIDIA driver"
    smi_rc: int | None = None
    packages: dict[str, str] = field(default_factory=dict)   # driver package -> version (dpkg -l)
    nvcc: str | None = None                # the CUDA toolkit nvcc reports
    registrations: tuple[Registration, ...] = ()
    driver_too_old: str | None = None      # the CUDA version a framework found the driver at ("11.4"), saying it is too old
    insufficient_driver: bool = False      # "CUDA driver version is insufficient ..." outside NCCL's and nccl-tests' lines
    gpu_name: str | None = None            # a framework's "<GPU> with CUDA capability sm_N is not compatible ..."
    gpu_sm: str | None = None              # "120"
    framework_archs: tuple[str, ...] = ()  # what the framework build has kernels for ("sm_50", ..., "sm_90")
    evidence: dict[str, tuple[Citation, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.memlock_kib is not None or self.memlock_unlimited is not None or self.nvml_error
                    or self.nvml_library or self.kernel_module or self.driver_version or self.smi_failed
                    or self.packages or self.nvcc or self.registrations or self.smi_rc is not None
                    or self.driver_too_old or self.insufficient_driver or self.gpu_sm)

    @property
    def userspace_versions(self) -> dict[str, str]:
        """The user-space driver versions the output shows, by where it shows them."""
        out = {}
        if self.nvml_library:
            out["NVML library"] = self.nvml_library
        if self.client_version:
            out["the driver client"] = self.client_version
        for name, v in self.packages.items():
            if "nvidia" in name:
                out[f"package {name}"] = v
        return out

    def to_facts(self) -> dict[str, Any]:
        return {"memlock_kib": self.memlock_kib, "memlock_unlimited": self.memlock_unlimited,
                "nvml_error": self.nvml_error, "nvml_library": self.nvml_library, "kernel_module": self.kernel_module,
                "client_version": self.client_version, "smi_version": self.smi_version,
                "driver_version": self.driver_version, "smi_cuda": self.smi_cuda, "smi_failed": self.smi_failed,
                "smi_rc": self.smi_rc, "driver_packages": dict(self.packages), "nvcc": self.nvcc,
                "registration_failures": [{"call": r.call, "text": r.text, "line": r.line} for r in self.registrations],
                "driver_too_old": self.driver_too_old, "insufficient_driver": self.insufficient_driver,
                "gpu_name": self.gpu_name, "gpu_sm": self.gpu_sm, "framework_archs": list(self.framework_archs),
                "evidence": {k: [e.to_dict() for e in v] for k, v in self.evidence.items()}}


def has_host_output(text: str) -> bool:
    """Cheap test: could `text` hold any of it (so a large log is not read line by line for nothing)."""
    return any(m in text for m in MARKERS)


def parse_host_output(lines: Iterable[str], source: str = "") -> HostOutput:
    return parse_host_numbered(enumerate(lines, 1), source)


def parse_host_numbered(numbered: Iterable[tuple[int, str]], source: str = "") -> HostOutput:
    """parse_host_output over (line number, line) pairs."""
    book = CitationBook()
    f: dict[str, Any] = {}
    packages: dict[str, str] = {}
    regs: list[Registration] = []
    for n, raw in numbered:
        text = strip_wrappers(raw.rstrip("\r\n"))
        s = text.strip()
        if not s:
            continue
        if (m := _MEMLOCK.match(s)):
            v = m.group(1)
            if v == "unlimited":
                f["memlock_unlimited"], f["memlock_kib"] = True, None
            elif is_digits(v):
                f["memlock_unlimited"], f["memlock_kib"] = False, int(v)
            book.add("memlock", n, text)
        elif (m := _NVML_FAIL.search(s)):
            f.setdefault("nvml_error", m.group(1).rstrip("."))
            book.add("nvml", n, text)
        elif (m := _NVML_LIB.search(s)):
            f["nvml_library"] = m.group(1)
            book.add("nvml", n, text)
        elif (m := _NVRM.search(s)):
            f["kernel_module"] = m.group(1)
            book.add("kernel_module", n, text)
        elif (m := _API_MISMATCH.search(s)):
            f["client_version"], f["kernel_module"] = m.group(1), m.group(2)
            f.setdefault("nvml_error", "API mismatch between the driver client and the kernel module")
            book.add("nvml", n, text)
        elif (m := _SMI_HEAD.search(s)):
            f["smi_version"], f["driver_version"] = m.group(1), m.group(2)
            if m.group(3):
                f["smi_cuda"] = m.group(3)
            book.add("smi", n, text)
        elif (m := _SMI_FAILED.search(s)):
            f["smi_failed"] = m.group(1)
            book.add("smi", n, text)
        elif (m := _SMI_RC.search(s)):
            f["smi_rc"] = int(m.group(1))
            book.add("smi", n, text)
        elif (m := _NVCC.search(s)):
            f["nvcc"] = m.group(1)
            book.add("nvcc", n, text)
        elif (m := _DPKG.match(s)):
            if len(packages) < 32:
                packages[m.group(1)] = m.group(2)
            book.add("packages", n, text)
        elif "Cannot allocate memory" in s and (m := _ENOMEM.search(s)):
            if len(regs) < 16:
                regs.append(Registration(m.group(1), s[:200], n))
            book.add("registration", n, text)
        elif (m := _TORCH_OLD.search(s)):
            code = int(m.group(1))
            f["driver_too_old"] = f"{code // 1000}.{code % 1000 // 10}"
            book.add("driver_too_old", n, text)
        elif _INSUFFICIENT in s and "NCCL WARN" not in s and "failure" not in s:
            f["insufficient_driver"] = True         # NCCL's and nccl-tests' own lines are read by their parsers
            book.add("driver_too_old", n, text)
        elif (m := _TORCH_ARCH.search(s)):
            f["gpu_name"], f["gpu_sm"] = s[:m.start()].strip().rsplit(" with", 1)[0], m.group(1)
            book.add("gpu_arch", n, text)
            sup = _TORCH_SUPPORTS.search(s)
            if sup:
                f["framework_archs"] = tuple(sup.group(1).split())
        elif (m := _TORCH_SUPPORTS.search(s)):
            f["framework_archs"] = tuple(m.group(1).split())
            book.add("gpu_arch", n, text)
    return HostOutput(source=source, packages=packages, registrations=tuple(regs), evidence=book.freeze(), **f)


def driver_branch(version: str | None) -> int | None:
    """525 for "525.85.12"."""
    if not version:
        return None
    head = version.split(".", 1)[0]
    return int(head) if is_digits(head) else None


__all__ = ["MARKERS", "HostOutput", "Registration", "parse_host_output", "parse_host_numbered", "has_host_output", "driver_branch"]
