"""The `nccl-tests` backend: each measurement runs the nccl-tests binaries (all_reduce_perf, ...).

Through the cluster launcher layer (backends/launched.py, ncdoc.cluster.bench): on this machine
alone one process drives every GPU (`-g N`); across nodes srun or mpirun start one rank per GPU
(with --launcher-args passed as given), or Ray runs the mpirun line from the group's first node.
Every run carries NCCL's INFO log and is trust-checked (the ranks formed one job, one NCCL, the
env reached NCCL on every rank, the same env on every node); what NCCL chose per size comes from
its TUNING lines. A run that exits non-zero, reports wrong results or outlives its timeout fails
the trial with the reason (its last output lines); a run that did not measure the setting is
rejected (kind "invalid"). A tuner table is loaded the way a job would load it:
NCCL_TUNER_PLUGIN (--tuner-plugin) and NCCL_TUNER_CONFIG_FILE pointing at the rules written for
the step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ncdoc.errors import UsageError
from ncdoc.tuner.backends.launched import LaunchedBackend, LaunchOptions
from ncdoc.tuner.space import Hardware
from ncdoc.readers.numbers import is_digits


def binary_name(collective: str) -> str:
    return f"{collective}_perf"


def parse_rows(text: str) -> dict[int, tuple[float, float, float, int | None]]:
    """Size -> (out-of-place busbw, in-place busbw, time us, #wrong) from nccl-tests stdout,
    read with ncdoc's nccl-tests parser (ncdoc.evidence.nccl_tests)."""
    try:
        from ncdoc.evidence.nccl_tests import parse_nccl_tests
    except ImportError:                           # the evidence package is optional for the tuner
        return _parse_rows_minimal(text)
    out: dict[int, tuple[float, float, float, int | None]] = {}
    for row in parse_nccl_tests(text.splitlines(), source="nccl-tests").rows:
        oop, ip = row.oop, row.ip
        if not row.complete or oop is None or oop.busbw is None:
            continue
        wrongs = [g.wrong for g in (oop, ip) if g is not None and g.wrong is not None]
        out[row.size] = (oop.busbw, ip.busbw if ip is not None and ip.busbw is not None else oop.busbw,
                         oop.time_us or 0.0, int(sum(wrongs)) if wrongs else None)
    return out


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _parse_rows_minimal(text: str) -> dict[int, tuple[float, float, float, int | None]]:
    """The data rows of nccl_facts 5.3: size count type redop root, then time algbw busbw #wrong twice."""
    out = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) < 13 or not is_digits(f[0]):
            continue
        t, oop, inp = _num(f[5]), _num(f[7]), _num(f[11])
        if oop is None:
            continue
        wrong = sum(int(w) for w in (f[8], f[12]) if is_digits(w)) if any(is_digits(w) for w in (f[8], f[12])) else None
        out[int(f[0])] = (oop, inp if inp is not None else oop, t or 0.0, wrong)
    return out


class NcclTestsBackend(LaunchedBackend):
    name = "nccl-tests"

    def __init__(self, tests_dir: str | None, *, hardware: Hardware, base_env: Mapping[str, str] | None = None,
                 gpus_per_node: int | None = None, launch: LaunchOptions | None = None, iters: int | None = None,
                 warmup: int = 5, expectation: Any = None, collectives: Sequence[str] = (),
                 tuner_plugin: str | None = None, table_dir: str | None = None, log_dir: str | None = None,
                 environ: Mapping[str, str] | None = None, check_iters: int = 1, final_check_iters: int = 3):
        super().__init__(hardware=hardware, base_env=base_env, launch=launch, gpus_per_node=gpus_per_node,
                         iters=iters, warmup=warmup, check_iters=check_iters, final_check_iters=final_check_iters,
                         log_dir=log_dir, environ=environ, expectation=expectation, tuner_plugin=tuner_plugin,
                         table_dir=table_dir)
        self._tests_dir = str(Path(tests_dir).resolve()) if tests_dir else None
        for c in collectives:
            self.binary(c)                      # fail at startup, not in every trial

    def tests_dir(self) -> str | None:
        return self._tests_dir

    def binary(self, collective: str) -> str:
        """Where <collective>_perf is: in --nccl-tests-dir (checked here, the same path on every node),
        else on each node's PATH."""
        name = binary_name(collective)
        if self._tests_dir:
            path = Path(self._tests_dir) / name
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise UsageError(f"nccl-tests binary {name} not found (or not executable) in {self._tests_dir}; "
                                 "build nccl-tests (MPI=1 for several nodes) and pass --nccl-tests-dir DIR (its "
                                 "build/ folder)")
            return str(path)
        return name

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "tests_dir": self._tests_dir}
