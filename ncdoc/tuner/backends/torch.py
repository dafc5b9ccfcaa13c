"""The `torch` backend: a torch.distributed NCCL benchmark in Ray actors, one per GPU.

Each measurement starts fresh actors (NCCL reads its environment once per process) with the
step's environment in runtime_env, spread over the node group's gang of nodes when there is
one. Rank 0 reports nccl-tests-style numbers: time per op averaged over iterations after a
warm-up, algbw = S / t, busbw = algbw x the nccl-tests factor (doc/PERFORMANCE.md).
Needs torch with CUDA and NCCL; otherwise `available()` says why and the CLI exits 2.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ncdoc.tuner.backends import Backend, Measurement, RunContext, SizeResult, TrialFailed, Workload
from ncdoc.tuner.space import Hardware

ELEMENT = 4          # float32, as nccl-tests' default


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


def bus_factor(collective: str, n: int) -> float:
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


class _Worker:
    """One rank. Created per measurement, so NCCL starts from the step's environment."""

    def __init__(self, rank: int, world: int, unset: list[str]):
        import os
        for name in unset:                      # inherited from the driver, unset for this step
            os.environ.pop(name, None)
        self.rank, self.world = rank, world

    def address(self) -> tuple[str, int]:
        import socket
        import ray
        with socket.socket() as s:
            s.bind(("", 0))
            return ray.util.get_node_ip_address(), s.getsockname()[1]

    def run(self, master: str, port: int, workload: list, iters: int, warmup: int) -> list:
        import torch
        import torch.distributed as dist

        torch.cuda.set_device(0)                # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU
        dist.init_process_group("nccl", init_method=f"tcp://{master}:{port}", rank=self.rank,
                                world_size=self.world)
        n, r = self.world, self.rank
        out = []
        try:
            for collective, sizes in workload:
                rows = []
                for size in sizes:
                    count = max(n, size // ELEMENT // n * n)
                    x = torch.ones(count, dtype=torch.float32, device="cuda")
                    y = torch.empty_like(x)
                    part = torch.empty(count // n, dtype=torch.float32, device="cuda")
                    ops = {
                        "all_reduce": lambda: dist.all_reduce(x),
                        "all_gather": lambda: dist.all_gather_into_tensor(y, part),
                        "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, x),
                        "broadcast": lambda: dist.broadcast(x, src=0),
                        "reduce": lambda: dist.reduce(x, dst=0),
                        "alltoall": lambda: dist.all_to_all_single(y, x),
                        "sendrecv": lambda: [w.wait() for w in dist.batch_isend_irecv(
                            [dist.P2POp(dist.isend, x, (r + 1) % n), dist.P2POp(dist.irecv, y, (r - 1) % n)])],
                    }
                    op = ops[collective]
                    for _ in range(warmup):
                        op()
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(iters):
                        op()
                    end.record()
                    torch.cuda.synchronize()
                    t_us = torch.tensor([start.elapsed_time(end) * 1000.0 / iters], device="cuda")
                    dist.all_reduce(t_us)                        # averaged over ranks, as nccl-tests -a 1
                    t = t_us.item() / n
                    nbytes = count * ELEMENT
                    algbw = nbytes / (t * 1000.0) if t > 0 else 0.0
                    rows.append((size, algbw * bus_factor(collective, n), algbw, t))
                out.append((collective, rows))
        finally:
            dist.destroy_process_group()
        return out


class TorchBackend(Backend):
    name = "torch"
    needs_fresh_process = True

    def __init__(self, *, hardware: Hardware, base_env: Mapping[str, str] | None = None, iters: int = 20,
                 warmup: int = 5, expectation: Any = None, tuner_plugin: str | None = None,
                 table_dir: str | None = None):
        self.hw = hardware
        self.base_env = dict(base_env or {})
        self.iters, self.warmup = iters, warmup
        self._expectation = expectation
        self.gang_size = hardware.nodes
        self.bundle_resources = {"GPU": float(hardware.gpus_per_node)}   # the ranks' actors live in the bundles
        self.tuner_plugin, self.table_dir = tuner_plugin, table_dir

    def table_support(self) -> str | None:
        from ncdoc.tuner.table import plugin_problem
        return plugin_problem(self.tuner_plugin)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "nodes": self.hw.nodes, "gpus_per_node": self.hw.gpus_per_node,
                "fabric": self.hw.fabric}

    def measure(self, env: Mapping[str, str], workload: Workload, repeat_index: int, *,
                timeout_s: float | None = None, context: RunContext | None = None,
                table: Sequence[Any] = ()) -> Measurement:
        import os

        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if table:
            why = self.table_support()
            if why:
                raise TrialFailed(f"cannot load the tuner table: {why}", kind="tool")
            from ncdoc.tuner.table import plugin_env
            env = {**env, **plugin_env(table, str(self.tuner_plugin), self.table_dir)}
        world = self.hw.nodes * self.hw.gpus_per_node
        unset = [k for k in os.environ if k.startswith("NCCL_") and k not in env]
        actor_cls = ray.remote(num_gpus=1, num_cpus=0, max_restarts=0)(_Worker)
        pg = context.placement_group if context else None
        actors = []
        for rank in range(world):
            opts: dict[str, Any] = {"runtime_env": {"env_vars": dict(env)}}
            if pg is not None:
                opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=rank // self.hw.gpus_per_node)
            actors.append(actor_cls.options(**opts).remote(rank, world, unset))
        try:
            master, port = ray.get(actors[0].address.remote(), timeout=timeout_s)
            refs = [a.run.remote(master, port, [list(w) for w in workload], self.iters, self.warmup) for a in actors]
            results = ray.get(refs, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise TrialFailed(f"the torch benchmark gave no result within {timeout_s:g} s (hung)", kind="hang") from None
        except ray.exceptions.RayActorError as exc:
            raise TrialFailed(f"a benchmark rank died: {str(exc).splitlines()[0][:300]}", kind="crash") from None
        except ray.exceptions.RayTaskError as exc:
            raise TrialFailed(f"the torch benchmark failed: {str(exc).strip().splitlines()[-1][:300]}",
                              kind="call") from None
        finally:
            for a in actors:
                ray.kill(a)
        rows = tuple((c, tuple(SizeResult(size=s, busbw=bb, algbw=ab, time_us=t) for s, bb, ab, t in rs))
                     for c, rs in results[0])
        return Measurement(rows)
