"""Bus bandwidth against message size: the series a chart draws, from what triage or a tune measured.

A series is one collective from one source (one nccl-tests file, one run in it, or a tune's
baseline and tuned medians): (size in bytes, busbw in GB/s) per measured size, in size order.
Triage's facts carry each nccl-tests input's curve (facts.sources[].facts.curve: [[size, busbw]],
the better of out-of-place and in-place per size, as nccl-tests' own peak counts them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence


@dataclass(frozen=True)
class Series:
    label: str                                   # "all_reduce_perf.txt", "baseline", "tuned"
    collective: str                              # "all_reduce"
    role: str                                    # measured | baseline | tuned | guard-baseline | guard-tuned
    points: tuple[tuple[int, float], ...]        # (bytes, GB/s), sizes ascending, one per measured size

    @property
    def peak(self) -> float | None:
        return max((bw for _, bw in self.points), default=None)


@dataclass(frozen=True)
class CurveSet:
    collective: str
    series: tuple[Series, ...]
    expected_busbw: float | None = None          # the figure triage holds a measurement against
    line_rate: float | None = None               # per-node NIC aggregate, GB/s (the envelope's ceiling)
    basis: tuple[str, ...] = field(default=())

    def bandwidth_bound_from(self, share: float = 0.8) -> int | None:
        """The smallest size from which the best series stays at or above `share` of its own peak."""
        best = max(self.series, key=lambda s: s.peak or 0.0, default=None)
        if best is None or not best.peak:
            return None
        start = None
        for size, bw in best.points:
            if bw >= share * best.peak:
                start = size if start is None else start
            else:
                start = None
        return start


def _points(raw: Any) -> tuple[tuple[int, float], ...]:
    out: dict[int, float] = {}
    for item in raw or ():
        try:
            size, bw = int(item[0]), float(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        if size > 0 and bw >= 0:
            out[size] = max(bw, out.get(size, 0.0))
    return tuple(sorted(out.items()))


def from_triage_facts(facts: Mapping[str, Any]) -> list[CurveSet]:
    """One CurveSet per collective from triage's facts (each nccl-tests input's curve)."""
    exp = facts.get("expected") or {}
    by_coll: dict[str, list[Series]] = {}
    for src in facts.get("sources") or ():
        if not isinstance(src, Mapping) or src.get("kind") != "nccl_tests":
            continue
        f = src.get("facts") or {}
        pts = _points(f.get("curve"))
        if not pts:
            continue
        coll = str(f.get("collective") or "nccl-tests (collective not named in the output)")
        name = str(src.get("path") or "nccl-tests").replace("\\", "/").rsplit("/", 1)[-1]
        by_coll.setdefault(coll, []).append(Series(name, coll, "measured", pts))
    out = []
    for coll, series in by_coll.items():
        same = exp.get("collective") in (None, coll)
        out.append(CurveSet(coll, tuple(series),
                            _float(exp.get("expected_busbw_gbps")) if same else None,
                            _float(exp.get("aggregate_gbytes")) if same else None,
                            tuple(str(b) for b in exp.get("basis") or ()) if same else ()))
    return out


def from_tune(sizes: Mapping[str, Mapping[str, Sequence]], expected: Mapping[str, float | None]) -> list[CurveSet]:
    """Baseline and tuned series per collective: sizes = {"baseline": {coll: [[size, bw], ...]}, "tuned": ...}."""
    colls = list(dict.fromkeys(c for role in sizes.values() for c in role))
    out = []
    for coll in colls:
        series = [Series(role, coll, role, _points(sizes[role].get(coll))) for role in sizes if sizes[role].get(coll)]
        series = [s for s in series if s.points]
        if len(series) == 2 and series[0].points == series[1].points and {s.role for s in series} == {"baseline", "tuned"}:
            # nothing was recommended: the tuned env is the baseline, one line says so
            series = [Series("baseline = tuned (no change recommended)", coll, "baseline", series[0].points)]
        if series:
            out.append(CurveSet(coll, tuple(series), _float(expected.get(coll))))
    return out


def _float(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


def all_points(sets: Iterable[CurveSet]) -> int:
    return sum(len(s.points) for c in sets for s in c.series)


__all__ = ["Series", "CurveSet", "from_triage_facts", "from_tune", "all_points"]
