"""The rule engine: rule metadata, the check-function registry, the facts a check reads, and the run.

A rule is data (rules/*.yaml: code, name, severity, docs) plus either a declarative
condition or the name of a check function registered here with `@check("name")`.
Check functions are pure: they read the Context and return Hits; they never do I/O.
"""

from __future__ import annotations

from ncdoc.findings import Finding, Hit, Report, Skip, Skipped, severity_rank
from ncdoc.startup.record import field, record
from ncdoc.snapshot import NcclEnv, Snapshot, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping
    CheckFn = Callable[["Context"], Any]


FAMILIES = {"1": "env", "2": "versions", "3": "topology", "4": "network", "5": "launcher", "6": "performance"}

# The order an expert works in; each rule names its stage, reports are grouped by it.
STAGES = ("rdma-path", "gdr-affinity", "link-health", "bandwidth", "settings")
STAGE_TITLES = {
    "rdma-path": "RDMA path or TCP fallback",
    "gdr-affinity": "GPUDirect RDMA, GPU-NIC affinity and rails",
    "link-health": "Link health",
    "bandwidth": "Bandwidth against what this hardware should reach",
    "settings": "Settings",
}

# Facts a rule can declare it needs; when the fact is missing or unknown the rule is skipped.
NEEDS = ("snapshot", "host", "versions", "gpus", "hcas", "net", "pci", "numa", "topology",
         "nccl_version", "log", "tests", "env")


@record(frozen=True)
class Rule:
    code: str                       # "NC1001": NC + family digit + 3 digits, permanent
    name: str                       # kebab-case, names the problem
    severity: str                   # default severity: error | warning | info
    summary: str                    # one line
    why: str = ""                   # why it matters
    fix: str = ""                   # how to fix (imperative)
    stage: str = "settings"
    references: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()    # registered check-function names (node side, evidence side, ...)
    when: Any = None                # declarative condition (see ncdoc.engine.conditions)
    message: str = ""               # message template for declarative rules
    needs: tuple[str, ...] = ()
    example: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    pack: str = ""                  # which rules/*.yaml file it came from
    env_patch: Mapping[str, str | None] = field(default_factory=dict)  # declarative rules: the fix as env

    @property
    def family(self) -> str:
        return FAMILIES.get(self.code[2:3], "other")

    @property
    def docs(self) -> str:
        return f"docs/rules/{self.code}-{self.name}.md"


CHECKS: dict = {}   # name -> function(Context) -> Iterable[Hit]


def check(name: str) -> "Callable[[CheckFn], CheckFn]":
    """Register a check function under `name` (what a rule's `check:` key refers to)."""
    def register(fn: CheckFn) -> CheckFn:
        if name in CHECKS and CHECKS[name] is not fn:
            raise ValueError(f"check function {name!r} registered twice")
        CHECKS[name] = fn
        return fn
    return register


_UNSET = object()


class Context:
    """Everything a check may read. Built once per command; checks never mutate it."""

    def __init__(self, *, snapshot: Snapshot | None = None, env: NcclEnv | None = None,
                 evidence: Mapping[str, list[Any]] | None = None, nccl_version: str | None = None,
                 options: Mapping[str, Any] | None = None):
        self.snapshot = snapshot
        self.env = env if env is not None else (snapshot.env if snapshot else NcclEnv(Status.ok("empty")))
        self.evidence = {k: list(v) for k, v in (evidence or {}).items()}
        self._nccl_version = nccl_version
        self.options = dict(options or {})
        self._topology = _UNSET
        self._env_map: dict | None = None

    @property
    def env_map(self) -> dict[str, Any]:
        """Effective NCCL env by name: NAME -> EnvValue (value, source, line)."""
        if self._env_map is None:
            self._env_map = {v.name: v for v in self.env.values}
        return self._env_map

    # -- evidence by kind (parsed NCCL logs, nccl-tests outputs, launch files)
    @property
    def logs(self) -> list[Any]:
        return self.evidence.get("nccl_log", [])

    @property
    def tests(self) -> list[Any]:
        return self.evidence.get("nccl_tests", [])

    @property
    def nccl_version(self) -> str | None:
        """Best-known NCCL version: given explicitly, else from a log, else the node's libnccl."""
        if self._nccl_version:
            return self._nccl_version
        for log in self.logs:
            v = getattr(log, "nccl_version", None)
            if v:
                return v
        if self.snapshot and self.snapshot.versions.nccl:
            return self.snapshot.versions.nccl
        return None

    @property
    def topology(self):
        """The classified topology of the snapshot (None without a snapshot), computed once."""
        if self._topology is _UNSET:
            if self.snapshot is None:
                self._topology = None
            else:
                from ncdoc.topology import classify
                self._topology = classify(self.snapshot)
        return self._topology

    def missing(self, need: str) -> str | None:
        """Why fact `need` is unavailable, or None when it is there."""
        if need in ("log", "tests"):
            kind = "nccl_log" if need == "log" else "nccl_tests"
            return None if self.evidence.get(kind) else f"no {'NCCL log' if need == 'log' else 'nccl-tests output'} given"
        if need == "env":
            return None
        if need == "nccl_version":
            return None if self.nccl_version else "NCCL version unknown (no libnccl found, no log given)"
        if self.snapshot is None:
            return "no node snapshot (run on the node, or pass --snapshot)"
        if need == "snapshot":
            return None
        if need == "topology":
            topo = self.topology
            if topo is None or not topo.status.known:
                return f"topology unknown: {topo.status.reason if topo else 'no snapshot'}"
            return None
        section = getattr(self.snapshot, need)
        status: Status = section.status
        if not status.known:
            return f"{need} unknown: {status.reason}"
        return None


def run_rules(ctx: Context, rules: Iterable[Rule], *, severity_overrides: Mapping[str, str] | None = None,
              evaluate_when: Callable[[Rule, Context], Iterable[Hit]] | None = None,
              checks: Mapping[str, CheckFn] | None = None) -> Report:
    """Run `rules` over `ctx`. Rules whose needs are missing are skipped with the reason.

    `checks` maps check names to functions (default: the registry, CHECKS); a caller may
    stand in for checks it knows cannot run, without importing their modules.
    """
    registry = CHECKS if checks is None else checks
    rules = list(rules)
    overrides = dict(severity_overrides or {})
    if evaluate_when is None and any(r.when is not None and not r.checks for r in rules):
        from ncdoc.engine.conditions import evaluate as evaluate_when
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        reason = next((r for r in (ctx.missing(n) for n in rule.needs) if r), None)
        if reason:
            skipped.append(Skipped(rule.code, rule.name, reason))
            continue
        hits: list[Hit] = []
        reasons: list[str] = []
        if rule.checks:
            # A rule may read several kinds of facts (the node, a log); it is skipped only
            # when every one of its checks lacked its facts.
            for name in rule.checks:
                fn = registry.get(name)
                if fn is None:
                    raise LookupError(f"rule {rule.code} names unknown check function {name!r}")
                try:
                    hits.extend(fn(ctx))
                except Skip as s:
                    reasons.append(s.reason)
            if reasons and len(reasons) == len(rule.checks):
                skipped.append(Skipped(rule.code, rule.name, "; ".join(dict.fromkeys(reasons))))
                continue
        elif rule.when is not None and evaluate_when is not None:
            try:
                hits = list(evaluate_when(rule, ctx))
            except Skip as s:
                skipped.append(Skipped(rule.code, rule.name, s.reason))
                continue
        for hit in hits:
            sev = overrides.get(rule.code) or overrides.get(rule.name) or hit.severity or rule.severity
            if sev == "off":
                continue
            findings.append(Finding(
                code=rule.code, name=rule.name, severity=sev, family=rule.family, message=hit.message,
                evidence=hit.evidence, fix=hit.fix or rule.fix, docs=rule.docs,
                env_patch=dict(hit.env_patch), subject=hit.subject or rule.stage,
            ))
    stage_rank = {r.code: (STAGES.index(r.stage) if r.stage in STAGES else len(STAGES)) for r in rules}
    findings.sort(key=lambda f: (stage_rank.get(f.code, len(STAGES)), -severity_rank(f.severity), f.code, f.subject))
    return Report(tuple(findings), tuple(skipped))
