"""Fault isolation by measurement: which node, or which node's rail, makes the cluster slow.

Scales, each a series of rounds (the probes of one round run at once on disjoint nodes):

    node   every node alone (NVLink / intra-node): one round; a slow node is named directly.
    rail   for each rail, pairs of nodes with one NIC each (NCCL_IB_HCA), one round per rail.
    pair   disjoint pairs over all rails: one round for N nodes.
    full   every node in one ring: one round; when it is slow, bisection finds the node.

A probe below `threshold` x its expected busbw (the topology's line-rate figure, as triage
computes it; the median of the round when no figure is known or every probe misses it) is a
suspect. Attribution re-tests each node of a suspect pair with a known-good partner, all in
one round (two-pass: O(1) extra rounds for a few bad nodes, whatever N is), then confirms
each finding once more with another good partner: a node slow every time is bad, a node slow
only some of the time is intermittent (a flapping link), a pair slow only together points at
the path between them. Bisection (used for the full scale) halves the slow group each round:
O(log N) rounds for one bad node.

The measurements come from a `measure(probes) -> [Outcome]` callable: nccl-tests through a
launcher (ncdoc.cluster.bench) or the simulator (ncdoc.cluster.fabric_sim), so the logic is
the same for both and is tested on the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCALES = ("node", "rail", "pair", "full")
THRESHOLD = 0.80                 # ncdoc.nccl.bandwidth.WARN_FRACTION


@dataclass(frozen=True)
class Probe:
    key: str
    nodes: tuple[str, ...]
    scale: str                   # node | rail | pair | group | full
    rail: str | None = None
    purpose: str = "pass 1"      # pass 1 | attribution | confirmation | bisection


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    busbw: float | None          # None: the run failed or was invalid
    expected: float | None = None
    reason: str = ""             # why there is no figure
    evidence: tuple[str, ...] = ()   # log files, verdict notes
    algo: str | None = None


@dataclass
class Finding:
    subject: str                 # "node07" or "node07:mlx5_3"
    kind: str                    # bad-node | bad-rail | intermittent | slow-path | slow-node
    node: str
    rail: str | None = None
    evidence: list[str] = field(default_factory=list)
    blame: list[str] = field(default_factory=list)     # partners of its slow re-tests (intermittent)

    def to_dict(self) -> dict:
        return {"subject": self.subject, "kind": self.kind, "node": self.node, "rail": self.rail,
                "evidence": list(self.evidence)}


@dataclass
class IsolationReport:
    nodes: tuple[str, ...]
    rounds: int = 0
    first_pass_rounds: int = 0
    outcomes: list[tuple[int, Outcome]] = field(default_factory=list)   # (round, outcome)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def extra_rounds(self) -> int:
        return self.rounds - self.first_pass_rounds

    @property
    def bad_nodes(self) -> list[str]:
        return sorted({f.node for f in self.findings if f.kind in ("bad-node", "slow-node", "intermittent")})

    @property
    def bad_rails(self) -> list[tuple[str, str]]:
        return sorted({(f.node, f.rail) for f in self.findings if f.kind == "bad-rail" and f.rail})

    @property
    def healthy(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict:
        return {"nodes": len(self.nodes), "rounds": self.rounds, "first_pass_rounds": self.first_pass_rounds,
                "extra_rounds": self.extra_rounds, "findings": [f.to_dict() for f in self.findings],
                "bad_nodes": self.bad_nodes, "bad_rails": [f"{n}:{r}" for n, r in self.bad_rails],
                "notes": list(self.notes),
                "measurements": [{"round": r, "key": o.probe.key, "scale": o.probe.scale, "rail": o.probe.rail,
                                  "purpose": o.probe.purpose, "nodes": list(o.probe.nodes), "busbw": o.busbw,
                                  "expected": o.expected, "reason": o.reason, "algo": o.algo,
                                  "evidence": list(o.evidence)} for r, o in self.outcomes]}


def _fmt(o: Outcome, ref: float | None) -> str:
    where = "+".join(o.probe.nodes) + (f" on {o.probe.rail}" if o.probe.rail else "")
    if o.busbw is None:
        return f"{where}: no result ({o.reason})"
    pct = f" ({100 * o.busbw / ref:.0f} % of {ref:.0f})" if ref else ""
    return f"{where}: {o.busbw:.1f} GB/s{pct}"


class Isolator:
    def __init__(self, nodes, measure, *, threshold: float = THRESHOLD, rails=(), confirm: int = 1,
                 progress=None):
        from ncdoc.cluster.nodes import unique
        self.nodes = tuple(unique(nodes))
        self.measure = measure
        self.threshold = threshold
        self.rails = tuple(rails)
        self.confirm = confirm
        self.progress = progress or (lambda msg: None)
        self.report = IsolationReport(self.nodes)

    # -- rounds
    def _round(self, probes: list[Probe]) -> list[Outcome]:
        if not probes:
            return []
        self.report.rounds += 1
        outs = self.measure(probes)
        for o in outs:
            self.report.outcomes.append((self.report.rounds, o))
        return outs

    def _reference(self, outs: list[Outcome]) -> dict[str, float | None]:
        """The figure each probe is held against: its expectation, unless most probes miss it (then the
        expectation, not the fabric, is off) or there is none: the round's median."""
        got = sorted(o.busbw for o in outs if o.busbw is not None)
        median = got[len(got) // 2] if got else None
        below = [o for o in outs if o.busbw is not None and o.expected and o.busbw < self.threshold * o.expected]
        relative = len(got) >= 3 and len(below) > len(got) / 2
        if relative and median:
            self.report.notes.append(f"{len(below)} of {len(got)} {outs[0].probe.scale} probes are below "
                                     f"{self.threshold:.0%} of the line-rate figure: the whole fabric (or the "
                                     f"figure) is off; odd ones are judged against the median {median:.1f} GB/s")
        return {o.probe.key: (median if relative or not o.expected else o.expected) for o in outs}

    def _slow(self, o: Outcome, ref: float | None) -> bool:
        if o.busbw is None:
            return True
        return bool(ref) and o.busbw < self.threshold * ref

    # -- scales
    def run(self, scales=("pair",)) -> IsolationReport:
        for scale in scales:
            if scale == "node":
                self._node_scale()
            elif scale == "pair":
                self._pairwise(None)
            elif scale == "rail":
                if not self.rails:
                    self.report.notes.append("rail scale skipped: the rail NICs are not known (give the nodes' "
                                             "snapshots or --rails)")
                for rail in self.rails:
                    self._pairwise(rail)
            elif scale == "full":
                self._full()
            else:
                raise ValueError(f"unknown scale {scale!r}")
        self._consolidate()
        return self.report

    def _node_scale(self) -> None:
        outs = self._round([Probe(f"node-{n}", (n,), "node") for n in self.nodes])
        self.report.first_pass_rounds += 1
        refs = self._reference(outs)
        for o in outs:
            if self._slow(o, refs[o.probe.key]):
                self._add(Finding(o.probe.nodes[0], "slow-node", o.probe.nodes[0],
                                  evidence=[f"alone (NVLink / intra-node): {_fmt(o, refs[o.probe.key])}",
                                            *o.evidence]))

    def _pairs(self, nodes) -> tuple[list[tuple[str, str]], list[str]]:
        nodes = list(nodes)
        pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
        return pairs, nodes[len(pairs) * 2:]

    def _pairwise(self, rail: str | None) -> None:
        scale = "rail" if rail else "pair"
        tag = f"{rail}-" if rail else ""
        if len(self.nodes) < 2:
            self.report.notes.append(f"the {scale} scale needs at least two nodes")
            return
        pairs, leftover = self._pairs(self.nodes)
        outs = self._round([Probe(f"{scale}-{tag}{a}-{b}", (a, b), scale, rail) for a, b in pairs])
        self.report.first_pass_rounds += 1
        refs = self._reference(outs)
        slow = [o for o in outs if self._slow(o, refs[o.probe.key])]
        if outs and len(slow) == len(outs):
            self.report.notes.append(f"every {scale} probe{' on ' + rail if rail else ''} was slow or failed: "
                                     "no good partner to attribute with; the fault is not one node")
            return
        # partners for the re-tests: nodes of fast pairs, the fastest first
        fast = sorted((o for o in outs if not self._slow(o, refs[o.probe.key])), key=lambda o: -(o.busbw or 0))
        doubtful = {f.node for f in self.report.findings}          # found at an earlier scale: not a partner
        good = [n for o in fast for n in o.probe.nodes if n not in doubtful]
        known = sorted(v for v in refs.values() if v)
        ref_value = known[len(known) // 2] if known else None
        history: dict[str, list[tuple[str, bool, str, str | None]]] = {}     # node -> (stage, slow, text, partner)
        for o in slow:
            a, b = o.probe.nodes
            history.setdefault(a, []).append(("pass 1", True, _fmt(o, refs[o.probe.key]), b))
            history.setdefault(b, []).append(("pass 1", True, _fmt(o, refs[o.probe.key]), a))
        suspects = list(dict.fromkeys([n for o in slow for n in o.probe.nodes] + leftover))
        if suspects and not good:
            self.report.notes.append(f"no fast pair to take partners from: {', '.join(suspects)} not attributed")
            return
        # Each suspect is re-tested with a good partner in the attribution round and again, with
        # another one, in each confirmation round: 1 + confirm rounds while partners suffice.
        for attempt in range(1 + self.confirm):
            purpose = "attribution" if attempt == 0 else "confirmation"
            todo = list(suspects)
            offset = attempt                        # each attempt moves every suspect to the next partner
            while todo:
                batch = todo[:len(good)]
                todo = todo[len(good):]
                probes = [Probe(f"{scale}-{tag}{n}-{good[(k + offset) % len(good)]}-{purpose[0]}{attempt}",
                                (n, good[(k + offset) % len(good)]), scale, rail, purpose)
                          for k, n in enumerate(batch)]
                for o in self._round(probes):
                    n, g = o.probe.nodes
                    history.setdefault(n, []).append((purpose, self._slow(o, ref_value), _fmt(o, ref_value), g))
        self._conclude(history, suspects, slow, rail, refs)

    def _conclude(self, history, suspects, slow_pass1, rail, refs) -> None:
        """Bad: slow in every re-test. Intermittent: slow in some, where the partner does not explain it."""
        retests = {n: [h for h in history.get(n, []) if h[0] != "pass 1"] for n in suspects}
        bad = {n for n in suspects if retests[n] and all(h[1] for h in retests[n])}
        # a partner slow elsewhere (bad, or slow in another node's re-test) explains a slow re-test
        slow_partners: dict[str, int] = {}
        for n in suspects:
            for _, was_slow, _, partner in retests[n]:
                if was_slow and partner:
                    slow_partners[partner] = slow_partners.get(partner, 0) + 1
        flagged: set[str] = set()
        for n in suspects:
            runs = history.get(n, [])
            evidence = [f"{stage}: {text}" for stage, _, text, _ in runs]
            subject = f"{n}:{rail}" if rail else n
            if n in bad:
                flagged.add(n)
                self._add(Finding(subject, "bad-rail" if rail else "bad-node", n, rail, evidence))
                continue
            own = [h for h in retests[n] if h[1] and h[3] not in bad and slow_partners.get(h[3], 0) <= 1
                   and not any(f.node == h[3] for f in self.report.findings)]
            if own:
                flagged.add(n)
                total = len(own) + (1 if any(h[0] == "pass 1" for h in runs) else 0)
                self._add(Finding(subject, "intermittent", n, rail,
                                  [f"slow in {total} of {len(runs)} runs (a flapping link or a straggling host)",
                                   *evidence], blame=[h[3] for h in own]))
        for o in slow_pass1:
            a, b = o.probe.nodes
            if a not in flagged and b not in flagged:
                self._add(Finding(f"{a}+{b}" + (f":{rail}" if rail else ""), "slow-path", a, rail,
                                  [_fmt(o, refs[o.probe.key]),
                                   f"{a} and {b} are fast with other partners: suspect the path between them "
                                   "(switch port, cabling, routing), or a transient"]))

    def _consolidate(self) -> None:
        """A node slow on most of its rails has a node-wide problem (GPUDirect off, a slow host):
        one node finding instead of one per rail; and a slow path through a node found bad is that node."""
        # an intermittent re-test whose slow partner turned out bad or flapping itself blames the partner
        flagged_any = {f.node for f in self.report.findings if f.kind != "slow-path"}
        self.report.findings = [f for f in self.report.findings
                                if not (f.kind == "intermittent" and f.blame and set(f.blame) <= flagged_any - {f.node})]
        by_node: dict[str, list[Finding]] = {}
        for f in self.report.findings:
            if f.rail and f.kind in ("bad-rail", "intermittent"):
                by_node.setdefault(f.node, []).append(f)
        keep = list(self.report.findings)
        for node, fs in by_node.items():
            if len(self.rails) < 2 or len(fs) < max(2, (len(self.rails) + 1) // 2):
                continue
            keep = [f for f in keep if f not in fs]
            rails = ", ".join(f.rail for f in fs)
            kind = "bad-node" if len(fs) == len(self.rails) and all(f.kind == "bad-rail" for f in fs) else "intermittent"
            node_f = next((f for f in keep if f.subject == node and f.rail is None), None)
            note = f"slow on {len(fs)} of {len(self.rails)} rails ({rails}): a node-wide problem, not one rail"
            if node_f is None:
                keep.append(Finding(node, kind, node, None, [note, *fs[0].evidence]))
            else:
                node_f.evidence.append(note)
        for node, fs in by_node.items():
            # a node that flaps shows up on random rails: one intermittent node finding
            if any(f.kind == "intermittent" for f in fs) or any(
                    f.subject == node and f.kind == "intermittent" for f in keep):
                keep = [f for f in keep if f not in fs]
                node_f = next((f for f in keep if f.subject == node), None)
                note = f"slow at times on rail(s) {', '.join(f.rail for f in fs)}"
                if node_f is None:
                    keep.append(Finding(node, "intermittent", node, None, [note, *fs[0].evidence]))
                else:
                    node_f.kind = "intermittent" if node_f.kind != "bad-node" else node_f.kind
                    node_f.evidence.append(note)
                continue
            # a node slow in pairs because of one or two rails: the rail is the finding
            node_f = next((f for f in keep if f.subject == node and f.kind == "bad-node"), None)
            rail_fs = [f for f in fs if f in keep and f.kind == "bad-rail"]
            if node_f is not None and rail_fs and len(rail_fs) < max(2, (len(self.rails) + 1) // 2):
                keep.remove(node_f)
                for f in rail_fs:
                    f.evidence.append(f"explains {node}'s slow pairs: " + "; ".join(node_f.evidence[:2]))
        flagged = {f.node for f in keep if f.kind in ("bad-node", "slow-node", "intermittent", "bad-rail")}
        keep = [f for f in keep if not (f.kind == "slow-path" and any(n in flagged for n in f.subject.split(":")[0]
                                                                        .split("+")))]
        self.report.findings = keep

    def _full(self) -> None:
        outs = self._round([Probe("full", self.nodes, "full")])
        self.report.first_pass_rounds += 1
        o = outs[0]
        ref = o.expected
        if not self._slow(o, ref):
            return
        self.bisect(list(self.nodes), ref, first=o)

    def bisect(self, nodes, ref, first: Outcome | None = None) -> None:
        """Halve the slow groups until pairs remain, then attribute each slow pair with a good node."""
        evidence = [_fmt(first, ref)] if first else []
        slow_groups = [tuple(nodes)]
        good: list[str] = []
        while slow_groups and max(len(g) for g in slow_groups) > 2:
            probes = []
            for g in slow_groups:
                if len(g) <= 2:
                    probes.append(Probe("bisect-" + "-".join(g), g, "group", purpose="bisection"))
                    continue
                half = len(g) // 2
                for part in (g[:half], g[half:]):
                    probes.append(Probe(f"bisect-{part[0]}-{part[-1]}-{len(part)}", part, "group", purpose="bisection"))
            outs = self._round(probes)
            slow_groups = []
            for o in outs:
                r = ref or o.expected
                if self._slow(o, r):
                    slow_groups.append(o.probe.nodes)
                    evidence.append(_fmt(o, r))
                else:
                    good.extend(o.probe.nodes)
        singles = [g for g in slow_groups if len(g) == 1]
        pairs = [g for g in slow_groups if len(g) == 2]
        if pairs and good:
            probes = [Probe(f"bisect-{p[i]}-{good[(2 * k + i) % len(good)]}", (p[i], good[(2 * k + i) % len(good)]),
                            "group", purpose="attribution") for k, p in enumerate(pairs) for i in (0, 1)]
            outs = self._round(probes)
            for o in outs:
                if self._slow(o, ref or o.expected):
                    singles.append((o.probe.nodes[0],))
                    evidence.append(_fmt(o, ref or o.expected))
        for (n,) in singles:
            self._add(Finding(n, "bad-node", n, evidence=list(evidence)))
        if slow_groups and not singles:
            self.report.notes.append("the full ring is slow but no single node explains it: "
                                     + "; ".join(evidence[:3]))

    def _add(self, f: Finding) -> None:
        if not any(x.subject == f.subject and x.kind == f.kind for x in self.report.findings):
            self.report.findings.append(f)
            self.progress(f"{f.kind}: {f.subject}")


def first_round(scale: str, nodes, rails=()) -> list[Probe]:
    """The probes of a scale's first round (what --dry-run shows): the same pairing the Isolator uses."""
    nodes = tuple(nodes)
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if scale == "node":
        return [Probe(f"node-{n}", (n,), "node") for n in nodes]
    if scale == "pair":
        return [Probe(f"pair-{a}-{b}", (a, b), "pair") for a, b in pairs]
    if scale == "rail":
        return [Probe(f"rail-{r}-{a}-{b}", (a, b), "rail", r) for r in list(rails)[:1] for a, b in pairs]
    return [Probe("full", nodes, "full")]


def isolate(nodes, measure, *, scales=("pair",), **kw) -> IsolationReport:
    return Isolator(nodes, measure, **kw).run(scales)


# ---------------------------------------------------------------- measurers

def sim_measurer(fabric):
    """measure(probes) on the simulator (ncdoc.cluster.fabric_sim.Fabric)."""
    counter = {"run": 0}

    def measure(probes):
        counter["run"] += 1
        out = []
        for p in probes:
            nodes = p.nodes
            out.append(Outcome(p, fabric.busbw(nodes, rail=p.rail, run=counter["run"]),
                               fabric.expected(nodes, rail=p.rail)))
        return out
    return measure


__all__ = ["SCALES", "THRESHOLD", "Probe", "Outcome", "Finding", "IsolationReport", "Isolator", "isolate", "first_round",
           "sim_measurer"]
