"""Tuning at scale: the health gate, topology-placed node groups with a baseline each, the full-scale A/B.

A real backend reaches N nodes through its launcher; a trial needs `per_group` of them (--nodes).

1. Placement: the nodes are cut into groups of `per_group`, leaf switch by leaf switch where the
   topology is known (--topology FILE in Slurm's topology.conf form, else `scontrol show topology`
   inside an allocation), so a group's traffic stays under one switch as a job's would; nodes a
   switch has left over are grouped across switches, and what does not fill a group is not used.
   Without a topology, in the order the launcher lists the nodes (Slurm's is its topology order).
2. Health gate (--health-gate, default node,pair): first the env check, one short run per group
   with today's env plus a value of every variable the search may set: a node whose NCCL does not
   report one of them (or reads another value) while the other nodes' do, or that runs a different
   NCCL env from the rest, is bad (its trials would all be rejected); a variable no node reports
   is left out of the search. Then ncdoc cluster test's isolation in those scales over every node,
   with today's env: each node alone, then disjoint pairs, a slow pair's nodes re-tested against
   fast partners. A group holding a node found bad (env, slow, failing, intermittent) is not used
   for trials, and the summary says which node and why.
3. A baseline per group: with several groups, each measures the baseline first; a group's
   results are scaled by (the groups' geometric mean / its own) per collective and size, so a
   trial's score is against the baseline of the nodes it ran on, and groups compare.
4. Full scale: the final env (and the other candidates) against the baseline on every healthy
   node in one job, a few shuffled rounds (--full-scale-rounds): what was tuned on subsets must not
   be slower on the whole; the final env is not recommended when it clearly is.
Every rank having the same env is checked in every run (ncdoc.cluster.trust).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ncdoc.errors import RunnerError, UsageError

DEFAULT_GATE = ("node", "pair")
GATE_SIZE = 1 << 28                      # 256 MiB all-reduce: bandwidth-bound, quick


# ---------------------------------------------------------------- topology and placement

def read_topology(text: str) -> dict[str, list[str]]:
    """Leaf switches and their nodes from Slurm's topology.conf or `scontrol show topology`:
    lines "SwitchName=leaf1 [Level=0 LinkSpeed=1] Nodes=gpu[01-16]"; switches of switches are skipped."""
    from ncdoc.cluster.nodes import expand
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.lower().startswith("switchname="):
            continue
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        name = fields.get("SwitchName") or fields.get("switchname")
        nodes = fields.get("Nodes") or fields.get("nodes")
        if name and nodes:
            out[name] = expand(nodes)
    return out


def topology(path: str | None, launcher_kind: str, environ: Mapping[str, str],
             log: Callable[[str], None]) -> tuple[dict[str, list[str]] | None, str]:
    """(leaf switch -> nodes, where it came from), or (None, why there is none)."""
    if path:
        from ncdoc.readers.textfile import read_user_text
        switches = read_topology(read_user_text(path, "a topology file"))
        if not switches:
            raise UsageError(f"{path}: no 'SwitchName=... Nodes=...' line (Slurm's topology.conf form)")
        return switches, f"leaf switches of {path}"
    if launcher_kind == "slurm":
        import shutil
        import subprocess
        exe = shutil.which("scontrol", path=environ.get("PATH"))
        if exe:
            try:
                p = subprocess.run([exe, "show", "topology"], capture_output=True, text=True, timeout=20,
                                   env=dict(environ))
            except (OSError, subprocess.TimeoutExpired):
                p = None
            switches = read_topology(p.stdout) if p is not None and p.returncode == 0 else {}
            if switches:
                return switches, "leaf switches of `scontrol show topology`"
        log("placement: Slurm reports no switch topology; node groups follow the allocation's order")
    return None, "the launcher's node order"


def place(nodes: Sequence[str], per_group: int, switches: Mapping[str, Sequence[str]] | None = None
          ) -> tuple[list[tuple[str, ...]], list[str], list[str]]:
    """(groups, nodes left out, notes): groups of `per_group` nodes, filled switch by switch."""
    nodes = list(nodes)
    if per_group < 1:
        raise UsageError("--nodes must be at least 1")
    notes: list[str] = []
    runs: list[list[str]] = []
    if switches:
        member = {n: s for s, ns in switches.items() for n in ns}
        unknown = [n for n in nodes if n not in member]
        if unknown:
            notes.append(f"{len(unknown)} node(s) under no known switch ({', '.join(unknown[:4])}): placed last")
        for s in switches:
            runs.append([n for n in nodes if member.get(n) == s])
        runs.append(unknown)
    else:
        runs.append(nodes)
    groups: list[tuple[str, ...]] = []
    rest: list[str] = []
    for run in runs:
        whole = len(run) // per_group * per_group
        groups += [tuple(run[i:i + per_group]) for i in range(0, whole, per_group)]
        rest += run[whole:]
    if switches and len(rest) >= per_group:
        whole = len(rest) // per_group * per_group
        spanning = [tuple(rest[i:i + per_group]) for i in range(0, whole, per_group)]
        notes.append(f"{len(spanning)} group(s) span switches (their switches' leftover nodes)")
        groups += spanning
        rest = rest[whole:]
    return groups, rest, notes


# ---------------------------------------------------------------- the plan

@dataclass
class GroupInfo:
    name: str
    nodes: tuple[str, ...]
    used: bool = True
    why: str = ""                                  # why not used
    baseline: dict = field(default_factory=dict)   # collective -> {size: busbw} (median of its runs)
    relative: float | None = None                  # its baseline against the groups' mean (geometric)

    def to_dict(self) -> dict:
        return {"name": self.name, "nodes": list(self.nodes), "used": self.used, "why": self.why or None,
                "baseline": {c: {str(s): round(v, 3) for s, v in d.items()} for c, d in self.baseline.items()},
                "relative": None if self.relative is None else round(self.relative, 4)}


@dataclass
class ScalePlan:
    nodes: tuple[str, ...]                         # every node the launcher reaches
    per_group: int
    placement: str
    groups: list[GroupInfo]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gate: dict | None = None                       # the health gate's isolation report (None: off)
    gate_scales: tuple[str, ...] = ()
    bad: dict[str, str] = field(default_factory=dict)   # node -> what the gate found
    full: dict | None = None                       # the full-scale A/B
    not_reported: list[str] = field(default_factory=list)   # variables no node's NCCL reported (not searched)

    @property
    def usable(self) -> list[GroupInfo]:
        return [g for g in self.groups if g.used]

    @property
    def healthy(self) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if n not in self.bad)

    @property
    def subsets(self) -> bool:
        """Trials ran on fewer nodes than the healthy whole: a full-scale check is worth its runs."""
        return len(self.healthy) > self.per_group

    def node_groups(self) -> list[Any]:
        from ncdoc.tuner.dispatch import NodeGroup
        return [NodeGroup(g.name, g.nodes) for g in self.usable]

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes), "per_group": self.per_group, "placement": self.placement,
                "groups": [g.to_dict() for g in self.groups], "left_out": list(self.left_out),
                "notes": list(self.notes), "not_reported": list(self.not_reported),
                "health_gate": None if self.gate is None else {"scales": list(self.gate_scales),
                                                               "bad_nodes": dict(self.bad),
                                                               "rounds": self.gate.get("rounds"),
                                                               "findings": self.gate.get("findings", []),
                                                               "notes": self.gate.get("notes", [])},
                "full_scale": self.full}


def parse_gate(text: str | None) -> tuple[str, ...]:
    """--health-gate: 'off', or scales of ncdoc cluster test (node, pair, full)."""
    if text is None:
        return DEFAULT_GATE
    if text.strip().lower() in ("off", "none", "no", ""):
        return ()
    scales = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in scales if s not in ("node", "pair", "full")]
    if bad:
        raise UsageError(f"--health-gate {text!r}: use off, or scales among node, pair, full")
    return scales


class GateMeasurer:
    """measure(probes) -> [Outcome] for the isolation: each probe one bench run through the backend (its
    launcher, trust checks and logs), a round's probes at once."""

    def __init__(self, backend: Any, env: Mapping[str, str], size: int, timeout_s: float):
        self.backend, self.env, self.size, self.timeout = backend, dict(env), size, timeout_s
        self.round = 0

    def _one(self, probe: Any) -> Any:
        from ncdoc.cluster.isolation import Outcome
        from ncdoc.tuner.backends import RunContext, TrialFailed
        env = dict(self.env)
        if len(probe.nodes) > 1 and "NCCL_ALGO" not in env:
            env["NCCL_ALGO"] = "Ring"     # on two nodes Tree and NVLSTree report more than the network (nccl-tests #196)
        key = f"health/round-{self.round:02d}/{probe.key}"
        try:
            m = self.backend.measure(env, [("all_reduce", (self.size,))], self.round, timeout_s=self.timeout,
                                     context=RunContext(group="health", hosts=tuple(probe.nodes), log_key=key))
        except TrialFailed as exc:
            return Outcome(probe, None, None, reason=exc.reason)
        row = m.results("all_reduce")[-1]
        return Outcome(probe, row.busbw, None, evidence=(os.path.join(self.backend.log_dir, key),), algo=row.algo)

    def __call__(self, probes: Sequence[Any]) -> list[Any]:
        self.round += 1
        out: list[Any] = [None] * len(probes)

        def work(i: int) -> None:
            try:
                out[i] = self._one(probes[i])
            except KeyboardInterrupt:    # the launcher was cancelled: the main thread re-raises
                pass

        _run_threads(self.backend, work, len(probes))
        return out


def env_check(backend: Any, groups: Sequence[tuple[str, ...]], env: Mapping[str, str], reach: Mapping[str, str], *,
              timeout_s: float, log: Callable[[str], None]) -> tuple[dict[str, str], list[str], list[str]]:
    """(node -> why its NCCL env is off, variables no node's NCCL reported, notes): one short run per group
    (the trial shape) with today's env and `reach`, all groups at once."""
    want = {**env, **reach}
    results: list[Any] = [None] * len(groups)

    def work(i: int) -> None:
        try:
            results[i] = backend.bench_run(groups[i], want, "all_reduce", (1 << 20,), timeout_s=timeout_s,
                                           key=f"health/env/{'-'.join(groups[i])}")[0]
        except KeyboardInterrupt:
            pass

    _run_threads(backend, work, len(groups))
    bad: dict[str, str] = {}
    notes: list[str] = []
    reported: set[str] = set()
    missing: dict[str, set[str]] = {}
    for nodes, r in zip(groups, results):
        v = getattr(r, "verdict", None)
        if r is None or v is None or not any(run.ok for run in r.runs):
            notes.append(f"env check on {', '.join(nodes)}: no run to judge ({getattr(r, 'reason', 'interrupted')})")
            continue

        def node(host: str) -> str:
            return node_of(host, nodes)

        for name in reach:
            gone = {node(h) for h in v.env_missing.get(name, ())}
            missing.setdefault(name, set()).update(gone)
            if len(gone) < len(nodes):
                reported.add(name)
        for name, hosts in v.env_wrong.items():
            for h, got in hosts.items():
                bad.setdefault(node(h), f"env: {name}={want.get(name)} was set, its NCCL read {got!r}")
        for name, seen in v.env_uneven.items():
            values = [x for x in seen.values()]
            common = max(set(values), key=values.count)
            for h, x in seen.items():
                if x != common:
                    bad.setdefault(node(h), f"env: {name} is {'unset' if x is None else repr(x)} there, "
                                            f"{'unset' if common is None else repr(common)} on the others")
        for h in [h for h in bad if h not in nodes and h not in sum(map(tuple, groups), ())]:
            # NCCL printed a host name the launcher does not use and that maps to no node: the group is
            # off, whichever of its nodes it was
            why = bad.pop(h)
            for n in nodes:
                bad.setdefault(n, f"{why} (on host {h}, one of {', '.join(nodes)})")
    never = [n for n in reach if n not in reported and n in missing]
    for name in reach:
        if name in never:
            continue
        for h in sorted(missing.get(name, ())):
            bad.setdefault(h, f"env: its NCCL never reported {name}={reach[name]} (the other nodes' did)")
    if never:
        notes.append(f"no node's NCCL reported {', '.join(never)} when set: not searched (every trial changing it "
                     "would be rejected)")
    for n, why in bad.items():
        log(f"health gate: {n}: {why}")
    return bad, never, notes


def node_of(host: str, nodes: Sequence[str]) -> str:
    """The launcher's name for the host NCCL printed in a log line of a run on `nodes` (the same name,
    the short form of one, or the group's only node); else the host as printed."""
    if host in nodes:
        return host
    short = [n for n in nodes if n.split(".")[0] == host.split(".")[0]]
    if len(short) == 1:
        return short[0]
    return nodes[0] if len(nodes) == 1 else host


def _run_threads(backend: Any, work: Callable[[int], None], n: int) -> None:
    """work(0) ... work(n - 1), each in a thread of its own, waited for; Ctrl-C cancels the launches in flight
    (the launcher's event) and waits for the threads to stop what they started before it goes on.

    Each thread sets an Event when its work ends, and the waits are on those, never on Thread.join: a join
    that Ctrl-C interrupts can leave a thread that is still running marked as stopped (CPython 3.11), so the
    wait after the interrupt returned at once and a hung node's srun step was left running."""
    import threading
    done = [threading.Event() for _ in range(n)]

    def run(i: int) -> None:
        try:
            work(i)
        finally:
            done[i].set()

    started = 0
    try:
        for i in range(n):
            threading.Thread(target=run, args=(i,), daemon=True).start()
            started += 1
        for ev in done:
            while not ev.wait(0.5):
                pass
    except KeyboardInterrupt:
        for ev in done[started:]:          # never started: nothing to wait for
            ev.set()
        cancel = backend.launcher().cancel
        cancel.set()
        try:
            for ev in done:
                ev.wait(60)
        finally:
            cancel.clear()
        raise


def health_gate(backend: Any, nodes: Sequence[str], scales: Sequence[str], env: Mapping[str, str], *,
                size: int, timeout_s: float, log: Callable[[str], None]) -> tuple[dict[str, str], dict]:
    """(node -> what was found, the isolation report as a dict)."""
    from ncdoc.cluster.isolation import Isolator
    log(f"health gate: {', '.join(scales)} over {len(nodes)} node(s), all_reduce at {size >> 20} MiB")
    report = Isolator(tuple(nodes), GateMeasurer(backend, env, size, timeout_s),
                      progress=lambda msg: log(f"health gate: {msg}")).run(scales)
    bad: dict[str, str] = {}
    for f in report.findings:
        if f.kind in ("bad-node", "slow-node", "intermittent", "bad-rail"):
            bad.setdefault(f.node, f"{f.kind}: {f.evidence[0] if f.evidence else f.subject}")
    return bad, report.to_dict()


def plan(backend: Any, *, per_group: int | None, max_groups: int | None, gate: Sequence[str],
         topology_file: str | None, env: Mapping[str, str], workload: Sequence[tuple[str, Sequence[int]]],
         timeout_s: float, log: Callable[[str], None], reach: Mapping[str, str] | None = None) -> ScalePlan:
    """Place the groups, run the health gate (the env check with `reach`: a value of each variable the
    search may set), and say which groups trials may use."""
    nodes = tuple(backend.all_nodes())
    per = per_group or len(nodes)
    if per > len(nodes):
        raise UsageError(f"--nodes {per}: the launcher reaches {len(nodes)} node(s) ({', '.join(nodes[:6])})")
    switches, how = topology(topology_file, backend.launcher_kind, backend.environ, log) if per < len(nodes) \
        else (None, "one group of every node")
    groups, rest, notes = place(nodes, per, switches)
    infos = [GroupInfo(f"g{i}", g) for i, g in enumerate(groups)]
    gate = tuple(s for s in gate if len(nodes) > 1 or s == "node")     # one node: nothing to pair
    p = ScalePlan(nodes, per, how, infos, rest, notes, gate_scales=gate)
    if gate:
        if reach and groups:
            bad, p.not_reported, env_notes = env_check(backend, groups, env, reach, timeout_s=timeout_s, log=log)
            p.bad.update(bad)
            p.notes += env_notes
        sizes = [s for c, ss in workload if c == "all_reduce" for s in ss]
        size = min(max(sizes), 1 << 30) if sizes else GATE_SIZE
        found, p.gate = health_gate(backend, nodes, gate, env, size=size, timeout_s=timeout_s, log=log)
        for n, why in found.items():
            p.bad.setdefault(n, why)
        for g in infos:
            found = [f"{n} ({p.bad[n]})" for n in g.nodes if n in p.bad]
            if found:
                g.used, g.why = False, "the health gate found " + "; ".join(found)
                log(f"node group {g.name} ({', '.join(g.nodes)}) not used: {g.why}")
        if not p.bad:
            log("health gate: every node healthy")
    usable = p.usable
    if max_groups and len(usable) > max_groups:
        for g in usable[max_groups:]:
            g.used, g.why = False, f"--groups {max_groups}"
    if not p.usable:
        raise RunnerError("no node group to tune on: every group holds a node the health gate found bad",
                          cause="; ".join(f"{n}: {w}" for n, w in p.bad.items())[:500])
    log(f"node groups ({how}): " + "; ".join(f"{g.name} {','.join(g.nodes)}" + ("" if g.used else " (not used)")
                                             for g in p.groups)
        + (f"; left out: {', '.join(rest)}" if rest else ""))
    backend.nodes_default = p.usable[0].nodes
    return p


# ---------------------------------------------------------------- a baseline per group

def calibrate(run_jobs: Callable[[list], dict], executor: Any, p: ScalePlan, base_env: Mapping[str, str],
              workload: Any, runs: int, timeout_s: float, log: Callable[[str], None]) -> list[Any]:
    """Measure the baseline on every usable group (`runs` each); set the executor's per-group factors;
    return every run scaled to the groups' mean (the study's baseline). One group: nothing to do."""
    from dataclasses import replace

    from ncdoc.tuner.dispatch import Job, Step, env_tuple, scale_measurement

    groups = p.usable
    if len(groups) < 2:
        return []
    env = env_tuple(base_env)
    jobs = [replace(Job(f"baseline-{g.name}", tuple(Step("baseline", env, 9500 + i) for i in range(runs)),
                        tuple(workload), timeout_s), group_hint=g.name) for g in groups]
    log(f"baseline on each of {len(groups)} node groups ({runs} run(s) each)")
    res = run_jobs(jobs)
    medians: dict[str, dict[tuple[str, int], float]] = {}
    for g in groups:
        r = res.get(f"baseline-{g.name}")
        if r is None or not r.ok:
            g.used, g.why = False, f"its baseline could not be measured: {r.reason if r else 'no result'}"
            log(f"node group {g.name} not used: {g.why}")
            executor.drop(g.name)
            continue
        per: dict[tuple[str, int], list[float]] = {}
        for _, m in r.measurements:
            for c, rows in m.rows:
                for row in rows:
                    per.setdefault((c, row.size), []).append(row.busbw)
        medians[g.name] = {k: statistics.median(v) for k, v in per.items()}
        g.baseline = {}
        for (c, s), v in medians[g.name].items():
            g.baseline.setdefault(c, {})[s] = v
    if not p.usable:
        raise RunnerError("the baseline could not be measured on any node group",
                          cause="; ".join(g.why for g in groups))
    keys = set.intersection(*(set(m) for m in medians.values()))
    ref = {k: math.exp(statistics.fmean(math.log(max(m[k], 1e-9)) for m in medians.values())) for k in keys}
    factors = {g: {k: ref[k] / max(m[k], 1e-9) for k in keys} for g, m in medians.items()}
    for g in p.usable:
        f = factors.get(g.name, {})
        g.relative = math.exp(statistics.fmean(-math.log(v) for v in f.values())) if f else None
    executor.set_factors(factors)
    log("per-group baselines: " + ", ".join(f"{g.name} x{g.relative:.3f}" for g in p.usable if g.relative))
    out = []
    for g in p.usable:
        for _, m in res[f"baseline-{g.name}"].measurements:
            out.append(scale_measurement(m, factors[g.name]))
    return out


# ---------------------------------------------------------------- full scale

def full_scale_check(run_jobs: Callable[[list], dict], p: ScalePlan, *, base_env: Mapping[str, str],
                     final_env: Mapping[str, str], candidates: Sequence[Mapping[str, str]], profile: Any,
                     baseline_buckets: Mapping[str, float], rounds: int, timeout_s: float, seed: int,
                     log: Callable[[str], None]) -> dict:
    """The final env (side B) and the other candidates (C1, ...) against the baseline (A) on every healthy
    node, `rounds` shuffled rounds. B is rejected when it is clearly slower there (the upper t bound of
    its paired gain below zero) or when its runs fail."""
    from dataclasses import replace

    from ncdoc.tuner.confirm import Side, _pairs, interleaved_job, pct
    from ncdoc.tuner.dispatch import FULL, env_tuple
    from ncdoc.tuner.stats import paired_t
    from ncdoc.tuner.study import summarise

    sides = [Side("A", env_tuple(base_env)), Side("B", env_tuple(final_env))]
    labels = {"B": dict(final_env)}
    for i, c in enumerate(candidates, 1):
        if dict(c) != dict(final_env) and dict(c) != dict(base_env):
            sides.append(Side(f"C{i}", env_tuple(c)))
            labels[f"C{i}"] = dict(c)
    nodes = p.healthy
    log(f"full scale: {len(sides) - 1} candidate(s) against the baseline on {len(nodes)} node(s), {rounds} rounds")
    job = replace(interleaved_job(FULL, sides, rounds, tuple(profile.workload()), timeout_s, offset=30000, seed=seed),
                  group_hint=FULL)
    res = run_jobs([job])[FULL]
    failed = dict(getattr(res, "step_failures", ()))
    out: dict[str, Any] = {"nodes": len(nodes), "rounds": rounds, "sides": {}}

    def score(m: Any) -> float:
        return profile.log_score(summarise(profile, [m], None)[0], baseline_buckets)

    for label, env in labels.items():
        entry: dict[str, Any] = {"changes": {k: v for k, v in env.items() if base_env.get(k) != v},
                                 "unset": [k for k in base_env if k not in env]}
        if not res.ok or "A" in failed or label in failed:
            entry.update(ok=False, why=f"its runs failed: {failed.get(label) or failed.get('A') or res.reason}")
        else:
            a, b = _pairs(res, "A", label)
            diffs = [score(y) - score(x) for x, y in zip(a, b)]
            mean, _, lcb = paired_t(diffs, 0.95)
            ucb = 2 * mean - lcb if math.isfinite(lcb) else math.inf
            entry.update(gain_pct=round(pct(mean), 2), rounds=len(diffs), ok=not (ucb < 0),
                         why="" if ucb >= 0 else f"slower at full scale: {pct(mean):+.1f} % (upper bound "
                                                 f"{pct(ucb):+.1f} %) over {len(diffs)} rounds")
        out["sides"][label] = entry
    final = out["sides"]["B"]
    out["accepted"] = bool(final.get("ok"))
    out["why"] = final.get("why", "")
    log("full scale: the final env " + (f"{final.get('gain_pct', 0):+.1f} % against the baseline" if final.get("ok")
                                        else f"rejected: {final['why']}"))
    return out


__all__ = ["read_topology", "topology", "place", "GroupInfo", "ScalePlan", "parse_gate", "GateMeasurer",
           "env_check", "health_gate", "plan", "calibrate", "full_scale_check", "DEFAULT_GATE"]
