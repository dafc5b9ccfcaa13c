"""The simulator backend `sim`: NCCL's own cost model over a ground-truth fabric model.

Layer (a), nccl_model.py: what NCCL 2.30.7 (or an older release) would pick for an environment,
from its own tables. Layer (b), fabric.py: how long that choice really takes on the cluster,
including what NCCL's model does not see. Results come back per size as nccl-tests reports
them, or as nccl-tests' exact text. See docs/simulator.md.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ncdoc.tuner.sim.cluster import PRESETS, SimCluster, cluster_from_snapshot, preset
from ncdoc.tuner.sim.errors import SimTrialError
from ncdoc.tuner.sim.nccl_model import COLLECTIVES, Choice, ModelTables, model_tables, nccl_choice
from ncdoc.tuner.sim.nccl_tests_output import nccl_tests_text
from ncdoc.tuner.sim.run import SimResult, simulate_rows

__all__ = ["COLLECTIVES", "PRESETS", "Choice", "ModelTables", "SimCluster", "SimResult", "SimTrialError",
           "cluster_from_snapshot", "model_tables", "nccl_choice", "nccl_tests_text", "preset", "simulate"]


def simulate(cluster: SimCluster, env: Mapping[str, str], collective: str, sizes: Sequence[int], *,
             seed: int = 0, repeat_index: int = 0, table: Sequence[Any] = ()) -> list[SimResult]:
    """Simulate `<collective>_perf` over `sizes` (bytes, as given to nccl-tests -b/-e) with `env`.

    collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv.
    Each result's size is the size nccl-tests prints for that request (rounded down to whole
    elements per rank). Deterministic for (cluster.seed, seed, repeat_index, env, collective,
    size); the noise differs across repeat_index. Raises SimTrialError where NCCL would fail.
    `table`: tuner-table rules (ncdoc.tuner.table.Rule) loaded through NCCL's example plugin.
    """
    return simulate_rows(cluster, env, collective, sizes, seed=seed, repeat_index=repeat_index, in_place=False,
                         table=table)
