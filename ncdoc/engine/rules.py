"""The rule engine: rule metadata, the check-function registry, the facts a check reads, and the run.

A rule is data (rules/*.yaml: code, name, severity, docs) plus either a declarative
condition or the name of a check function registered here with `@check("name")`.
Check functions are pure: they read the Context and return Hits; they never do I/O. What a
check needs is declared with its rule (`needs`, `only_if_set`, per check where a rule has
several) and applied here before the check is called; a fallback rule runs after the others.
"""

from __future__ import annotations

from ncdoc.findings import Finding, Hit, Report, Skip, Skipped, severity_rank
from ncdoc.startup.record import field, Record, record
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

# Facts a rule (or one of its checks) can declare it needs, in its pack (`needs:`) or, for a fact
# needed on one path only, with Context.require: when the fact is missing or unknown the rule is
# skipped with the reason, never passed. "evidence": any run evidence at all (a log, nccl-tests
# output, launch files, pasted node evidence); "ras": an ncclras report or RAS log lines; "diag": NCCL's
# DIAG report lines; "host_output": what commands printed on the job's host (ulimit -a, nvidia-smi).
NEEDS = ("snapshot", "host", "versions", "gpus", "hcas", "net", "pci", "numa", "topology",
         "nccl_version", "log", "tests", "evidence", "env", "job", "ras", "diag", "host_output")
# What a rule's problem needs to matter (`scope:` in its pack; a Hit may override it): "any" job, or only a
# job that spans several nodes (the network between nodes: RDMA ports, HCA and GID selection, the socket
# interface NCCL bootstraps over, GPUDirect RDMA). A multi-node finding on a job known to run on one node
# is reported as info, with the reason (run_rules); with no job facts it keeps its severity.
SCOPES = ("any", "multi-node")
# The needs only a job's output can meet: a rule whose every check needs one of them judges runs, not nodes.
RUN_NEEDS = ("log", "tests", "evidence", "ras", "diag", "host_output")
_RUN_EVIDENCE = {"log": ("nccl_log", "NCCL log"), "tests": ("nccl_tests", "nccl-tests output"),
                 "ras": ("ras", "RAS report (ncclras output or RAS log lines)"),
                 "diag": ("diag", "NCCL DIAG report"), "host_output": ("host_output", "host command output")}


# The layout of rules/compiled.json (Rule as JSON, without its docs) and compiled_docs.json (each rule's
# summary, why, references and example): written by ncdoc.engine.packs, read by ncdoc.engine.ruleset.
COMPILED_SCHEMA = 3
# What each rule's row in rules/compiled.json holds, in order (every Rule field but DOC_FIELDS and example)
COMPILED_FIELDS = ("code", "name", "severity", "stage", "fix", "checks", "when", "message", "needs", "only_if_set",
                   "per_check", "fallback", "aliases", "pack", "env_patch", "env_gate", "scope")
DOC_FIELDS = ("summary", "why", "references", "example")


@record(frozen=True)
class Rule(Record):
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
    needs: tuple[str, ...] = ()     # facts the rule needs (from NEEDS): skipped, with the reason, without one
    only_if_set: tuple[str, ...] = ()   # variables: unless one is set (non-empty), the rule reports nothing
    # a rule whose checks read different facts (the node, a log): each check's own
    # {"needs": (...), "only_if_set": (...)}, applied as above to that check alone
    per_check: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    fallback: bool = False          # runs after the other rules and reads their findings (Context.findings)
    example: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    pack: str = ""                  # which rules/*.yaml file it came from
    env_patch: Mapping[str, str | None] = field(default_factory=dict)  # declarative rules: the fix as env
    # declarative rules: variables one of which must be defined for `when` to hold (derived from it by
    # ncdoc.engine.conditions.env_gate); with none defined the rule reports nothing, unevaluated
    env_gate: tuple[str, ...] = ()
    scope: str = "any"              # from SCOPES: "multi-node" when the problem matters only between nodes

    @property
    def family(self) -> str:
        return FAMILIES.get(self.code[2:3], "other")

    @property
    def docs(self) -> str:
        """Where the rule is documented, in a form that works after `pip install` (the generated pages
        under docs/rules/ are not in the wheel)."""
        return f"ncdoc rule {self.code}"

    def check_gate(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(needs, only_if_set) of one of the rule's checks (its own, in a rule with several)."""
        own = self.per_check.get(name)
        return (tuple(own.get("needs", ())), tuple(own.get("only_if_set", ()))) if own else ((), ())


class _Doc:
    """A documentation field of a Rule loaded from rules/compiled.json, which leaves the docs out: the
    check path reads the rules many times a minute and prints their docs only in `ncdoc rule` and
    reports. The first read of one fills all four from compiled_docs.json, through the loader the
    registry left in the rule (`_docs`); a Rule made any other way holds its docs itself."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, rule, owner=None):
        if rule is None:
            return self
        d = rule.__dict__
        docs = d["_docs"](rule.code)
        for name in DOC_FIELDS:
            d[name] = docs[name]
        del d["_docs"]
        return d[self.name]


for _name in DOC_FIELDS:
    setattr(Rule, _name, _Doc(_name))
del _name


def reads_node(rule: Rule) -> bool:
    """Whether `rule` can judge a node without a job's output: no rule-level need only a run meets,
    and some check (or its condition) that needs none either."""
    # loops, not any() over generators: this runs for every rule on every check
    for n in rule.needs:
        if n in RUN_NEEDS:
            return False
    if not rule.checks:
        return True
    per_check = rule.per_check
    for c in rule.checks:
        own = per_check.get(c)
        for n in (own.get("needs", ()) if own else ()):
            if n in RUN_NEEDS:
                break
        else:
            return True
    return False


def node_rules(rules: Iterable[Rule]) -> list[Rule]:
    """The rules a node check runs (`ncdoc check`): those that read more than NCCL logs or nccl-tests output."""
    return [r for r in rules if reads_node(r)]


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
                 options: Mapping[str, Any] | None = None, cluster: Any = None):
        self.snapshot = snapshot
        # Cross-node rules (rules/cluster.yaml) read many nodes at once: an
        # ncdoc.cluster.facts.ClusterFacts (snapshots and effective envs by node). None on
        # every single-node command, where those rules are left out (engine.selection).
        self.cluster = cluster
        self.env = env if env is not None else (snapshot.env if snapshot else NcclEnv(Status.ok("empty")))
        self.evidence = {k: list(v) for k, v in (evidence or {}).items()}
        self._nccl_version = nccl_version
        self.options = dict(options or {})
        self._topology = _UNSET
        self._job_span = _UNSET
        self._env_map: dict | None = None
        self._missing: dict[str, str | None] = {}
        self.findings: tuple[Finding, ...] = ()    # for a fallback rule: what the other rules reported

    def seeing(self, findings: Iterable[Finding]) -> Context:
        """This context, with the findings of the rules run so far: what a fallback rule reads."""
        view = object.__new__(Context)
        view.__dict__.update(self.__dict__)
        view.findings = tuple(findings)
        return view

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

    @property
    def job_span(self) -> tuple[bool | None, str]:
        """(True, why) when the snapshot's job spans several nodes, (False, why) when one node, (None, "")
        when nothing says (no snapshot, no job facts); see ncdoc.engine.job_facts.job_span."""
        if self._job_span is _UNSET:
            if self.snapshot is None:
                self._job_span = (None, "")
            else:
                from ncdoc.engine.job_facts import job_span
                self._job_span = job_span(self.snapshot)
        return self._job_span

    def require(self, *needs: str) -> None:
        """Raise Skip with the reason when one of `needs` (from NEEDS) is missing: for a fact a check
        needs on one path only (facts needed on every path are declared in the rule's pack)."""
        for need in needs:
            why = self.missing(need)
            if why:
                raise Skip(why)

    def missing(self, need: str) -> str | None:
        """Why fact `need` is unavailable, or None when it is there. Asked for every need of every rule
        (twice: which checks to import, then the run), so each answer is kept: the facts do not change."""
        known = self._missing
        if need in known:
            return known[need]
        why = known[need] = self._missing_now(need)
        return why

    def _missing_now(self, need: str) -> str | None:
        if need in _RUN_EVIDENCE:
            kind, what = _RUN_EVIDENCE[need]
            return None if self.evidence.get(kind) else f"no {what} given"
        if need == "evidence":
            return None if any(self.evidence.values()) else "no NCCL log or nccl-tests output given"
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


def is_set(ctx: Context, names: Iterable[str]) -> bool:
    """Whether one of the variables `names` is set to a non-empty value (NCCL reads an empty one as unset)."""
    env = ctx.env_map
    for name in names:
        v = env.get(name)
        if v is not None and v.value != "":
            return True
    return False


def blocked(ctx: Context, needs: Iterable[str], only_if_set: Iterable[str]) -> str | None:
    """What stops a rule (or one check) before it runs: None, it runs; "" it reports nothing (none of
    `only_if_set` is set, so there is nothing to judge); else the reason it is skipped (a need missing)."""
    if only_if_set and not is_set(ctx, only_if_set):
        return ""
    for need in needs:
        why = ctx.missing(need)
        if why:
            return why
    return None


def runnable_checks(ctx: Context, rules: Iterable[Rule]) -> set[str]:
    """The check functions `rules` will call on `ctx`: those no unset variable or missing fact stops."""
    out: set[str] = set()
    for rule in rules:
        if rule.checks and blocked(ctx, rule.needs, rule.only_if_set) is None:
            for c in rule.checks:           # a loop, not a generator per rule: this runs on every check
                if blocked(ctx, *rule.check_gate(c)) is None:
                    out.add(c)
    return out


def _shares_need(a: Iterable[str], b: Iterable[str]) -> bool:
    """Whether two checks need a fact in common ("evidence", any run evidence, covers a log and nccl-tests)."""
    a, b = set(a), set(b)
    for s in (a, b):
        if "evidence" in s:
            s.update(("log", "tests"))
    return bool(a & b)


def _hits(ctx: Context, rule: Rule, registry: Mapping[str, CheckFn],
          evaluate_when: Callable[[Rule, Context], Iterable[Hit]] | None) -> list | Skipped:
    """One rule's hits on `ctx`, each with the needs of the check that found it; or why it was skipped."""
    why = blocked(ctx, rule.needs, rule.only_if_set)
    if why is not None:
        return Skipped(rule.code, rule.name, why) if why else []
    hits: list[tuple[Hit, tuple[str, ...]]] = []
    if rule.checks:
        # A rule may read several kinds of facts (the node, a log); it is skipped only
        # when every one of its checks lacked its facts.
        reasons: list[str] = []
        for name in rule.checks:
            needs, only_if_set = rule.check_gate(name)
            why = blocked(ctx, needs, only_if_set)
            if why is not None:
                if why:
                    reasons.append(why)
                continue
            fn = registry.get(name)
            if fn is None:
                raise LookupError(f"rule {rule.code} names unknown check function {name!r}")
            needs = rule.needs + needs
            try:
                hits.extend((hit, needs) for hit in fn(ctx))
            except Skip as s:
                reasons.append(s.reason)
        if reasons and len(reasons) == len(rule.checks):
            return Skipped(rule.code, rule.name, "; ".join(dict.fromkeys(reasons)))
    elif rule.when is not None:
        if rule.env_gate and not any(n in ctx.env_map for n in rule.env_gate):
            return []                  # the condition cannot hold: conditions stay unimported on most nodes
        if evaluate_when is None:
            from ncdoc.engine.conditions import evaluate as evaluate_when
        try:
            hits = [(hit, rule.needs) for hit in evaluate_when(rule, ctx)]
        except Skip as s:
            return Skipped(rule.code, rule.name, s.reason)
    return hits


def run_rules(ctx: Context, rules: Iterable[Rule], *, severity_overrides: Mapping[str, str] | None = None,
              evaluate_when: Callable[[Rule, Context], Iterable[Hit]] | None = None,
              checks: Mapping[str, CheckFn] | None = None) -> Report:
    """Run `rules` over `ctx`. A rule (or check) whose `only_if_set` variables are all unset reports
    nothing; one whose needs are missing is skipped with the reason. Fallback rules run last: each
    reads, in ctx.findings, what the checks needing a fact it needs found (for a rule needing a log:
    what the log checks reported).

    `checks` maps check names to functions (default: the registry, CHECKS).
    """
    registry = CHECKS if checks is None else checks
    rules = list(rules)
    overrides = dict(severity_overrides or {})
    outcomes: list = [None] * len(rules)          # per rule, in the given order: its findings or its Skipped
    order = [i for i, r in enumerate(rules) if not r.fallback] + [i for i, r in enumerate(rules) if r.fallback]
    seen: list[tuple[Finding, tuple[str, ...]]] = []        # the findings so far, with their check's needs
    for i in order:
        rule = rules[i]
        rctx = ctx.seeing(f for f, needs in seen if _shares_need(needs, rule.needs)) if rule.fallback else ctx
        got = _hits(rctx, rule, registry, evaluate_when)
        if isinstance(got, Skipped):
            outcomes[i] = got
            continue
        found = []
        for hit, needs in got:
            sev = overrides.get(rule.code) or overrides.get(rule.name) or hit.severity or rule.severity
            if sev == "off":
                continue
            message, original, note = hit.message, "", ""
            if sev != "info" and (hit.scope or rule.scope) == "multi-node" and \
                    not any(n in RUN_NEEDS for n in needs):
                # what a run printed says itself whether the run spanned nodes: only node findings are judged
                multi, why = ctx.job_span
                if multi is False:
                    from ncdoc.engine.job_facts import one_node_note
                    original, sev, note = sev, "info", one_node_note(why)
                    message = f"{message} [{original} on a multi-node job; info here: {note}]"
            f = Finding(code=rule.code, name=rule.name, severity=sev, family=rule.family, message=message,
                        evidence=hit.evidence, fix=hit.fix or rule.fix, docs=rule.docs,
                        env_patch=dict(hit.env_patch), subject=hit.subject or rule.stage,
                        original_severity=original, note=note)
            found.append(f)
            if not rule.fallback:
                seen.append((f, needs))
        outcomes[i] = found
    findings = [f for o in outcomes if type(o) is list for f in o]
    skipped = [o for o in outcomes if type(o) is Skipped]
    if findings:                     # a clean node (most checks) has nothing to order
        stage_rank = {r.code: (STAGES.index(r.stage) if r.stage in STAGES else len(STAGES)) for r in rules}
        findings.sort(key=lambda f: (stage_rank.get(f.code, len(STAGES)), -severity_rank(f.severity), f.code,
                                     f.subject))
    return Report(tuple(findings), tuple(skipped))
