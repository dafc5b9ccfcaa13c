"""The triage use case: "why is all-reduce at a third of line rate?"

Takes whatever the user has (NCCL_DEBUG=INFO logs, nccl-tests output, launch scripts and
env files, `nvidia-smi topo -m`, ibv_devinfo / ibstat / ibstatus / show_gids, topology
XML, a snapshot), reads each with the parser for its kind, merges the node evidence into
one Snapshot and the settings into one environment, runs every rule (node, env and
evidence packs together) and orders the answer the way an expert checks: RDMA path, then
GPUDirect RDMA and affinity, link health, bandwidth against expectation, settings.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ncdoc.nccl.bandwidth import Expectation
from ncdoc.checks.evidence_common import NodeEvidence
from ncdoc.engine.rules import Context, Rule, run_rules
from ncdoc.errors import InputError, UsageError
from ncdoc.findings import Finding, Report
from ncdoc.snapshot import EnvValue, NcclEnv, Snapshot, Status
from ncdoc.triage.inputs import (_embedded_node, _launch_of_run, _parse_run_file, _parse_run_text, _read,
                                 _tests_json)

SCHEMA_VERSION = 1
NODE_KINDS = ("snapshot_json", "nccl_topo_xml", "hwloc_xml", "topo_matrix", "ibv_devinfo")
RUN_KINDS = ("nccl_log", "nccl_tests")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TriageInput:
    path: str
    kind: str                       # what detect_kind said
    read_as: tuple[str, ...] = ()   # the parsers that found something in it ("nccl_log", "nccl_tests", ...)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "read_as": list(self.read_as), "notes": list(self.notes)}


@dataclass(frozen=True)
class Gathered:
    """Everything read from the inputs, before any rule runs."""
    inputs: tuple[TriageInput, ...] = ()
    logs: tuple[Any, ...] = ()
    tests: tuple[Any, ...] = ()
    launch: tuple[Any, ...] = ()
    snapshot: Snapshot | None = None
    env: NcclEnv = field(default_factory=lambda: NcclEnv(Status.ok("triage")))
    node: tuple[NodeEvidence, ...] = ()
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)   # path -> lines, to quote verbatim


@dataclass(frozen=True)
class TriageResult:
    inputs: tuple[TriageInput, ...]
    report: Report
    facts: dict[str, Any]
    expectation: Expectation
    verdict: Finding | None
    stage_by_code: dict[str, str] = field(default_factory=dict)
    observed: frozenset[str] = frozenset()     # "code:subject" of findings backed by an observed failure

    def exit_code(self, fail_on: str = "error") -> int:
        return 1 if fail_on != "none" and self.report.fails(fail_on) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "inputs": [i.to_dict() for i in self.inputs],
            "verdict": self.finding_dict(self.verdict) if self.verdict else None,
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


def quote_verbatim(report: Report, texts: dict[str, tuple[str, ...]]) -> Report:
    """Evidence that names a file and line shows that line as it is in the file."""
    def fix(e):
        lines = texts.get(e.source)
        if not lines or not e.line or not 1 <= e.line <= len(lines):
            return e
        raw = lines[e.line - 1].strip()
        return dataclasses.replace(e, text=raw if len(raw) <= 300 else raw[:297] + "...") if raw else e
    findings = tuple(dataclasses.replace(f, evidence=tuple(fix(e) for e in f.evidence)) for f in report.findings)
    return dataclasses.replace(report, findings=findings)


def read_evidence(paths: Sequence[str], *, snapshot: str | None = None, example: str | None = None,
                  env: Sequence[str] = ()) -> Gathered:
    """Read and parse every input. A file of no known kind among several is skipped with a note (kind
    "unknown"); InputError (exit 2) when it is the only input, none is usable, or a known kind fails to parse."""
    from ncdoc.importers import import_text, merge
    from ncdoc.importers.detect import detect_kind, read_input

    if not paths and not snapshot and not example:
        raise UsageError("give at least one evidence file (or --snapshot / --example)")
    inputs: list[TriageInput] = []
    logs: list[Any] = []
    tests: list[Any] = []
    launch: list[Any] = []
    snaps: list[Snapshot] = []
    node_ev: list[NodeEvidence] = []
    if example:
        from ncdoc.examples.machines import load_example
        try:
            snaps.append(load_example(example))
        except (FileNotFoundError, KeyError) as exc:
            raise UsageError(f"unknown example {example!r}", cause=str(exc)) from None
        inputs.append(TriageInput(f"example:{example}", "snapshot_json", ("snapshot",)))
    if snapshot:
        snaps.append(Snapshot.load(snapshot))
        inputs.append(TriageInput(snapshot, "snapshot_json", ("snapshot",)))
    texts: dict[str, tuple[str, ...]] = {}
    unknown: list[InputError] = []
    for path in paths:
        path = str(path)
        text, head = _read(path)
        tests_json = _tests_json(text)
        if tests_json is not None:
            from ncdoc.evidence.nccl_tests import parse_nccl_tests_json
            tests.append(parse_nccl_tests_json(tests_json, path))
            inputs.append(TriageInput(path, "nccl_tests", ("nccl_tests_json",)))
            continue
        try:
            kind = detect_kind(head)
        except InputError as exc:
            if len(paths) + bool(snapshot) + bool(example) < 2:
                raise InputError(exc.message, path=path, cause=exc.cause) from None
            # one unreadable paste among several must not lose the others' answer
            unknown.append(InputError(exc.message, path=path, cause=exc.cause))
            inputs.append(TriageInput(path, "unknown", (), (f"skipped: {exc.message}",)))
            continue
        if text is None and kind in RUN_KINDS:
            log, table = _parse_run_file(path)
            read_as = tuple(k for k, v in (("nccl_log", log), ("nccl_tests", table)) if v is not None)
            logs.extend(x for x in (log,) if x is not None)
            tests.extend(x for x in (table,) if x is not None)
            read_as += _launch_of_run(head.splitlines(), path, launch)    # the launch line sits at the top
            inputs.append(TriageInput(path, kind, read_as, ("large file: read as a stream",)))
            continue
        if text is None:
            text = read_input(path)
        texts[path] = tuple(text.splitlines())
        if kind in NODE_KINDS:
            try:
                imp = import_text(text, source=path, kind=kind)
            except InputError as exc:
                if exc.path or path in exc.message:
                    raise
                raise InputError(exc.message, path=path, cause=exc.cause) from None
            snaps.append(imp.snapshot)
            hs = imp.snapshot.hcas.status
            node_ev.append(NodeEvidence(path, kind, imp.tool, tuple(imp.notes), hs.state, hs.reason, texts[path]))
            inputs.append(TriageInput(path, kind, (imp.tool or kind,), tuple(imp.notes)))
        elif kind == "env":
            from ncdoc.evidence.launch_env import parse_launch_env
            launch.append(parse_launch_env(text, path))
            inputs.append(TriageInput(path, kind, ("env",)))
        else:
            log, table = _parse_run_text(texts[path], path)
            read_as = tuple(k for k, v in (("nccl_log", log), ("nccl_tests", table)) if v is not None)
            read_as += _launch_of_run(texts[path], path, launch)
            read_as += _embedded_node(text, path, texts[path], snaps, node_ev)
            if log is not None:
                logs.append(log)
            if table is not None:
                tests.append(table)
            notes = () if read_as else (f"nothing NCCL could be read from this {kind.replace('_', ' ')}",)
            inputs.append(TriageInput(path, kind, read_as, notes))

    if unknown and all(i.kind == "unknown" for i in inputs):
        raise unknown[0]                # nothing usable at all: exit 2 as for a single unknown file
    snap = None
    for s in snaps:
        snap = s if snap is None else merge(snap, s)
    nenv = build_env(snap, logs, launch, env, tests)
    if snap is not None:
        snap = snap.replace(env=nenv)
    return Gathered(tuple(inputs), tuple(logs), tuple(tests), tuple(launch), snap, nenv, tuple(node_ev), texts)


def parse_env_pairs(pairs: Iterable[str]) -> list[EnvValue]:
    out = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not _ENV_NAME.match(name):
            raise UsageError(f"--env wants NAME=VALUE, got {pair!r}")
        out.append(EnvValue(name, value, "cli"))
    return out


def _log_env(log: Any) -> list[EnvValue]:
    out = []
    book = getattr(log, "evidence", None) or {}
    for name, value in (getattr(log, "env", None) or {}).items():
        ev = book.get("env:" + name) or ()
        out.append(EnvValue(name, value, getattr(log, "source", "") or "log", ev[0].line if ev else None))
    return out


def _launch_values(launch: Any) -> list[EnvValue]:
    """EnvValues of a parsed launch/env file (LaunchEnv.values, or its facts as a fallback)."""
    values = getattr(launch, "values", None)
    if values is not None:
        return [v for v in values if isinstance(v, EnvValue)]
    facts = launch.to_facts().get("env", {}) if hasattr(launch, "to_facts") else {}
    src = getattr(launch, "source", "") or "env file"
    return [EnvValue(k, str(v), src) for k, v in facts.items()]


def build_env(snapshot: Snapshot | None, logs: Sequence[Any], launch: Sequence[Any],
              pairs: Sequence[str], tests: Sequence[Any] = ()) -> NcclEnv:
    """One environment: --env beats launch files, which beat what logs (and nccl-tests JSON) report,
    which beat the snapshot. Launch files later on the command line beat earlier ones; the losers
    are kept as shadowed."""
    layers: list[list[EnvValue]] = [parse_env_pairs(pairs)]
    for lf in reversed(launch):
        layers.append(_launch_values(lf))
    for log in logs:
        layers.append(_log_env(log))
    for t in tests:
        src = getattr(t, "source", "") or "nccl-tests"
        layers.append([EnvValue(k, str(v), src) for k, v in (getattr(t, "env", None) or {}).items()])
    if snapshot is not None:
        layers.append(list(snapshot.env.values))
    effective: dict[str, EnvValue] = {}
    shadowed: list[EnvValue] = []
    for layer in layers:
        seen_here: dict[str, EnvValue] = {}
        for v in layer:
            seen_here[v.name] = v           # within one file the last assignment wins
        for name, v in seen_here.items():
            if name in effective:
                if effective[name].value != v.value or effective[name].source != v.source:
                    shadowed.append(v)
            else:
                effective[name] = v
    files = tuple(dict.fromkeys(getattr(lf, "source", "") for lf in launch if getattr(lf, "source", "")))
    return NcclEnv(Status.ok("triage"), tuple(effective.values()), tuple(shadowed), files)


# ---------------------------------------------------------------- running the rules

def load_rules() -> list[Rule]:
    from ncdoc.engine.ruleset import load
    rs = load()
    rules = list(rs)
    missing = rs.ensure_checks(rules)
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
                "node_evidence": list(ev.node)}
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
            return (backed or same)[0]
    return None


def triage(paths: Sequence[str], *, snapshot: str | None = None, example: str | None = None,
           env: Sequence[str] = (), nic_gbps: float | None = None, nics: int | None = None,
           nodes: int | None = None, rules: Sequence[Rule] | None = None) -> TriageResult:
    from ncdoc.checks.evidence_common import job_expectation
    from ncdoc.triage.facts import build_facts, observed_failures

    ev = read_evidence(paths, snapshot=snapshot, example=example, env=env)
    ctx = build_context(ev, nic_gbps=nic_gbps, nics=nics, nodes=nodes)
    rules = list(rules) if rules is not None else load_rules()
    report = quote_verbatim(run_rules(ctx, rules), ev.texts)
    exp = job_expectation(ctx)
    facts = build_facts(ctx, ev, exp)
    failures = observed_failures(ev)
    observed = frozenset(f"{f.code}:{f.subject}" for f in report.findings if failure_backed(f, failures))
    return TriageResult(ev.inputs, report, facts, exp, pick_verdict(report, failures, observed),
                        {r.code: r.stage for r in rules}, observed)


__all__ = ["SCHEMA_VERSION", "TriageInput", "Gathered", "TriageResult", "read_evidence", "build_env",
           "parse_env_pairs", "build_context", "load_rules", "pick_verdict", "failure_backed",
           "triage"]
