"""Which CUDA a driver runs, and which CUDA can build kernels for a GPU: the facts behind "driver too old" and
"NCCL built without this GPU's architecture".

From the CUDA Toolkit release notes (Table 3, "CUDA Toolkit and Corresponding Driver Versions", Linux x86_64
minimum driver of each toolkit's first release) and the compute capabilities NVIDIA lists per GPU. Since
CUDA 11, applications built with any 11.x (12.x, 13.x) runtime also run on the first driver of that major
release (minor version compatibility, without JIT of newer PTX), so "too old" means a driver older than the
major release's first driver; before 11 each toolkit needed its own driver.
"""

from __future__ import annotations
from ncdoc.readers.numbers import is_digits

# (CUDA version, minimum Linux driver branch of its first release), newest first
_CUDA_DRIVER = (
    ((13, 0), 580), ((12, 9), 575), ((12, 8), 570), ((12, 6), 560), ((12, 5), 555), ((12, 4), 550),
    ((12, 3), 545), ((12, 2), 535), ((12, 1), 530), ((12, 0), 525), ((11, 8), 520), ((11, 7), 515),
    ((11, 6), 510), ((11, 5), 495), ((11, 4), 470), ((11, 3), 465), ((11, 2), 460), ((11, 1), 455),
    ((11, 0), 450), ((10, 2), 440), ((10, 1), 418), ((10, 0), 410), ((9, 2), 396), ((9, 1), 390),
    ((9, 0), 384), ((8, 0), 375),
)

# the first CUDA that can compile kernels for a compute capability, and which it drops
_ARCH_SINCE = {"3.5": (5, 0), "3.7": (5, 0), "5.0": (6, 0), "6.0": (8, 0), "6.1": (8, 0), "7.0": (9, 0),
               "7.5": (10, 0), "8.0": (11, 0), "8.6": (11, 1), "8.7": (11, 4), "8.9": (11, 8), "9.0": (11, 8),
               "10.0": (12, 8), "10.3": (12, 9), "12.0": (12, 8), "12.1": (12, 9)}
_ARCH_UNTIL = {"3.5": (11, 8), "3.7": (11, 8), "5.0": (12, 9), "5.2": (12, 9), "6.0": (12, 9), "6.1": (12, 9),
               "7.0": (12, 9)}    # the last CUDA that still builds for it

# GPU name fragments -> compute capability (most specific first)
_GPU_ARCH = (
    ("GB200", "10.0"), ("GB300", "10.3"), ("B300", "10.3"), ("B200", "10.0"), ("B100", "10.0"), ("GB10", "12.1"),
    ("RTX PRO 6000 Blackwell", "12.0"), ("RTX PRO 6000", "12.0"), ("RTX 50", "12.0"),
    ("GH200", "9.0"), ("H200", "9.0"), ("H100", "9.0"), ("H800", "9.0"), ("H20", "9.0"),
    ("L40", "8.9"), ("L4", "8.9"), ("RTX 40", "8.9"), ("RTX 6000 Ada", "8.9"),
    ("A100", "8.0"), ("A800", "8.0"), ("A30", "8.0"), ("A40", "8.6"), ("A10", "8.6"), ("RTX 30", "8.6"),
    ("RTX A6000", "8.6"), ("T4", "7.5"), ("RTX 20", "7.5"), ("V100", "7.0"), ("P100", "6.0"), ("P40", "6.1"),
    ("GTX 10", "6.1"), ("K80", "3.7"), ("K40", "3.5"),
)


def version(text: str | int | None) -> tuple[int, int] | None:
    """(12, 4) from "12.4", "12040" or 12040 (CUDA's major*1000 + minor*10)."""
    if text is None:
        return None
    s = str(text).strip()
    if is_digits(s) and len(s) >= 4:
        n = int(s)
        return n // 1000, n % 1000 // 10
    parts = s.split(".")
    if len(parts) >= 2 and is_digits(parts[0]) and is_digits(parts[1][:2]):
        return int(parts[0]), int(parts[1][:2])
    return None


def text(v: tuple[int, int] | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "?"


def max_cuda_for_driver(branch: int | None) -> tuple[int, int] | None:
    """The newest CUDA whose first release runs on driver branch `branch` (525 -> (12, 0))."""
    if branch is None:
        return None
    for cuda, minimum in _CUDA_DRIVER:
        if branch >= minimum:
            return cuda
    return None


def min_driver_for_cuda(cuda: tuple[int, int] | None) -> int | None:
    """The driver branch a CUDA runtime needs: its major release's first driver from CUDA 11 on, else its own."""
    if cuda is None:
        return None
    want = (cuda[0], 0) if cuda[0] >= 11 else cuda
    for c, minimum in _CUDA_DRIVER:           # newest first: the first release at or below it
        if c <= want:
            return minimum
    return None


def driver_runs(branch: int | None, cuda: tuple[int, int] | None) -> bool | None:
    """Whether driver branch `branch` runs a CUDA `cuda` runtime (None when unknown)."""
    need = min_driver_for_cuda(cuda)
    if branch is None or need is None:
        return None
    return branch >= need


def gpu_arch(name: str | None) -> str | None:
    """"9.0" for "NVIDIA H100 80GB HBM3", None when the name is unknown."""
    if not name:
        return None
    for frag, cc in _GPU_ARCH:
        if frag.lower() in name.lower():
            return cc
    return None


def cuda_builds_arch(cuda: tuple[int, int] | None, cc: str | None) -> bool | None:
    """Whether a CUDA toolkit can build kernels for compute capability `cc` (None when unknown)."""
    if cuda is None or cc is None or cc not in _ARCH_SINCE:
        return None
    if cuda < _ARCH_SINCE[cc]:
        return False
    until = _ARCH_UNTIL.get(cc)
    return not (until and cuda > until)


def arch_needs(cc: str | None) -> tuple[int, int] | None:
    """The first CUDA that builds kernels for `cc`."""
    return _ARCH_SINCE.get(cc or "")


__all__ = ["version", "text", "max_cuda_for_driver", "min_driver_for_cuda", "driver_runs", "gpu_arch",
           "cuda_builds_arch", "arch_needs"]
