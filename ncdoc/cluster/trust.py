"""Is a measurement what it claims to be? The verdict on one nccl-tests run's output.

A busbw figure is only a result when
  - the ranks formed one job: one header, as many ranks as were launched (not N one-rank jobs
    of an nccl-tests built without MPI, or of a launcher whose PMI was not wired);
  - every rank loaded the same NCCL;
  - the NCCL INFO log was captured (NCDOC sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING),
    and every variable the run was meant to test appears in NCCL's own "set by environment to"
    (or "set to") lines, with the value asked for, on every rank: a variable the launcher did
    not export never reached NCCL, and the number measures the default instead;
  - every node's ranks ran with the same NCCL environment: a variable NCCL reports on some nodes
    only, or with another value on some (an nccl.conf on a few nodes, a launcher that passes the
    environment to local ranks only), makes the job a mix of settings; and a variable the run was
    meant to be without (`unset`) must not show up at all;
  - the results were checked (-c) and none were wrong, nothing failed, nothing was cut off.
Any of these failing makes the run invalid, with the reason. The algorithm, protocol and
channel count NCCL actually used for each size come from its TUNING lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Set by ncdoc for the run itself, or read by NCCL without an INFO line of its own.
# NCCL_TUNER_CONFIG_FILE is read by the example tuner plugin, which does not print it as NCCL does.
NOT_REPORTED = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
                          "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_TESTS_SPLIT", "NCCL_TESTS_SPLIT_MASK",
                          "NCCL_TESTS_MIN_BW", "NCCL_TESTS_DEVICE", "NCCL_TUNER_CONFIG_FILE"})


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reasons: tuple[str, ...] = ()              # why the run is not a result
    notes: tuple[str, ...] = ()                # worth knowing, not invalidating
    nranks: int | None = None                  # ranks nccl-tests listed
    expected_ranks: int | None = None
    nccl_versions: tuple[str, ...] = ()
    env_missing: dict = field(default_factory=dict)   # NAME -> hosts whose ranks never reported it
    env_wrong: dict = field(default_factory=dict)     # NAME -> {host: value NCCL read}
    env_uneven: dict = field(default_factory=dict)    # NAME -> {host: value NCCL read, None: not reported}

    def to_dict(self) -> dict:
        return {"valid": self.valid, "reasons": list(self.reasons), "notes": list(self.notes),
                "nranks": self.nranks, "expected_ranks": self.expected_ranks,
                "nccl_versions": list(self.nccl_versions),
                "env_missing": {k: list(v) for k, v in self.env_missing.items()},
                "env_wrong": {k: dict(v) for k, v in self.env_wrong.items()},
                "env_uneven": {k: dict(v) for k, v in self.env_uneven.items()}}


def _same(asked: str, read: str) -> bool:
    """NCCL prints integer parameters as parsed (strtoll base 0): 0x400000 reads back as 4194304."""
    if asked == read:
        return True
    try:
        return int(asked, 0) == int(read, 0)
    except ValueError:
        return asked.strip() == read.strip()


def _hosts(ranks, host_of) -> str:
    from ncdoc.cluster.nodes import nodes_text
    hosts = sorted({host_of[r] for r in ranks})
    return nodes_text(hosts)


def uneven_env(ranklog, skip=()) -> dict[str, dict[str, str | None]]:
    """NCCL variables the nodes of one run did not agree on: NAME -> {host: value, None where that
    host's ranks never reported it}. Per host, not per rank: some variables are read by one process
    of a node only. Hosts that reported no variable at all are left out (nothing to compare)."""
    per_host: dict[str, dict[str, str]] = {}
    reporting: set[str] = set()
    for rank, host in ranklog.host_of.items():
        per_host.setdefault(host, {})
        for name, value in ranklog.env.get(rank, {}).items():
            reporting.add(host)
            if name not in NOT_REPORTED and name not in skip:
                per_host[host].setdefault(name, value)
    hosts = [h for h in per_host if h in reporting]
    if len(hosts) < 2:
        return {}
    out = {}
    for name in sorted({n for h in hosts for n in per_host[h]}):
        seen = {h: per_host[h].get(name) for h in hosts}
        if len(set(seen.values())) > 1:
            out[name] = seen
    return out


def _uneven_reason(name: str, seen: dict) -> str:
    from collections import Counter

    from ncdoc.cluster.nodes import nodes_text
    groups: dict = {}
    for host, value in seen.items():
        groups.setdefault(value, []).append(host)
    def text(v):
        return "unset" if v is None else repr(v)

    common, count = Counter({v: len(h) for v, h in groups.items()}).most_common(1)[0]
    if count * 2 > len(seen):                       # a majority: name the odd nodes
        what = f"{text(common)} on {count} of {len(seen)} nodes, " + "; ".join(
            f"{text(v)} on {nodes_text(sorted(h))}" for v, h in groups.items() if v != common)
    else:
        what = "; ".join(f"{text(v)} on {nodes_text(sorted(h))}" for v, h in groups.items())
    return (f"the nodes did not run with the same NCCL environment: {name} is {what} (an nccl.conf or env on some "
            "nodes only, or a launcher passing the environment to some ranks only)")


def judge(tests, ranklog, *, expected_ranks: int | None, tuned, logfacts=None, checked: bool = True,
          timeout_flag: bool = True, unset=()) -> Verdict:
    """The verdict on one run: `tests` (NcclTestsFacts), `ranklog` (tuning_log.RankLog), `tuned`
    (the NCCL_* variables the run was meant to test), `logfacts` (LogFacts, for versions and
    failures), `checked` (-c was at least 1), `unset` (variables the run was meant to be without)."""
    reasons: list[str] = []
    notes: list[str] = []
    if tests is None or not tests.rows:
        reasons.append("nccl-tests printed no result rows")
    if tests is not None:
        if tests.runs > 1 or tests.duplicate_ranks:
            reasons.append(f"the ranks did not form one job: {tests.runs} separate nccl-tests runs in the output "
                           "(each rank its own job: nccl-tests built without MPI=1, or the launcher's PMI not "
                           "wired, e.g. srun without --mpi=pmix)")
        elif expected_ranks is not None and tests.nranks is not None and tests.nranks != expected_ranks:
            reasons.append(f"nccl-tests saw {tests.nranks} rank(s), {expected_ranks} were launched "
                           "(a node or rank was lost, or the job is not what was asked)")
        if tests.wrong_total:
            reasons.append(f"{tests.wrong_total:g} wrong result element(s) in {tests.wrong_rows} row(s): data "
                           "corruption with these settings")
        if tests.out_of_bounds_ok is False:
            reasons.append(f"nccl-tests reports {tests.out_of_bounds} out-of-bounds value(s)")
        if tests.failures:
            f = tests.failures[0]
            reasons.append(f"nccl-tests failed on {f.host}: {f.error or f.text}"[:300])
        if tests.truncated:
            reasons.append("the output was cut short: " + "; ".join(tests.truncation)[:200])
        if tests.validation_off or not checked:
            reasons.append("results were not checked (-c 0): a fast wrong answer would count")
    versions = tuple(sorted(set(ranklog.versions.values())))
    if logfacts is not None and len(logfacts.nccl_versions) > len(versions):
        versions = tuple(sorted(set(logfacts.nccl_versions)))
    if len(versions) > 1:
        by_version: dict[str, list[str]] = {}
        for rank, v in ranklog.versions.items():
            by_version.setdefault(v, []).append(rank)
        detail = "; ".join(f"{v} on {_hosts(r, ranklog.host_of)}" for v, r in sorted(by_version.items()))
        reasons.append(f"ranks loaded different NCCL versions ({detail})")
    missing: dict[str, list[str]] = {}
    wrong: dict[str, dict[str, str]] = {}
    if not ranklog.info_lines:
        reasons.append("no NCCL INFO lines were captured (NCCL_DEBUG=INFO did not reach NCCL): whether the "
                       "variables under test reached NCCL cannot be told")
    else:
        wanted = {k: v for k, v in (tuned or {}).items() if k.startswith("NCCL_") and k not in NOT_REPORTED}
        for name, asked in sorted(wanted.items()):
            absent = [r for r in ranklog.ranks if name not in ranklog.env.get(r, {})]
            if absent:
                missing[name] = sorted({ranklog.host_of[r] for r in absent})
                reasons.append(f"{name}={asked} did not reach NCCL on {_hosts(absent, ranklog.host_of)} "
                               f"({len(absent)} of {len(ranklog.ranks)} ranks never reported it): the run measured "
                               "NCCL's default there")
            off = {ranklog.host_of[r]: ranklog.env[r][name] for r in ranklog.ranks
                   if name in ranklog.env.get(r, {}) and not _same(asked, ranklog.env[r][name])}
            if off:
                wrong[name] = off
                host, got = next(iter(off.items()))
                reasons.append(f"{name}={asked} was asked, but NCCL read {got!r} on {host}"
                               + (f" and {len(off) - 1} more node(s)" if len(off) > 1 else ""))
        for name in sorted(set(unset)):
            seen = {ranklog.host_of[r]: ranklog.env[r][name] for r in ranklog.ranks if name in ranklog.env.get(r, {})}
            if seen:
                host, got = next(iter(seen.items()))
                reasons.append(f"{name} was meant to be unset, but NCCL read {got!r} on {_hosts_of(seen)} (inherited "
                               "from the launcher's environment, or set in an nccl.conf)")
        uneven = uneven_env(ranklog, skip=set(wanted) | set(unset))
        for name, seen in uneven.items():
            reasons.append(_uneven_reason(name, seen))
        if not ranklog.picks:
            notes.append("no TUNING lines (NCCL prints them from 2.21; older releases only in TRACE builds): "
                         "the algorithm and protocol used are unknown")
    if not timeout_flag:
        notes.append("nccl-tests ran without its own -T timeout")
    return Verdict(not reasons, tuple(reasons), tuple(notes), tests.nranks if tests is not None else None,
                   expected_ranks, versions, {k: tuple(v) for k, v in missing.items()}, wrong,
                   uneven if ranklog.info_lines else {})


def _hosts_of(seen: dict) -> str:
    from ncdoc.cluster.nodes import nodes_text
    return nodes_text(sorted(seen))


__all__ = ["Verdict", "judge", "uneven_env", "NOT_REPORTED"]
