"""The triage use case: "why is all-reduce at a third of line rate?"

Takes whatever the user has (NCCL_DEBUG=INFO logs, nccl-tests output, launch scripts and
env files, `nvidia-smi topo -m`, ibv_devinfo / ibstat / ibstatus / show_gids, topology
XML, a snapshot), reads each with the parser for its kind, merges the node evidence into
one Snapshot and the settings into one environment, runs every rule (node, env and
evidence packs together) and orders the answer the way an expert checks: RDMA path, then
GPUDirect RDMA and affinity, link health, bandwidth against expectation, settings.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

from ncdoc.nccl.bandwidth import Expectation
from ncdoc.checks.evidence_common import NodeEvidence
from ncdoc.engine.rules import Context, Rule, run_rules
from ncdoc.errors import InputError, UsageError
from ncdoc.findings import Finding, Report
from ncdoc.snapshot import EnvValue, NcclEnv, Snapshot, Status
from ncdoc.startup.record import field, record, replace

SCHEMA_VERSION = 1


@record
class TriageInput:
    path: str
    kind: str                       # what detect_kind said
    read_as: tuple[str, ...] = ()   # the parsers that found something in it ("nccl_log", "nccl_tests", ...)
    notes: tuple[str, ...] = ()
    detected: str = ""              # why it was taken for its kind: how many lines bear the sign, what else

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "read_as": list(self.read_as), "notes": list(self.notes),
                "detected": self.detected}


@record
class Gathered:
    """Everything read from the inputs, before any rule runs."""
    inputs: tuple[TriageInput, ...] = ()
    logs: tuple[Any, ...] = ()
    tests: tuple[Any, ...] = ()
    launch: tuple[Any, ...] = ()
    ras: tuple[Any, ...] = ()       # RAS reports (ncclras output, RAS lines of logs)
    diag: tuple[Any, ...] = ()      # NCCL DIAG reports
    host: tuple[Any, ...] = ()      # host command output (ulimit -a, nvidia-smi, driver versions)
    snapshot: Snapshot | None = None
    env: NcclEnv = field(default_factory=lambda: NcclEnv(Status.ok("triage")))
    node: tuple[NodeEvidence, ...] = ()
    texts: dict[str, Any] = field(default_factory=dict)   # path -> its Source (lines_at), to quote verbatim


@record
class TriageResult:
    inputs: tuple[TriageInput, ...]
    report: Report
    facts: dict[str, Any]
    expectation: Expectation
    verdict: Finding | None
    stage_by_code: dict[str, str] = field(default_factory=dict)
    observed: frozenset[str] = frozenset()     # "code:subject" of findings backed by an observed failure
    conclusion: dict[str, Any] = field(default_factory=lambda: {"state": "no_problem", "reasons": [], "needs": []})

    def exit_code(self, fail_on: str = "error") -> int:
        return 1 if fail_on != "none" and self.report.fails(fail_on) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "inputs": [i.to_dict() for i in self.inputs],
            "verdict": self.finding_dict(self.verdict) if self.verdict else None,
            "conclusion": dict(self.conclusion),
            "findings": [self.finding_dict(f) for f in self.report.findings],
            "skipped": [s.to_dict() for s in self.report.skipped],
            "facts": self.facts,
        }

    def stage_of(self, f: Finding) -> str:
        return self.stage_by_code.get(f.code, "")

    def finding_dict(self, f: Finding) -> dict[str, Any]:
        d = f.to_dict()
        d["stage"] = self.stage_of(f)
        d["observed_failure"] = f"{f.code}:{f.subject}" in self.observed
        d["evidence"] = [dict(e.to_dict(), where=e.where()) for e in f.evidence]
        return d


def quote_verbatim(report: Report, texts: dict[str, Any]) -> Report:
    """Evidence that names a file and line shows that line as it is in the file (a streamed file's lines are
    read again, all of a file's in one pass)."""
    wanted: dict[str, set[int]] = {}
    for f in report.findings:
        for e in f.evidence:
            if e.line and e.source in texts:
                wanted.setdefault(e.source, set()).add(e.line)
    found = {path: texts[path].lines_at(lines) for path, lines in wanted.items()}

    def fix(e):
        got = found.get(e.source)
        line = got.get(e.line) if got and e.line else None
        if line is None:
            return e
        raw = line.strip()
        return replace(e, text=raw if len(raw) <= 300 else raw[:297] + "...") if raw else e
    findings = tuple(replace(f, evidence=tuple(fix(e) for e in f.evidence)) for f in report.findings)
    return replace(report, findings=findings)


def read_evidence(paths: Sequence[str], *, snapshot: str | None = None, example: str | None = None,
                  env: Sequence[str] = (), jobs: int | None = None, plan: Any = None) -> Gathered:
    """Read every input with the reader of its kind (ncdoc.importers.kinds). A file of no known kind among
    several is skipped with a note (kind "unknown"); InputError (exit 2) when an input cannot be read, when
    the one input is of no known kind or none is usable, or when a known kind fails to parse. A large run
    file is read by `jobs` processes (None: one per core; `plan`, an ncdoc.evidence.run_scan.ScanPlan, says
    it all)."""
    from ncdoc.importers import merge
    from ncdoc.importers.inputs import named, open_source
    from ncdoc.importers.kinds import detection, read_source
    from ncdoc.usecases.node_context import load_node

    if not paths and not snapshot and not example:
        raise UsageError("give at least one evidence file (or --snapshot / --example)")
    inputs: list[TriageInput] = []
    snaps: list[Snapshot] = []
    if example:
        snaps.append(load_node(example=example))
        inputs.append(TriageInput(f"example:{example}", "snapshot_json", ("snapshot",), (), "given with --example"))
    if snapshot:
        snaps.append(load_node(snapshot=snapshot))
        inputs.append(TriageInput(snapshot, "snapshot_json", ("snapshot",), (), "given with --snapshot"))
    alone = len(paths) + bool(snapshot) + bool(example) < 2
    texts: dict[str, Any] = {}
    read: list[tuple[str, Any, Any]] = []          # (path, Reading, its Source)
    unknown: list[InputError] = []
    plan = _plan(jobs, plan)
    for path in map(str, paths):
        source = open_source(path, plan)           # unusable (missing, empty, binary): exit 2, even among others
        try:
            found = detection(source.sample)
        except InputError as exc:
            if alone:
                raise named(exc, path) from None
            # one unreadable paste among several must not lose the others' answer
            unknown.append(named(exc, path))
            inputs.append(TriageInput(path, "unknown", (), (f"skipped: {exc.message}",)))
            continue
        reading = read_source(found.kind, source)
        texts[path] = source
        inputs.append(TriageInput(path, reading.kind, reading.read_as, reading.notes, found.why))
        read.append((path, reading, source))
    if unknown and all(i.kind == "unknown" for i in inputs):
        raise unknown[0]                # nothing usable at all: exit 2 as for a single unknown file

    node_ev: list[NodeEvidence] = []
    for path, reading, source in read:
        for imp in reading.nodes:
            snaps.append(imp.snapshot)
            hs = imp.snapshot.hcas.status
            lines = () if reading.node_lines else source.lines
            node_ev.append(NodeEvidence(path, imp.kind, imp.tool, tuple(imp.notes), hs.state, hs.reason, lines,
                                        reading.node_lines))
    logs = tuple(x for _, r, _ in read for x in r.logs)
    tests = tuple(x for _, r, _ in read for x in r.tests)
    launch = tuple(x for _, r, _ in read for x in r.launch)
    ras = tuple(x for _, r, _ in read for x in r.ras)
    diag = tuple(x for _, r, _ in read for x in r.diag)
    host = tuple(x for _, r, _ in read for x in r.host)
    snap = None
    for s in snaps:
        snap = s if snap is None else merge(snap, s)
    nenv = build_env(snap, logs, launch, env, tests)
    if snap is not None:
        snap = snap.replace(env=nenv)
    return Gathered(tuple(inputs), logs, tests, launch, ras, diag, host, snap, nenv, tuple(node_ev), texts)


def _plan(jobs: int | None, plan: Any) -> Any:
    """How a large run file is read: `plan` as given, else `jobs` processes (None: as many as pay, decided when
    a file is large enough to be cut: ScanPlan.default_jobs)."""
    from ncdoc.evidence.run_scan import ScanPlan
    if plan is not None:
        return plan
    if jobs is not None and jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return ScanPlan(jobs=jobs or 0)


def _log_env(log: Any) -> list[EnvValue]:
    """What a log says the environment set ("NCCL_X set by environment to Y"), with that line."""
    out = []
    book = getattr(log, "evidence", None) or {}
    for name, value in (getattr(log, "env", None) or {}).items():
        ev = book.get("env:" + name) or ()
        out.append(EnvValue(name, value, getattr(log, "source", "") or "log", ev[0].line if ev else None))
    return out


def _tests_env(tests: Any) -> list[EnvValue]:
    """The env an nccl-tests -J file recorded for its run."""
    src = getattr(tests, "source", "") or "nccl-tests"
    return [EnvValue(k, str(v), src) for k, v in (getattr(tests, "env", None) or {}).items()]


def build_env(snapshot: Snapshot | None, logs: Sequence[Any], launch: Sequence[Any],
              pairs: Sequence[str], tests: Sequence[Any] = ()) -> NcclEnv:
    """The job's env, layered as every command layers it (envfiles/layers.job_env): --env (`pairs`) beats
    launch files (a later one on the command line beats an earlier one), which beat what logs and
    nccl-tests JSON report, which beat the snapshot. The losers are kept as shadowed."""
    from ncdoc.envfiles.layers import job_env
    env = job_env(snapshot.env if snapshot is not None else None, env=pairs,
                  files=[lf.to_nccl_env() for lf in launch],
                  reported=[_log_env(log) for log in logs] + [_tests_env(t) for t in tests], source="triage")
    return env if env is not None else NcclEnv(Status.ok("triage"))


# ---------------------------------------------------------------- running the rules

def load_rules(ctx: Context | None = None) -> list[Rule]:
    """Every rule, with the modules of the checks that will run on `ctx` imported (all of them without one):
    a log alone never imports the checks of node evidence, RAS reports or host output."""
    from ncdoc.engine.ruleset import load
    rs = load()
    rules = list(rs)
    missing = rs.ensure_checks(rules, ctx)
    if missing:
        raise LookupError(f"rules name check functions nothing registers: {', '.join(sorted(missing))}")
    return rules


def build_context(ev: Gathered, *, nic_gbps: float | None = None, nics: int | None = None,
                  nodes: int | None = None) -> Context:
    if nic_gbps is not None and nic_gbps <= 0:
        raise UsageError("--nic-gbps must be a positive number")
    if nics is not None and nics <= 0:
        raise UsageError("--nics must be a positive number")
    if nodes is not None and nodes <= 0:
        raise UsageError("--nodes must be a positive number")
    evidence = {"nccl_log": list(ev.logs), "nccl_tests": list(ev.tests), "launch": list(ev.launch),
                "node_evidence": list(ev.node), "ras": list(ev.ras), "diag": list(ev.diag),
                "host_output": list(ev.host)}
    options = {k: v for k, v in (("nic_gbps", nic_gbps), ("nics", nics), ("nodes", nodes)) if v is not None}
    return Context(snapshot=ev.snapshot, env=ev.env, evidence=evidence, options=options)


def failure_backed(f: Finding, failures: frozenset[tuple[str, int]]) -> bool:
    """True when the finding's evidence quotes an observed failure, not only a state of the system."""
    return any((e.source, e.line) in failures or _failure_warn(e.text) for e in f.evidence if e.line)


def _failure_warn(text: str) -> bool:
    """A quoted WARN line whose message is a failure, not a probe's note ("Failed to open libibverbs.so")."""
    from ncdoc.evidence.nccl_log_errors import classify_error, is_failure_kind
    at = f" {text} ".find(" NCCL WARN ")
    if at < 0:
        return False
    cls = classify_error(text[at + len("NCCL WARN "):].strip())
    return cls is None or is_failure_kind(cls.kind)


def pick_verdict(report: Report, failures: frozenset[tuple[str, int]] = frozenset(),
                 observed: frozenset[str] | None = None) -> Finding | None:
    """The most likely cause: the first error in the expert's order, else the first warning. Within a
    severity a finding backed by an observed failure (a WARN line, a failed test) comes before one that
    only describes a state: "Connect to ... failed : No route to host" outranks "no RDMA device"."""
    for sev in ("error", "warning"):
        same = [f for f in report.findings if f.severity == sev]
        backed = [f for f in same if (f"{f.code}:{f.subject}" in observed if observed is not None
                                      else failure_backed(f, failures))]
        if backed or same:
            return _named_cause_first(backed or same)[0]
    return None


# Rules that only say a run failed or an error went unexplained: a finding that quotes the same failure line
# and names its cause comes first ("fabric-manager" before "nccl-tests-failed" for one CUDA error 802).
GENERIC_RULES = frozenset({"nccl-tests-failed", "unexplained-nccl-warning"})


def _named_cause_first(findings: list[Finding]) -> list[Finding]:
    def lines(f: Finding) -> set:
        return {(e.source, e.line) for e in f.evidence if e.line}
    specific = [f for f in findings if f.name not in GENERIC_RULES]
    quoted = set().union(*(lines(f) for f in specific)) if specific else set()
    return sorted(findings, key=lambda f: f.name in GENERIC_RULES and bool(lines(f) & quoted))


# A check that cannot judge says so: severity info, its message starting with this, its fix naming what
# would decide it (a flag, an input, a rerun).
INCONCLUSIVE = "inconclusive: "
# Rules whose skip, when the run's output is there, leaves the bandwidth unjudged
_JUDGES_BANDWIDTH = frozenset({"busbw-below-line-rate"})


def conclusion(report: Report, verdict: Finding | None, ev: Gathered) -> dict[str, Any]:
    """What the answer rests on: "problem" (the verdict), "inconclusive" (what could not be judged, and the
    input or flag that would decide it), or "no_problem" (nothing found, and nothing left undecided)."""
    if verdict is not None:
        return {"state": "problem", "reasons": [], "needs": []}
    reasons, needs = [], []
    for f in report.findings:
        if f.severity == "info" and f.message.startswith(INCONCLUSIVE):
            reasons.append(f.message[len(INCONCLUSIVE):])
            if f.fix:
                needs.append(f.fix)
    measured = any(getattr(t, "rows", ()) for t in ev.tests)
    for sk in report.skipped:
        if sk.name in _JUDGES_BANDWIDTH and measured:
            reasons.append(f"busbw was not compared with what the hardware should reach ({sk.reason})")
            needs.append("Give the NICs' rate and count (--nic-gbps N --nics K), or node evidence that shows them "
                         "(ibstat, ibv_devinfo -v, an ncdoc snapshot).")
    if reasons:
        return {"state": "inconclusive", "reasons": list(dict.fromkeys(reasons)), "needs": list(dict.fromkeys(needs))}
    return {"state": "no_problem", "reasons": [], "needs": []}


def triage(paths: Sequence[str], *, snapshot: str | None = None, example: str | None = None,
           env: Sequence[str] = (), nic_gbps: float | None = None, nics: int | None = None,
           nodes: int | None = None, rules: Sequence[Rule] | None = None, jobs: int | None = None,
           plan: Any = None) -> TriageResult:
    from ncdoc.checks.evidence_common import job_expectation
    from ncdoc.triage.facts import build_facts, observed_failures

    ev = read_evidence(paths, snapshot=snapshot, example=example, env=env, jobs=jobs, plan=plan)
    ctx = build_context(ev, nic_gbps=nic_gbps, nics=nics, nodes=nodes)
    rules = list(rules) if rules is not None else load_rules(ctx)
    from ncdoc.triage.evidence_lines import locate, once
    report = once(locate(quote_verbatim(run_rules(ctx, rules), ev.texts), ev.node))
    exp = job_expectation(ctx)
    facts = build_facts(ctx, ev, exp)
    failures = observed_failures(ev)
    observed = frozenset(f"{f.code}:{f.subject}" for f in report.findings if failure_backed(f, failures))
    verdict = pick_verdict(report, failures, observed)
    return TriageResult(ev.inputs, report, facts, exp, verdict, {r.code: r.stage for r in rules}, observed,
                        conclusion(report, verdict, ev))


__all__ = ["SCHEMA_VERSION", "TriageInput", "Gathered", "TriageResult", "read_evidence", "build_env",
           "build_context", "load_rules", "pick_verdict", "failure_backed", "conclusion", "INCONCLUSIVE",
           "triage"]
