"""Workload profiles: which collectives at which message sizes a study optimises, and how much each counts.

The score of a measurement against the baseline is the weighted geometric mean over buckets
of (bucket busbw / baseline bucket busbw); a bucket's busbw is the geometric mean over its
sizes. A geometric mean keeps a 2x loss in one bucket from hiding behind a 2x gain in another
of equal weight, and is unaffected by the very different busbw scales of small and large sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ncdoc.errors import InputError, UsageError
from ncdoc.resources import data_dir
from ncdoc.tuner import datafile
from ncdoc.tuner.datafile import check_keys, line_of, parse_size
from ncdoc.tuner.space import COLLECTIVES

_TINY = 1e-9     # a busbw of 0 (a collective that moved nothing) must not make log() fail


@dataclass(frozen=True)
class Bucket:
    name: str
    collective: str
    sizes: tuple[int, ...]
    weight: float

    @property
    def key(self) -> str:
        return f"{self.collective}:{self.name}"


# Small sizes every guard sweep covers (8 B - 1 MiB): where a bandwidth gain most often costs latency.
GUARD_SMALL = (8, 1 << 10, 64 << 10, 1 << 20)
# Sizes a guard collective outside the profile is measured at, besides the small ones.
GUARD_SPREAD = (8 << 20, 64 << 20, 256 << 20)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    buckets: tuple[Bucket, ...]
    guard: tuple[str, ...] = ()              # collectives the job also runs (see profiles.yaml)

    @property
    def collectives(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.collective for b in self.buckets))

    def workload(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(collective, sorted sizes) pairs: what one measurement runs."""
        sizes: dict[str, set[int]] = {}
        for b in self.buckets:
            sizes.setdefault(b.collective, set()).update(b.sizes)
        return tuple((c, tuple(sorted(s))) for c, s in sizes.items())

    def guard_workload(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """What the final env is checked on before it is recommended: every collective of the
        profile and of its guard list, at the small sizes and at the profile's own (or a spread)."""
        own = dict(self.workload())
        out = []
        for c in dict.fromkeys(self.collectives + self.guard):
            sizes = set(GUARD_SMALL) | set(own.get(c, GUARD_SPREAD))
            out.append((c, tuple(sorted(sizes))))
        return tuple(out)

    def restrict(self, collectives: Sequence[str]) -> "Profile":
        """The profile for exactly these collectives: theirs kept, missing ones given the sizes
        and weights of the profile's first collective (so --collectives works with any profile)."""
        unknown = [c for c in collectives if c not in COLLECTIVES]
        if unknown:
            raise UsageError(f"unknown collective(s) {', '.join(unknown)} (known: {', '.join(COLLECTIVES)})")
        kept = [b for b in self.buckets if b.collective in collectives]
        template = [b for b in self.buckets if b.collective == self.buckets[0].collective]
        for c in collectives:
            if not any(b.collective == c for b in kept):
                kept += [Bucket(b.name, c, b.sizes, b.weight) for b in template]
        return Profile(self.name, self.description, tuple(kept), self.guard)

    def bucket_busbw(self, sizes_busbw: Mapping[str, Mapping[int, float]]) -> dict[str, float]:
        """Per bucket key, the geometric mean busbw over its sizes."""
        out: dict[str, float] = {}
        for b in self.buckets:
            per = sizes_busbw.get(b.collective, {})
            vals = [max(per.get(s, 0.0), _TINY) for s in b.sizes]
            out[b.key] = math.exp(sum(math.log(v) for v in vals) / len(vals))
        return out

    def log_score(self, buckets: Mapping[str, float], baseline: Mapping[str, float]) -> float:
        """Weighted mean over buckets of log(busbw / baseline busbw): 0 = as good as the baseline."""
        total = sum(b.weight for b in self.buckets)
        acc = 0.0
        for b in self.buckets:
            acc += b.weight * (math.log(max(buckets.get(b.key, 0.0), _TINY))
                               - math.log(max(baseline.get(b.key, 0.0), _TINY)))
        return acc / total

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "guard": list(self.guard),
                "buckets": [{"name": b.name, "collective": b.collective, "sizes": list(b.sizes),
                             "weight": b.weight} for b in self.buckets]}


def profiles_path():
    return data_dir("tuners") / "profiles.yaml"


def load_profiles(path: str | None = None) -> tuple[dict[str, Profile], str]:
    """All profiles of a profiles file (the shipped one by default) and the default's name."""
    p = str(path or profiles_path())
    data = datafile.load(p)
    check_keys(data, ("schema_version", "default", "profiles"), "profiles file", p, 1,
               required=("schema_version", "profiles"))
    if data["schema_version"] != 1:
        raise InputError("profiles schema_version must be 1", path=p, line=line_of(data, "schema_version"))
    raw = data["profiles"]
    if not isinstance(raw, dict) or not raw:
        raise InputError("profiles must map names to profiles", path=p, line=line_of(data, "profiles"))
    out = {}
    for name, prof in raw.items():
        pline = line_of(raw, name)
        check_keys(prof, ("description", "buckets", "guard"), f"profile {name}", p, pline, required=("buckets",))
        buckets = []
        if not isinstance(prof["buckets"], list) or not prof["buckets"]:
            raise InputError(f"profile {name}: buckets must be a non-empty list", path=p, line=pline)
        for b in prof["buckets"]:
            bline = line_of(b, None, pline)
            check_keys(b, ("name", "collective", "sizes", "weight"), f"a bucket of profile {name}", p, bline,
                       required=("name", "collective", "sizes"))
            if b["collective"] not in COLLECTIVES:
                raise InputError(f"unknown collective {b['collective']!r} (known: {', '.join(COLLECTIVES)})",
                                 path=p, line=line_of(b, "collective", bline))
            if not isinstance(b["sizes"], list) or not b["sizes"]:
                raise InputError("sizes must be a non-empty list", path=p, line=line_of(b, "sizes", bline))
            sizes = tuple(sorted({parse_size(s, where=f"profile {name}", path=p, line=line_of(b, "sizes", bline))
                                  for s in b["sizes"]}))
            weight = b.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                raise InputError("weight must be a positive number", path=p, line=line_of(b, "weight", bline))
            buckets.append(Bucket(str(b["name"]), b["collective"], sizes, float(weight)))
        keys = [bk.key for bk in buckets]
        if len(set(keys)) != len(keys):
            raise InputError(f"profile {name}: two buckets share a name and collective", path=p, line=pline)
        guard = prof.get("guard", [])
        if not isinstance(guard, list) or any(g not in COLLECTIVES for g in guard):
            raise InputError(f"profile {name}: guard must list collectives (known: {', '.join(COLLECTIVES)})",
                             path=p, line=line_of(prof, "guard", pline))
        out[name] = Profile(name, str(prof.get("description", "")).strip(), tuple(buckets), tuple(guard))
    default = data.get("default", next(iter(out)))
    if default not in out:
        raise InputError(f"default profile {default!r} is not defined", path=p, line=line_of(data, "default"))
    return out, default


def get_profile(name: str | None, collectives: Iterable[str] | None = None) -> Profile:
    profiles, default = load_profiles()
    key = name or default
    if key not in profiles:
        raise UsageError(f"unknown workload profile {key!r} (known: {', '.join(profiles)})")
    prof = profiles[key]
    colls = list(collectives or ())
    return prof.restrict(colls) if colls else prof
