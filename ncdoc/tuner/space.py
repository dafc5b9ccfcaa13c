"""Search spaces: which NCCL variables a study may set, to which values, under which conditions.

A space file (tuners/spaces/<fabric>.yaml, or the user's own with --space) is read and
validated strictly by space_file.load_space (which imports this module, never the reverse),
then narrowed to the hardware and NCCL version at hand (`for_hardware`): values the hardware
cannot run, values the release does not know, and variables that do not touch
the measured collectives drop out before the study starts, so the sampler never spends a
trial on them. Every variable keeps "unset" (NCCL's default) as a choice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ncdoc.errors import UsageError
from ncdoc.nccl.parse import version_tuple

UNSET = "unset"
FABRICS = ("ib", "roce", "socket")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
CAPABILITIES = ("multi_node", "single_node", "multi_gpu", "one_gpu_per_node", "multi_nic", "nvswitch",
                "nvls", "collnet", "rdma", "ib", "roce", "socket", "sm70", "sm80", "sm90", "sm100")
CONSTRAINT_OPS = ("le", "product_le", "not_both")
CONDITION_OPS = ("in", "not_in")


@dataclass(frozen=True)
class Hardware:
    """What the space is narrowed to: the measured cluster and its NCCL release."""
    fabric: str                      # ib | roce | socket
    nodes: int
    gpus_per_node: int
    nics_per_node: int = 1
    nvswitch: bool = False
    nvls: bool = False
    sm: int | None = None            # compute capability x10
    nccl_version: str | None = None
    collnet: bool = False

    def capabilities(self) -> frozenset[str]:
        caps = {self.fabric}
        caps.add("multi_node" if self.nodes > 1 else "single_node")
        caps.add("multi_gpu" if self.gpus_per_node > 1 else "one_gpu_per_node")
        if self.fabric in ("ib", "roce"):
            caps.add("rdma")
        if self.nics_per_node > 1:
            caps.add("multi_nic")
        if self.nvswitch:
            caps.add("nvswitch")
        if self.nvls and self.gpus_per_node > 1:
            caps.add("nvls")
        if self.collnet:
            caps.add("collnet")
        for level in (70, 80, 90, 100):
            if self.sm is None or self.sm >= level:   # unknown GPU: do not rule values out
                caps.add(f"sm{level}")
        return frozenset(caps)


@dataclass(frozen=True)
class Choice:
    value: str
    requires: tuple[str, ...] = ()
    collectives: tuple[str, ...] = ()
    min_nccl: str | None = None
    max_nccl: str | None = None


@dataclass(frozen=True)
class Condition:
    var: str
    op: str                          # in | not_in
    values: tuple[str, ...]

    def holds(self, params: Mapping[str, str]) -> bool:
        v = params.get(self.var, UNSET)
        return (v in self.values) if self.op == "in" else (v not in self.values)


@dataclass(frozen=True)
class Variable:
    name: str
    choices: tuple[Choice, ...]      # "unset" first
    requires: tuple[str, ...] = ()
    collectives: tuple[str, ...] = ()
    min_nccl: str | None = None
    max_nccl: str | None = None
    when: tuple[Condition, ...] = ()
    default: float | None = None     # NCCL's value when unset, for constraints
    screen: tuple[str, ...] = ()     # the values screening tries alone (none: every value); the
    #                                  others are tried on top of the best point, in refinement

    @property
    def screened(self) -> tuple[str, ...]:
        wanted = tuple(v for v in self.screen if v in self.values)
        return wanted or tuple(v for v in self.values if v != UNSET)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.value for c in self.choices)


@dataclass(frozen=True)
class Constraint:
    op: str
    vars: tuple[str, ...]
    limit: float | None = None
    bad: tuple[tuple[str, ...], ...] = ()   # not_both: per variable, the values that conflict

    def violated(self, params: Mapping[str, str], space: "SearchSpace") -> str | None:
        if self.op == "not_both":
            if all(params.get(v, UNSET) in bad for v, bad in zip(self.vars, self.bad)):
                return " with ".join(f"{v}={params.get(v)}" for v in self.vars) + " cannot work together"
            return None
        nums = [space.numeric(v, params.get(v, UNSET)) for v in self.vars]
        if any(n is None for n in nums):
            return None
        if self.op == "le" and nums[0] > nums[1]:
            return f"{self.vars[0]} ({nums[0]:g}) must not exceed {self.vars[1]} ({nums[1]:g})"
        if self.op == "product_le" and self.limit is not None:
            prod = 1.0
            for n in nums:
                prod *= n
            if prod > self.limit:
                return f"{' x '.join(self.vars)} = {prod:g} exceeds {self.limit:g}"
        return None


@dataclass(frozen=True)
class SearchSpace:
    name: str
    fabric: str
    variables: tuple[Variable, ...]
    constraints: tuple[Constraint, ...] = ()
    starts: tuple[tuple[tuple[str, str], ...], ...] = ()   # known-good points measured first
    description: str = ""
    source: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)

    def variable(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    @property
    def size(self) -> int:
        n = 1
        for v in self.variables:
            n *= len(v.choices)
        return n

    def numeric(self, name: str, value: str) -> float | None:
        if value == UNSET:
            var = next((v for v in self.variables if v.name == name), None)
            return var.default if var else None
        try:
            return float(int(value, 0))
        except ValueError:
            return None

    def for_hardware(self, hw: Hardware, collectives: Iterable[str], *,
                     exclude: Callable[[str, str], str | None] | None = None,
                     rename: Callable[[str], tuple[str, str] | None] | None = None) -> "SearchSpace":
        """The space narrowed to `hw` and the measured `collectives`; notes say what dropped out.

        `rename(name)` -> (new name, why) replaces a variable (a deprecated one by its successor);
        `exclude(name, value)` -> why drops a value that must not be recommended (ncdoc.tuner.safety).
        """
        caps, colls, notes = hw.capabilities(), set(collectives), []
        version = version_tuple(hw.nccl_version)

        def fits(requires: tuple[str, ...], cols: tuple[str, ...], lo: str | None, hi: str | None) -> str | None:
            missing = [r for r in requires if r not in caps]
            if missing:
                return "needs " + ", ".join(missing)
            if cols and not colls.intersection(cols):
                return "only affects " + ", ".join(cols)
            if version and lo and version < (version_tuple(lo) or ()):
                return f"needs NCCL >= {lo}"
            if version and hi and version > (version_tuple(hi) or ()):
                return f"removed after NCCL {hi}"
            return None

        kept: list[Variable] = []
        renamed: dict[str, str] = {}
        for var in self.variables:
            why = fits(var.requires, var.collectives, var.min_nccl, var.max_nccl)
            if why:
                notes.append(f"{var.name} not searched: {why}")
                continue
            new = rename(var.name) if rename else None
            if new:
                notes.append(f"{var.name} searched as {new[0]}: {new[1]}")
                renamed[var.name] = new[0]
                var = replace(var, name=new[0])
            choices = []
            for c in var.choices:
                why = fits(c.requires, c.collectives, c.min_nccl, c.max_nccl) if c.value != UNSET else None
                if not why and exclude and c.value != UNSET:
                    why = exclude(var.name, c.value)
                if why:
                    notes.append(f"{var.name}={c.value} not searched: {why}")
                else:
                    choices.append(c)
            if len(choices) > 1:
                kept.append(replace(var, choices=tuple(choices)))
            elif len(var.choices) > 1:
                notes.append(f"{var.name} not searched: no value left to try")
        if renamed:
            kept = [replace(v, when=tuple(replace(w, var=renamed.get(w.var, w.var)) for w in v.when)) for v in kept]
        names = {v.name for v in kept}
        kept = [replace(v, when=tuple(w for w in v.when if w.var in names)) for v in kept]
        cons = tuple(replace(c, vars=tuple(renamed.get(v, v) for v in c.vars)) for c in self.constraints)
        cons = tuple(c for c in cons if all(v in names for v in c.vars))
        values = {v.name: set(v.values) for v in kept}
        starts = []
        for start in self.starts:
            point = tuple((renamed.get(k, k), v) for k, v in start if renamed.get(k, k) in names)
            if point and all(v in values[k] for k, v in point):
                starts.append(point)
        if not kept:
            raise UsageError(f"search space {self.name!r} has nothing left to search on this hardware "
                             f"({'; '.join(notes) or 'no variables'})")
        return replace(self, variables=tuple(kept), constraints=cons, starts=tuple(starts), notes=tuple(notes))

    def only(self, names: Iterable[str]) -> "SearchSpace":
        """The same space searching only `names` (the others stay at their baseline value)."""
        keep = set(names)
        variables = tuple(replace(v, when=tuple(w for w in v.when if w.var in keep))
                          for v in self.variables if v.name in keep)
        cons = tuple(c for c in self.constraints if all(v in keep for v in c.vars))
        return replace(self, variables=variables, constraints=cons,
                       starts=tuple(p for p in self.starts if all(k in keep for k, _ in p)))

    # ---- sampling
    def active(self, var: Variable, params: Mapping[str, str]) -> bool:
        return all(c.holds(params) for c in var.when)

    def suggest(self, trial: Any) -> dict[str, str]:
        """Ask an Optuna trial for one value per active variable; inactive ones stay unset."""
        params: dict[str, str] = {}
        for var in self.variables:
            if self.active(var, params):
                params[var.name] = trial.suggest_categorical(var.name, list(var.values))
        return params

    def complete(self, params: Mapping[str, str]) -> dict[str, str]:
        """Every variable with a value: inactive or missing ones are unset."""
        out: dict[str, str] = {}
        for var in self.variables:
            v = params.get(var.name, UNSET)
            out[var.name] = v if self.active(var, out) else UNSET
        return out

    def violations(self, params: Mapping[str, str]) -> list[str]:
        full = self.complete(params)
        return [msg for c in self.constraints if (msg := c.violated(full, self))]

    def grid(self) -> dict[str, list[str]]:
        return {v.name: list(v.values) for v in self.variables}

    def fingerprint(self) -> str:
        data = [(v.name, v.values, [(c.var, c.op, c.values) for c in v.when]) for v in self.variables]
        data.append([(c.op, c.vars, c.limit, c.bad) for c in self.constraints])
        return hashlib.sha256(json.dumps(data, default=list).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fabric": self.fabric, "source": self.source,
                "variables": {v.name: list(v.values) for v in self.variables},
                "conditional": {v.name: [f"{c.var} {c.op} {list(c.values)}" for c in v.when]
                                for v in self.variables if v.when},
                "constraints": [f"{c.op} {list(c.vars)}" for c in self.constraints],
                "size": self.size, "notes": list(self.notes)}


def apply_params(base: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """The environment a trial runs with: `base`, with each searched variable set or removed."""
    env = dict(base)
    for name, value in params.items():
        if value == UNSET:
            env.pop(name, None)
        else:
            env[name] = value
    return env
