"""The `torch` backend: a torch.distributed NCCL benchmark (backends/torch_bench.py), one process per
GPU, launched like nccl-tests through the cluster launcher layer (backends/launched.py).

The benchmark takes nccl-tests' flags and prints nccl-tests' format, so every run is checked the
same way (NCCL's INFO log, one job of the GPUs launched, the env reached NCCL on every rank, the
same env on every node, what NCCL chose from its TUNING lines), and it checks its own results
(#wrong). Each run is a fresh set of processes, so NCCL reads the step's environment. The ranks
meet at the group's first node (torch's TCP store, a port derived from the run). Needs torch
with CUDA and NCCL on every node, the same Python (`--torch-python`, default this one) at the
same path; on this machine alone `available()` says what is missing and the CLI exits 2.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any, Mapping, Sequence

from ncdoc.tuner.backends.launched import LaunchedBackend, LaunchOptions
from ncdoc.tuner.space import Hardware

PORT_BASE, PORT_SPAN = 29400, 2000


def available() -> str | None:
    """None when torch can run NCCL collectives here, else the reason it cannot."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch cannot see a CUDA GPU"
    if not dist.is_available() or not dist.is_nccl_available():
        return "this torch build has no NCCL support"
    return None


class TorchBackend(LaunchedBackend):
    name = "torch"

    def __init__(self, *, hardware: Hardware, base_env: Mapping[str, str] | None = None,
                 launch: LaunchOptions | None = None, gpus_per_node: int | None = None, iters: int | None = None,
                 warmup: int = 5, expectation: Any = None, tuner_plugin: str | None = None,
                 table_dir: str | None = None, log_dir: str | None = None, environ: Mapping[str, str] | None = None,
                 python: str | None = None):
        super().__init__(hardware=hardware, base_env=base_env, launch=launch, gpus_per_node=gpus_per_node,
                         iters=iters, warmup=warmup, log_dir=log_dir, environ=environ, expectation=expectation,
                         tuner_plugin=tuner_plugin, table_dir=table_dir)
        self.python = python or sys.executable

    def program(self, collective: str, nodes: Sequence[str], key: str) -> tuple[str, ...]:
        port = PORT_BASE + zlib.crc32(key.encode()) % PORT_SPAN
        master = f"{nodes[0]}:{port}" if len(nodes) > 1 else ""
        return (self.python, "-m", "ncdoc.tuner.backends.torch_bench", collective,
                *(("--master", master) if master else ()))
