"""Tuner tables that keep NCCL's choice everywhere except where a confirmed measurement changed it.

NCCL's example plugin gives any call no rule matches ONE channel, so a table must cover every size
of every collective of the communicator it is meant for. Where the backend reports what NCCL ran
(its TUNING lines: the real backends), NCCL's own choice at each measured size is that: the
algorithm, protocol and channel count NCCL printed, over the range from the geometric midpoint
with the measured size below to the one with the size above (`observed`). Elsewhere the rules
come from ncdoc's model of NCCL's own choice (ncdoc.tuner.sim, layer a) for the cluster and the
final environment: for each size range NCCL's algorithm, protocol and the channel count NCCL
would give it (`nccl_channels`, which steps down at small sizes). Inside a measured range an
override replaces the algorithm and protocol, still with NCCL's channel count for them.
Combinations NCCL disabled on this cluster (its cost is IGNORE, e.g. LL128 where NCCL keeps it
off, NVLS without multicast) are never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ncdoc.tuner.table import ALGOS as ALGO_NAMES
from ncdoc.tuner.table import COLLECTIVES, MAX_BYTES, Rule
from ncdoc.tuner.table import PROTOS as PROTO_NAMES

_TOP = 1 << 42               # beyond 4 TiB NCCL's choice no longer changes: the last range runs to MAX_BYTES
# A choice is probed where NCCL's own model puts it within this factor of its best time: the
# fabric can make up that much (congestion, ECMP), not a 2x slower protocol.
PROBE_WITHIN = 1.5


@dataclass(frozen=True)
class Override:
    """A measured choice for one collective over an inclusive nBytes range (`channels`: the count NCCL
    printed for it, else NCCL's own count for that algorithm and protocol)."""
    collective: str
    lo: int
    hi: int
    algo: str
    proto: str
    why: str
    channels: int | None = None


OBSERVED = "NCCL's own choice (its TUNING lines)"
Observed = Mapping[str, Mapping[int, tuple[str, str, int | None]]]   # collective -> size -> (algo, proto, ch)


def observed_choices(measurement: Any) -> dict[str, dict[int, tuple[str, str, int | None]]]:
    """What NCCL ran at each measured size, from a backend's Measurement (SizeResult algo/proto/nchannels
    read from the TUNING lines); sizes without them are left out."""
    out: dict[str, dict[int, tuple[str, str, int | None]]] = {}
    for collective, rows in getattr(measurement, "rows", ()):
        for r in rows:
            if r.algo and r.proto:
                out.setdefault(collective, {})[r.size] = (r.algo, r.proto, r.nchannels)
    return out


def _around(nbytes: Sequence[int], i: int) -> tuple[int, int]:
    """The nBytes range measured size i speaks for: to the geometric midpoints with its neighbours
    (the first and the last measured size are their own ends)."""
    import math
    lo = nbytes[i] if i == 0 else math.isqrt(nbytes[i - 1] * nbytes[i]) + 1
    hi = nbytes[i] if i == len(nbytes) - 1 else math.isqrt(nbytes[i] * nbytes[i + 1])
    return lo, hi


def observed_overrides(cluster: Any, observed: Observed | None) -> list[Override]:
    """NCCL's own choices as it printed them, as ranges around the measured sizes."""
    out: list[Override] = []
    for coll, by_size in sorted((observed or {}).items()):
        if coll not in COLLECTIVES:
            continue
        sizes = sorted(by_size)
        nb = [_nbytes(cluster, coll, s) for s in sizes]
        for i, s in enumerate(sizes):
            algo, proto, ch = by_size[s]
            if algo not in ALGO_NAMES or proto not in PROTO_NAMES:
                continue
            lo, hi = _around(nb, i)
            out.append(Override(coll, lo, hi, algo, proto, OBSERVED, ch if ch and ch > 0 else None))
    return out


def _model(cluster: Any, env: Mapping[str, str]):
    from ncdoc.tuner.sim.nccl_model import model_tables
    return model_tables(cluster, env)


def usable(cluster: Any, env: Mapping[str, str], collective: str, nbytes: int,
           within: float | None = None) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL has not disabled for this call: what a rule may name
    (`within`: only those NCCL's own model puts within that factor of its best time)."""
    from ncdoc.tuner.sim.nccl_model import COLLECTIVES as FUNC, cost_table
    from ncdoc.tuner.sim.revisions import ALGOS, PROTOS

    costs = cost_table(_model(cluster, env), FUNC[collective], nbytes)
    best = min(costs.values(), default=0.0)
    return [(ALGOS[a], PROTOS[q]) for a, q in sorted(costs, key=costs.get)
            if within is None or costs[(a, q)] <= within * best]


def _choice(tables: Any, collective: str, nbytes: int) -> tuple[str, str]:
    from ncdoc.tuner.sim.nccl_model import choose
    c = choose(tables, collective, max(1, nbytes))
    return c.algo, c.proto


def _channels(tables: Any, algo: str, proto: str, nbytes: int) -> int:
    from ncdoc.tuner.sim.nccl_model import nccl_channels
    from ncdoc.tuner.sim.revisions import ALGOS, PROTOS
    return nccl_channels(tables, ALGOS.index(algo), PROTOS.index(proto), max(1, nbytes))


def _grid() -> list[int]:
    out = {0}
    for k in range(0, 43):
        for j in range(4):
            out.add(int(round(2 ** (k + j / 4))))
    return sorted(s for s in out if s <= _TOP)


def choice_ranges(tables: Any, collective: str) -> list[tuple[int, int, str, str]]:
    """NCCL's (algorithm, protocol) over 0..MAX_BYTES as inclusive ranges."""
    grid = _grid()
    marks = [(s, _choice(tables, collective, s)) for s in grid]
    out: list[list] = []
    for (s0, c0), (s1, c1) in zip(marks, marks[1:] + [(MAX_BYTES, marks[-1][1])]):
        if not out:
            out.append([s0, s0, *c0])
        if c1 == c0 or s1 == MAX_BYTES:
            out[-1][1] = s1 if s1 == MAX_BYTES else s1 - 1
            if s1 == MAX_BYTES:
                break
            continue
        lo, hi = s0, s1                        # the choice changes in (lo, hi]: find the first size of c1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _choice(tables, collective, mid) == c0:
                lo = mid
            else:
                hi = mid
        out[-1][1] = hi - 1
        out.append([hi, s1 - 1, *c1])
    return [tuple(r) for r in out]


def _split_by_channels(tables: Any, lo: int, hi: int, algo: str, proto: str) -> list[tuple[int, int, int]]:
    """[lo, hi] cut where NCCL's channel count for (algo, proto) changes: (lo, hi, channels)."""
    out = []
    start = lo
    while start <= hi:
        nc = _channels(tables, algo, proto, start)
        top = _channels(tables, algo, proto, hi)
        if top == nc:
            out.append((start, hi, nc))
            break
        a, b = start, hi                       # the last size that still gets nc
        while b - a > 1:
            mid = (a + b) // 2
            if _channels(tables, algo, proto, mid) == nc:
                a = mid
            else:
                b = mid
        out.append((start, a, nc))
        start = a + 1
    return out


def build(cluster: Any, env: Mapping[str, str], collectives: Iterable[str],
          overrides: Sequence[Override] = (), observed: Observed | None = None) -> list[Rule]:
    """Rules for every size of each collective NCCL's plugin can steer, for the cluster's own
    communicator shape: NCCL's choice (as it reported it where `observed`, else ncdoc's model of
    it), with `overrides` in their ranges."""
    tables = _model(cluster, env)
    topo = tables.topo
    rules: list[Rule] = []
    own = observed_overrides(cluster, observed)
    for coll in collectives:
        if coll not in COLLECTIVES:
            continue
        pieces: list[tuple[int, int, str, str, str, int | None]] = [
            (lo, hi, a, q, "NCCL's own choice", None) for lo, hi, a, q in choice_ranges(tables, coll)]
        for ov in [o for o in own if o.collective == coll] + [o for o in overrides if o.collective == coll]:
            cut: list[tuple[int, int, str, str, str, int | None]] = []
            for lo, hi, a, q, note, ch in pieces:
                if hi < ov.lo or lo > ov.hi:
                    cut.append((lo, hi, a, q, note, ch))
                    continue
                if lo < ov.lo:
                    cut.append((lo, ov.lo - 1, a, q, note, ch))
                # A measured override keeps the count NCCL printed when NCCL chose the same itself.
                keep = ch if ov.channels is None and (ov.algo, ov.proto) == (a, q) else ov.channels
                cut.append((max(lo, ov.lo), min(hi, ov.hi), ov.algo, ov.proto, ov.why, keep))
                if hi > ov.hi:
                    cut.append((ov.hi + 1, hi, a, q, note, ch))
            pieces = cut
        for lo, hi, a, q, note, ch in pieces:
            if ch:
                rules.append(Rule(coll, lo, hi, a, q, ch, topo.nnodes, topo.nranks, note))
                continue
            for s_lo, s_hi, nc in _split_by_channels(tables, lo, hi, a, q):
                rules.append(Rule(coll, s_lo, s_hi, a, q, nc, topo.nnodes, topo.nranks, note))
    return _merge(rules)


def _merge(rules: list[Rule]) -> list[Rule]:
    out: list[Rule] = []
    for r in rules:
        last = out[-1] if out else None
        if (last and last.collective == r.collective and last.max_bytes + 1 == r.min_bytes
                and (last.algo, last.proto, last.channels, last.note) == (r.algo, r.proto, r.channels, r.note)):
            out[-1] = Rule(r.collective, last.min_bytes, r.max_bytes, r.algo, r.proto, r.channels, r.n_nodes,
                           r.n_ranks, r.note)
        else:
            out.append(r)
    return out


# ---------------------------------------------------------------- searching a table

@dataclass(frozen=True)
class Probe:
    label: str
    algo: str
    proto: str
    rules: tuple[Rule, ...]
    collectives: tuple[str, ...]               # where this choice is one NCCL could run


def _nbytes(cluster: Any, collective: str, size: int) -> int:
    """NCCL's nBytes for an nccl-tests size (the whole buffer for all_gather/reduce_scatter)."""
    from ncdoc.tuner.sim.run import counts
    return counts(collective, size, cluster.nranks).nccl_bytes


def probe_tables(cluster: Any, env: Mapping[str, str], profile: Any, observed: Observed | None = None) -> list[Probe]:
    """One table per (algorithm, protocol) NCCL could run at some measured size of the profile's
    steerable collectives but does not choose at all of them: that choice at every size where NCCL
    allows it, NCCL's own elsewhere (what it reported, where `observed`). Measured once each against
    the env alone."""
    tables = _model(cluster, env)
    workload = [(c, s) for c, s in profile.workload() if c in COLLECTIVES]
    options: dict[tuple[str, str], set[str]] = {}
    seen = observed or {}
    for coll, sizes in workload:
        own = {tuple(seen[coll][s][:2]) if s in seen.get(coll, {}) else _choice(tables, coll, _nbytes(cluster, coll, s))
               for s in sizes}
        for s in sizes:
            for pair in usable(cluster, env, coll, _nbytes(cluster, coll, s), within=PROBE_WITHIN):
                if pair not in own or len(own) > 1:
                    options.setdefault(pair, set()).add(coll)
    probes = []
    for (algo, proto), colls in sorted(options.items()):
        ovs = [Override(c, 0, MAX_BYTES, algo, proto, "probe") for c in sorted(colls)]
        probes.append(Probe(f"{algo}/{proto}", algo, proto,
                            tuple(build(cluster, env, [c for c, _ in workload], ovs, observed=observed)),
                            tuple(sorted(colls))))
    return probes


def overrides_from_probes(result: Any, probes: Sequence[Probe], profile: Any, cluster: Any, env: Mapping[str, str],
                          *, noise: float, min_gain: float) -> list[Override]:
    """Where a probe beat the env alone at measured sizes by more than noise: overrides over the
    range around those sizes (to the geometric midpoints with the neighbouring measured sizes, never
    past the first or last measured one)."""
    import math

    runs = {lab: m for lab, m in result.measurements}
    base = runs.get("env")
    if base is None or not result.ok:
        return []
    margin = max(math.log1p(min_gain), 3.0 * math.sqrt(2.0) * noise)
    out: list[Override] = []
    for coll, sizes in profile.workload():
        if coll not in COLLECTIVES:
            continue
        own = {r.size: r.busbw for r in base.results(coll)}
        winners: list[tuple[int, tuple[str, str] | None, float]] = []
        for s in sizes:
            best, gain = None, margin
            for p in probes:
                m = runs.get(p.label)
                if m is None or coll not in p.collectives:
                    continue
                got = next((r for r in m.results(coll) if r.size == s), None)
                if got is not None and got.algo and (got.algo, got.proto) != (p.algo, p.proto):
                    continue              # NCCL's TUNING lines say it ran something else there: no evidence
                bw = got.busbw if got is not None else 0.0
                if own.get(s, 0) > 0 and bw > 0 and math.log(bw / own[s]) > gain:
                    best, gain = (p.algo, p.proto), math.log(bw / own[s])
            winners.append((s, best, gain))
        nb = [_nbytes(cluster, coll, s) for s, _, _ in winners]
        for i, (s, win, gain) in enumerate(winners):
            if win is None:
                continue
            # In NCCL's nBytes, from the geometric midpoint with the previous measured size to the one
            # with the next; the first and last measured sizes are the ends.
            lo_b, hi_b = _around(nb, i)
            why = f"measured: {win[0]}/{win[1]} {100 * (math.exp(gain) - 1):+.1f} % over NCCL's choice at {s} bytes"
            if out and out[-1].collective == coll and (out[-1].algo, out[-1].proto) == win and out[-1].hi + 1 >= lo_b:
                prev = out[-1]
                out[-1] = Override(coll, prev.lo, hi_b, prev.algo, prev.proto, prev.why + "; " + why.split(": ", 1)[1])
            else:
                out.append(Override(coll, lo_b, hi_b, win[0], win[1], why))
    return out
