"""`ncdoc cluster test`: the isolation's probes measured with nccl-tests through a launcher.

Each probe becomes a bench Group: a node alone uses all its GPUs; a pair or group all GPUs of
each node, with NCCL_ALGO=Ring unless the caller set an algorithm (on two nodes Tree and
NVLSTree report a busbw above the network's, nccl-tests #196); a rail probe one GPU per node
(CUDA_VISIBLE_DEVICES) and one NIC (NCCL_IB_HCA==<hca>:<port>). What a probe is held against
comes from the nodes' snapshots, as triage computes it (ncdoc.nccl.bandwidth): the NVLink
figure alone, the rail NICs' line rate across nodes, one NIC's for a rail.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from ncdoc.cluster import bench
from ncdoc.cluster.isolation import Outcome
from ncdoc.readers.numbers import is_digits


@dataclass(frozen=True)
class Rail:
    hca: str
    port: int
    gpu: int                     # the GPU nearest that NIC (its rail)
    gbps: float | None = None

    @property
    def name(self) -> str:
        return self.hca


def rails_of(snapshot) -> list[Rail]:
    """The rails of a node: for each GPU its nearest NIC's active port, in GPU order, each NIC once."""
    from ncdoc.topology import classify
    topo = classify(snapshot)
    if not topo.status.known:
        return []
    out, seen = [], set()
    for g in topo.gpus():
        near = topo.nearest_nic(g.label)
        if not near or near[0] in seen:
            continue
        hca = snapshot.hca(near[0])
        port = next((p for p in (hca.ports if hca else ()) if (p.state or "").upper() == "ACTIVE"), None)
        if port is None:
            continue
        seen.add(near[0])
        out.append(Rail(near[0], port.num, g.index, port.rate_gbps))
    return out


def parse_rails(text: str) -> list[Rail]:
    """--rails mlx5_0:1@0,mlx5_3:1@1 (HCA:port@GPU)."""
    from ncdoc.errors import UsageError
    out = []
    for i, item in enumerate(x.strip() for x in text.split(",") if x.strip()):
        dev, _, gpu = item.partition("@")
        hca, _, port = dev.partition(":")
        if not hca or (port and not is_digits(port)) or (gpu and not is_digits(gpu)):
            raise UsageError(f"--rails {item!r}: expected HCA:PORT@GPU, e.g. mlx5_0:1@0")
        out.append(Rail(hca, int(port or 1), int(gpu) if gpu else i))
    return out


class Expectations:
    """The healthy busbw figure per scale, from the nodes' snapshots (the most common per-node figure)."""

    def __init__(self, facts=None, collective: str = "all_reduce"):
        self.node = self.network = None
        self.rail: dict[str, float] = {}
        self.basis: list[str] = []
        if facts is None or not facts.nodes:
            return
        from ncdoc.nccl.bandwidth import expected_bandwidth
        nvl, net, per_rail = Counter(), Counter(), {}
        for snap in facts.nodes.values():
            one = expected_bandwidth(snap, nodes=1, collective=collective)
            many = expected_bandwidth(snap, nodes=4, collective=collective, algo="Ring")
            if one.nvlink_busbw:
                nvl[one.nvlink_busbw] += 1
            if many.network_busbw:
                net[round(many.network_busbw, 2)] += 1
            for r in rails_of(snap):
                if r.gbps:
                    e = expected_bandwidth(nic_gbps=r.gbps, nics=1, nodes=2, collective=collective, algo="Ring")
                    per_rail.setdefault(r.hca, Counter())[round(e.network_busbw, 2)] += 1
        self.node = nvl.most_common(1)[0][0] if nvl else None
        self.network = net.most_common(1)[0][0] if net else None
        self.rail = {h: c.most_common(1)[0][0] for h, c in per_rail.items()}
        if self.network:
            self.basis.append(f"across nodes: {self.network:g} GB/s (rail NICs at line rate, ring ~92 %)")
        if self.node:
            self.basis.append(f"one node: {self.node:g} GB/s (NVLink figure)")

    def of(self, probe) -> float | None:
        if probe.scale == "node":
            return self.node
        if probe.rail:
            return self.rail.get(probe.rail)
        return self.network


class BenchMeasurer:
    """measure(probes) -> [Outcome]: one nccl-tests job per probe, a round's probes at once."""

    def __init__(self, launcher, spec: bench.BenchSpec, *, env=None, gpus_per_node: int = 8, rails=(),
                 expectations: Expectations | None = None, log_dir: str, progress=None):
        self.launcher, self.spec = launcher, spec
        self.env = dict(env or {})
        self.gpus = gpus_per_node
        self.rails = {r.hca: r for r in rails}
        self.expect = expectations or Expectations()
        self.log_dir = log_dir
        self.progress = progress or (lambda msg: None)
        self.round = 0

    def group_of(self, probe) -> bench.Group:
        env = dict(self.env)
        if len(probe.nodes) > 1 and "NCCL_ALGO" not in env:
            env["NCCL_ALGO"] = "Ring"
        if probe.rail:
            r = self.rails[probe.rail]
            env["NCCL_IB_HCA"] = f"={r.hca}:{r.port}"
            env["CUDA_VISIBLE_DEVICES"] = str(r.gpu)
            return bench.group(self.launcher, probe.nodes, env=env, key=probe.key, one_gpu=True)
        return bench.group(self.launcher, probe.nodes, env=env, gpus_per_node=self.gpus, key=probe.key)

    def __call__(self, probes) -> list[Outcome]:
        self.round += 1
        groups = [self.group_of(p) for p in probes]
        where = os.path.join(self.log_dir, f"round-{self.round:03d}")
        self.progress(f"round {self.round}: {len(probes)} {probes[0].scale} job(s) ({probes[0].purpose})")
        results = bench.run(self.launcher, groups, self.spec, log_dir=where)
        out = []
        for p, r in zip(probes, results):
            big = r.rows[-1] if r.rows else None
            evidence = tuple(run.log for run in r.runs if run.log)
            if r.verdict is not None:
                evidence += tuple(r.verdict.reasons[:2])
            out.append(Outcome(p, big.busbw if (r.ok and big) else None, self.expect.of(p),
                               reason=r.reason, evidence=evidence, algo=big.algo if big else None))
        return out


def dry_run_lines(launcher, measurer: BenchMeasurer, probes) -> list[str]:
    """The command lines the first round of a scale would run."""
    from ncdoc.cluster.launch import shell_line
    lines = []
    for p in probes:
        for job in bench.jobs_for(measurer.spec, measurer.group_of(p)):
            env = job.env if launcher.name == "slurm" else {}
            lines.append(shell_line(launcher.job_command(job), env))
    return lines


def results_document(report, *, scales, launcher: str, spec: bench.BenchSpec, expectations: Expectations,
                     drains: dict) -> dict:
    """What `ncdoc cluster test` writes to results.json (and the BOM records)."""
    import datetime as _dt
    doc = {"schema_version": 1, "kind": "ncdoc-cluster-test",
           "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
           "launcher": launcher, "scales": list(scales), "collective": spec.collective, "sizes": list(spec.sizes),
           "verdict": "healthy" if report.healthy else "faults found", "expected": expectations.basis,
           "drain": drains}
    doc.update(report.to_dict())
    return doc


__all__ = ["Rail", "rails_of", "parse_rails", "Expectations", "BenchMeasurer", "dry_run_lines", "results_document"]
