"""Benchmark backends: what runs one measurement of a trial's environment.

A backend is a small picklable object (it travels to Ray workers) with one job: given an
environment, a workload (collectives at sizes) and optionally a tuner table, return busbw per
size, or raise TrialFailed with the reason (NCCL refused the setting, crashed, timed out,
returned wrong results), or TrialFailed kind "invalid" when the run did not measure the setting.
tests/tuner/test_backend_contract.py holds every backend to that. `sim` answers from the
simulator; `nccl-tests` runs the nccl-tests binaries and `torch` a torch.distributed benchmark,
both through the cluster launcher layer (backends/launched.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ncdoc.tuner.space import Hardware

BACKENDS = ("sim", "nccl-tests", "torch")

Workload = Sequence[tuple[str, Sequence[int]]]     # (collective, sizes in bytes)


class TrialFailed(Exception):
    """A measurement that produced no valid numbers; `kind` is init | call | crash | hang | timeout | tool
    (the setting or the tool failed), lost (a node went away) or invalid (the run did not measure the
    setting: its env did not reach NCCL, the ranks did not form one job, ...)."""

    def __init__(self, reason: str, *, kind: str = "call"):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind

    def __reduce__(self):                      # keep kind across Ray's pickling
        return (_trial_failed, (self.reason, self.kind))


def _trial_failed(reason: str, kind: str) -> TrialFailed:
    return TrialFailed(reason, kind=kind)


@dataclass(frozen=True)
class SizeResult:
    size: int                   # the requested size (bytes), the key profiles use
    busbw: float                # GB/s
    algbw: float = 0.0
    time_us: float = 0.0
    algo: str | None = None     # what NCCL used, where the backend can tell
    proto: str | None = None
    nchannels: int | None = None


@dataclass(frozen=True)
class Measurement:
    """One run of a workload: per collective, one SizeResult per requested size."""
    rows: tuple[tuple[str, tuple[SizeResult, ...]], ...]

    def busbw(self) -> dict[str, dict[int, float]]:
        return {c: {r.size: r.busbw for r in rs} for c, rs in self.rows}

    def results(self, collective: str) -> tuple[SizeResult, ...]:
        return next((rs for c, rs in self.rows if c == collective), ())


@dataclass(frozen=True)
class RunContext:
    """Where a job runs: the node group's hosts (multi-node backends) and its placement group;
    `log_key` names the step ("<job>/<n>-<label>-r<repeat>") for its logs."""
    group: str = "local"
    hosts: tuple[str, ...] = ()
    placement_group: Any = None
    extra: dict = field(default_factory=dict)
    log_key: str = ""


class Backend:
    """Base class; subclasses set `name` and implement hardware() and measure()."""

    name = "base"
    gang_size = 1               # nodes (Ray tasks, one per node) a trial occupies on a real cluster
    bundle_resources: dict = {}  # what each node of the gang must hold for the backend (e.g. {"GPU": 8})
    needs_fresh_process = False  # True: NCCL runs inside the worker, so each env needs its own process
    in_process_ok = False        # True: measure() never hangs or kills its process, so no worker is needed
    simulated = False            # True: numbers come from a model, not from hardware
    model_cluster: Any = None    # ncdoc.tuner.sim's view of the hardware: what NCCL would choose (tables)
    # What most backends know up front; subclasses set these in __init__ or override the methods.
    hw: "Hardware | None" = None
    base_env: dict = {}
    _expectation: Any = None

    def hardware(self) -> Hardware:
        if self.hw is None:
            raise NotImplementedError
        return self.hw

    def baseline_env(self) -> dict[str, str]:
        """The environment jobs run with today (the study's baseline), NCCL_* only."""
        return dict(self.base_env)

    def expectation(self, collective: str = "all_reduce") -> Any:
        """An ncdoc.nccl.bandwidth.Expectation (line rate) or None."""
        return self._expectation

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    def table_support(self) -> str | None:
        """None when measure() can load a tuner table (`table=`), else why not."""
        return "this backend cannot load a tuner plugin"

    def measure(self, env: Mapping[str, str], workload: Workload, repeat_index: int, *,
                timeout_s: float | None = None, context: RunContext | None = None,
                table: Sequence[Any] = ()) -> Measurement:
        """One run of `workload` with `env` (and, when given, the tuner-table rules loaded the
        way NCCL's example tuner plugin loads nccl_tuner.conf)."""
        raise NotImplementedError


def nearest(sizes: Sequence[int], rows: Mapping[int, Any]) -> dict[int, Any]:
    """Map each requested size to the printed row of the nearest size (tools round sizes down
    to whole elements per rank, so 1 KiB over 3 ranks prints as 1008)."""
    out = {}
    keys = sorted(rows)
    for s in sizes:
        if not keys:
            break
        k = min(keys, key=lambda k: (abs(k - s), -k))
        if abs(k - s) <= max(64, s // 8):
            out[s] = rows[k]
    return out
