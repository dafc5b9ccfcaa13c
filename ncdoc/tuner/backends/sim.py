"""The `sim` backend: trials answered by ncdoc's NCCL simulator (ncdoc.tuner.sim).

The default where no GPU is present. A cluster comes from a preset (--preset), or from a
snapshot (--snapshot FILE / --example NAME) times --nodes, with fabric flags on top.
A configuration NCCL would reject fails the trial with NCCL's reason. With
`emulate_failures` a simulated hang really hangs and a simulated crash really kills the
worker process, so the dispatch machinery (timeouts, lost workers) can be rehearsed.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

from ncdoc.tuner.backends import Backend, Measurement, RunContext, SizeResult, TrialFailed, Workload
from ncdoc.tuner.space import Hardware

# SimCluster fields a user may set from the command line (--fabric, --nic-gbps, ...).
FABRIC_FIELDS = ("fabric", "nic_rate_gbps", "nics_per_node", "gpus_per_node", "ecmp_paths", "leaf_nodes",
                 "switch_ar", "congestion", "noise_sigma", "tcp_gbps", "oversubscription", "nccl_version", "seed",
                 "lossless_tc")


def sim_cluster(*, preset: str | None = None, snapshot: Any = None, nodes: int | None = None,
                **fabric: Any) -> Any:
    """The SimCluster for the options: a preset, or a snapshot's node times `nodes`."""
    from ncdoc.tuner import sim

    fabric = {k: v for k, v in fabric.items() if v is not None}
    unknown = set(fabric) - set(FABRIC_FIELDS)
    if unknown:
        raise ValueError(f"unknown simulator fabric field(s): {sorted(unknown)}")
    if preset:
        cluster = sim.preset(preset)
        if nodes:
            fabric["nodes"] = nodes
        return cluster.with_fabric(**fabric) if fabric else cluster
    if snapshot is None:
        return sim.preset("h100-ib-2node").with_fabric(**({"nodes": nodes} if nodes else {}), **fabric)
    return sim.cluster_from_snapshot(snapshot, nodes or 2, **fabric)


class SimBackend(Backend):
    name = "sim"
    simulated = True

    def __init__(self, cluster: Any, *, seed: int = 0, base_env: Mapping[str, str] | None = None,
                 emulate_failures: bool = False, delay_s: float = 0.0):
        self.cluster = cluster
        self.seed = seed
        self.base_env = dict(base_env or {})
        self.emulate_failures = emulate_failures
        self.delay_s = delay_s          # stands for the benchmark's run time (dispatch benchmark)
        # A simulated failure is reported, never lived through, unless emulated: no worker needed.
        self.in_process_ok = not emulate_failures
        self.model_cluster = cluster

    def table_support(self) -> str | None:
        return None                     # the simulator loads rules as NCCL's example plugin does

    def hardware(self) -> Hardware:
        c = self.cluster
        return Hardware(fabric=c.fabric, nodes=c.nodes, gpus_per_node=c.gpus_per_node,
                        nics_per_node=c.nics_per_node, nvswitch=c.nvswitch, nvls=c.nvls, sm=c.sm,
                        nccl_version=c.nccl_version, collnet=c.collnet)

    def baseline_env(self) -> dict[str, str]:
        return dict(self.base_env)

    def expectation(self, collective: str = "all_reduce") -> Any:
        from ncdoc.nccl.bandwidth import expected_bandwidth

        c = self.cluster
        socket = c.fabric == "socket"
        return expected_bandwidth(None, nic_gbps=c.tcp_gbps if socket else c.nic_rate_gbps,
                                  nics=1 if socket else c.nics_per_node, nodes=c.nodes,
                                  collective=collective, gpu_name=c.gpu_name,
                                  local_ranks=c.gpus_per_node, nic_source=f"simulated cluster {c.name}")

    def describe(self) -> dict[str, Any]:
        c = self.cluster
        return {"backend": self.name, "cluster": c.name, "nodes": c.nodes, "gpus_per_node": c.gpus_per_node,
                "fabric": c.fabric, "nics_per_node": c.nics_per_node, "nic_rate_gbps": c.nic_rate_gbps,
                "gpu": c.gpu_name, "nccl_version": c.nccl_version, "seed": self.seed}

    def measure(self, env: Mapping[str, str], workload: Workload, repeat_index: int, *,
                timeout_s: float | None = None, context: RunContext | None = None,
                table: Sequence[Any] = ()) -> Measurement:
        from ncdoc.tuner.sim import SimTrialError, simulate

        if self.delay_s:
            time.sleep(self.delay_s)
        rows = []
        # Another node group is other nodes: other noise and stragglers (the first group, or no
        # group at all, keeps the backend's own seed).
        group = context.group if context else ""
        seed = self.seed if group in _HOME_GROUPS else self.seed + 1 + sum(map(ord, group))
        try:
            for collective, sizes in workload:
                res = simulate(self.cluster, env, collective, list(sizes), seed=seed,
                               repeat_index=repeat_index, table=tuple(table))
                rows.append((collective, tuple(
                    SizeResult(size=s, busbw=r.busbw, algbw=r.algbw, time_us=r.time_us, algo=r.algo,
                               proto=r.proto, nchannels=r.nchannels) for s, r in zip(sizes, res))))
        except SimTrialError as exc:
            if self.emulate_failures and exc.kind == "hang":
                while True:                 # what NCCL does: never return; the dispatcher's timeout ends it
                    time.sleep(3600)
            if self.emulate_failures and exc.kind == "crash":
                os._exit(134)               # what a segfaulting NCCL does to its process
            raise TrialFailed(f"NCCL would {_VERB.get(exc.kind, 'fail')}: {exc.message}", kind=exc.kind) from None
        return Measurement(tuple(rows))


_HOME_GROUPS = ("", "local", "in-process", "default", "ncdoc_nodegroup_0")
_VERB = {"init": "fail at init", "call": "fail the call", "crash": "crash", "hang": "hang"}
