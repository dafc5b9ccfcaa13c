"""What a tune leaves behind: nccl_tuner.conf (per-size algorithm table) and EXPLAIN.md.

nccl_tuner.conf follows NCCL's example tuner plugin (plugins/tuner/example, nccl_facts 3.1):
CSV `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff`,
lower-case names, inclusive byte ranges, first match wins. The plugin sets *nChannels = 1
before matching, so a rule with channels=-1 runs the collective on ONE channel: every rule
here carries the channel count that was measured, and a bucket whose count is unknown gets
no rule at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ncdoc.tuner.confirm import loss_pct
from ncdoc.tuner.datafile import format_size
from ncdoc.tuner.profiles import Profile
from ncdoc.tuner.space import UNSET

PLUGIN_COLLECTIVES = {"broadcast": "broadcast", "reduce": "reduce", "all_gather": "allgather",
                      "reduce_scatter": "reducescatter", "all_reduce": "allreduce"}
PLUGIN_ALGOS = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
                "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
PLUGIN_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
MAX_BYTES = 2**64 - 1        # strtoull's maximum: "every size above"


@dataclass(frozen=True)
class TunerRule:
    collective: str            # plugin name: allreduce, allgather, ...
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    n_nodes: int
    n_ranks: int
    note: str = ""

    def csv(self) -> str:
        return (f"{self.collective},{self.min_bytes},{self.max_bytes},{self.algorithm},{self.protocol},"
                f"{self.channels},{self.n_nodes},{self.n_ranks},-1,-1")


def _choice_from_params(params: Mapping[str, str]) -> tuple[str | None, str | None, int | None]:
    """Algorithm, protocol and channels a trial pinned, where it pinned exactly one of each."""
    algo = params.get("NCCL_ALGO", UNSET)
    proto = params.get("NCCL_PROTO", UNSET)
    lo, hi = params.get("NCCL_MIN_NCHANNELS", UNSET), params.get("NCCL_MAX_NCHANNELS", UNSET)
    a = algo if algo != UNSET and "," not in algo and ":" not in algo and "^" not in algo else None
    p = proto if proto != UNSET and "," not in proto and ":" not in proto and "^" not in proto else None
    ch = int(lo) if lo != UNSET and lo == hi and lo.isdigit() else None
    return a, p, ch


def tuner_rules(records: Sequence[Any], profile: Profile, *, nodes: int, nranks: int) -> tuple[list[TunerRule], list[str]]:
    """Per collective and bucket, the algorithm/protocol/channels of the best measured trial."""
    rules: list[TunerRule] = []
    notes: list[str] = []
    ok = [r for r in records if r.state == "complete" and r.buckets and r.duplicate_of is None]
    for collective in profile.collectives:
        plugin = PLUGIN_COLLECTIVES.get(collective)
        if plugin is None:
            notes.append(f"{collective}: NCCL's tuner plugin has no {collective} entry; no rules")
            continue
        spans = []
        for b in sorted((b for b in profile.buckets if b.collective == collective), key=lambda b: b.sizes[0]):
            best = max(ok, key=lambda r: r.buckets.get(b.key, 0.0), default=None)
            if best is None:
                continue
            rows = {row[0]: row for row in best.sizes.get(collective, [])}
            pa, pp, pch = _choice_from_params(best.params)
            for s in b.sizes:
                row = rows.get(s)
                algo = (row[2] if row and row[2] else pa) or ""
                proto = (row[3] if row and row[3] else pp) or ""
                ch = row[4] if row and row[4] else pch
                a, p = PLUGIN_ALGOS.get(algo.lower()), PLUGIN_PROTOS.get(proto.lower())
                if not (a and p and ch):
                    notes.append(f"{collective} {format_size(s)}: the best trial ({best.number}) does not say which "
                                 "algorithm, protocol and channel count it ran; no rule (channels=-1 would mean 1)")
                    continue
                spans.append([s, s, a, p, int(ch), f"bucket {b.name}: trial {best.number}"])
        spans.sort(key=lambda x: x[0])
        merged: list[list] = []
        for sp in spans:
            if merged and merged[-1][2:5] == sp[2:5]:
                merged[-1][1] = sp[1]
                if sp[5] not in merged[-1][5]:
                    merged[-1][5] += "; " + sp[5]
            else:
                merged.append(sp)
        for i, sp in enumerate(merged):
            lo = 0 if i == 0 else int(math.sqrt(merged[i - 1][1] * sp[0])) + 1
            hi = MAX_BYTES if i == len(merged) - 1 else int(math.sqrt(sp[1] * merged[i + 1][0]))
            rules.append(TunerRule(plugin, lo, hi, sp[2], sp[3], sp[4], nodes, nranks, sp[5]))
        if merged:
            # Any size without a rule would run on one channel: the ends take the nearest bucket's choice.
            notes.append(f"{plugin}: measured from {format_size(merged[0][0])} to {format_size(merged[-1][1])}; "
                         "smaller and larger sizes take the nearest measured bucket's choice")
    missing = [p for c, p in PLUGIN_COLLECTIVES.items() if c not in profile.collectives]
    if rules and missing:
        notes.append(f"no rules for {', '.join(missing)}: under the example plugin those collectives run on ONE "
                     "channel (it sets 1 when no rule matches), so load this table only for jobs that use the "
                     "collectives listed")
    return rules, notes


def render_tuner_conf(rules: Sequence[TunerRule], *, header: Sequence[str] = ()) -> str:
    lines = ["# nccl_tuner.conf for NCCL's example tuner plugin (plugins/tuner/example), written by ncdoc tune.",
             "# Load it with: NCCL_TUNER_PLUGIN=/path/to/libnccl-tuner-example.so "
             "NCCL_TUNER_CONFIG_FILE=/path/to/nccl_tuner.conf",
             "# Format: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff",
             "# Byte ranges are inclusive; the first matching rule wins. Every rule names its channel count: the",
             "# example plugin runs a collective on ONE channel when channels is -1 or no rule matches."]
    lines += [f"# {h}" for h in header]
    for r in rules:
        if r.note:
            lines.append(f"# {r.note}")
        lines.append(r.csv())
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- EXPLAIN.md

def _pct(x: float) -> str:
    return f"{100.0 * (math.exp(x) - 1.0):+.1f} %"


def _bw(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _size_table(profile: Profile, base_sizes: Mapping[str, list], tuned_sizes: Mapping[str, list],
                expected: Mapping[str, float | None]) -> list[str]:
    out = ["| collective | size | baseline busbw (GB/s) | tuned busbw (GB/s) | change | tuned, % of expected |",
           "|---|---:|---:|---:|---:|---:|"]
    for collective, sizes in profile.workload():
        b = {row[0]: row[1] for row in base_sizes.get(collective, [])}
        t = {row[0]: row[1] for row in tuned_sizes.get(collective, [])}
        exp = expected.get(collective)
        for s in sizes:
            bb, tt = b.get(s), t.get(s)
            change = f"{100.0 * (tt / bb - 1.0):+.1f} %" if bb and tt else "-"
            pct = f"{100.0 * tt / exp:.0f} %" if tt and exp else "-"
            out.append(f"| {collective} | {format_size(s)} | {_bw(bb)} | {_bw(tt)} | {change} | {pct} |")
    return out


def render_explain(result: Any, *, knowledge: Mapping[str, Mapping[str, str]], lint_findings: Sequence[str] = (),
                   expected: Mapping[str, float | None] | None = None) -> str:
    """EXPLAIN.md for a TuneResult (ncdoc.tuner.run): what was set, why, and how sure we are."""
    r = result
    expected = expected or {}
    lines = ["# ncdoc tune: what was changed and why", ""]
    lines += [f"- Backend: {r.backend.get('backend')}" + (f", cluster {r.backend.get('cluster')}"
                                                          if r.backend.get("cluster") else ""),
              f"- Workload profile: {r.profile.name} ({r.profile.description})",
              f"- Study: {r.study_name} in {r.storage_display}; {r.trials_complete} trials measured, "
              f"{r.trials_failed} failed, sampler {r.sampler}, {r.repeats} repeat(s) per trial (median)",
              "- Baseline: the environment jobs run with today"
              + (f" ({', '.join(f'{k}={v}' for k, v in r.baseline_env.items())})" if r.baseline_env else
                 " (no NCCL variables set: NCCL's defaults)"), ""]
    # r.env is the baseline when nothing was recommended (final is None): only a
    # confirmed comparison gets a "recommended" section.
    if r.env and r.final is not None:
        gain = r.final
        lines += ["## Recommended environment", "",
                  f"Measured against the baseline, interleaved, {gain.n} rounds: {_pct(gain.gain)} "
                  f"(lower confidence bound {_pct(gain.lcb)}, above the {_pct(r.noise_floor)} floor). "
                  f"Run-to-run spread of the baseline itself: {100 * gain.noise:.1f} %.", "",
                  "| variable | value | what it does | without it (mean, ± sd, rounds) | helps (gain with it) |",
                  "|---|---|---|---|---|"]
        effects = {e.name: e for e in r.effects}
        tuned = {k: v for k, v in r.env.items() if r.baseline_env.get(k) != v}
        for name, value in tuned.items():
            k = knowledge.get(name, {})
            e = effects.get(name)
            if e and e.n:
                eff = f"-{loss_pct(e.cost):.1f} % ± {100 * e.sd:.1f} %, n={e.n}"
                helps = ", ".join(f"{bk} ({_pct(m)})" for bk, (m, _) in e.buckets.items() if m > 0.005) or "-"
            else:
                eff, helps = "not measured alone", "-"
            lines.append(f"| `{name}` | `{value}` | {k.get('what', '')} | {eff} | {helps} |")
        kept = [f"`{k}={v}`" for k, v in r.env.items() if k not in tuned]
        if kept:
            lines += ["", f"Kept as they are in the current environment: {', '.join(kept)}."]
        if r.unset:
            lines += ["", f"Removed from the current environment (NCCL's default measured better): "
                          f"{', '.join(f'`{k}`' for k in r.unset)}."]
        lines.append("")
        for name in tuned:
            k = knowledge.get(name)
            if k:
                lines.append(f"- `{name}`: when unset, {k.get('default', '')} Usually pays off: {k.get('helps', '')}")
        lines.append("")
    else:
        lines += ["## No change recommended", "",
                  "No candidate beat the baseline by more than the measured noise; keep the current environment.",
                  ""]
    dropped = [e for e in r.effects if not e.kept]
    if dropped:
        lines += ["## Dropped by the minimal-env step", ""]
        lines += [f"- `{e.name}={e.value}`: {e.why}" for e in dropped]
        lines.append("")
    lines += ["## Candidates re-measured before recommending", ""]
    for v in r.verdicts:
        changes = ", ".join(f"{k}={val}" for k, val in v.params.items() if val != UNSET) or "(NCCL defaults)"
        lines.append(f"- {'accepted' if v.recommended else 'rejected'}: {changes}: {v.why}")
    if not r.verdicts:
        lines.append("- none: no trial beat the baseline in the study")
    lines.append("")
    lines += ["## What was tried", ""]
    for name, tried in r.tried.items():
        vals = ", ".join(f"{val} (best x{best:.3f}, {n} trial{'s' if n != 1 else ''})" for val, (best, n) in tried.items())
        lines.append(f"- `{name}`: {vals}")
    if r.failures:
        lines += ["", "Failed trials (recorded as failures, not as slow results):", ""]
        lines += [f"- {n} x {reason}" for reason, n in r.failures.items()]
    lines += ["", "## Bus bandwidth by size", "",
              "Median busbw per size; \"% of expected\" is against the line-rate expectation"
              + (f" ({', '.join(f'{c}: {e:.0f} GB/s' for c, e in expected.items() if e)})." if any(expected.values())
                 else " (unknown for this cluster)."), ""]
    lines += _size_table(r.profile, r.baseline_sizes, r.tuned_sizes, expected)
    lines.append("")
    if r.tuner_rules:
        lines += ["## Tuner plugin table", "",
                  f"`nccl_tuner.conf` holds {len(r.tuner_rules)} rule(s): the best measured algorithm, protocol and "
                  "channel count per size bucket. Load it with NCCL's example tuner plugin: "
                  "`NCCL_TUNER_PLUGIN=<path>/libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE=<path>/nccl_tuner.conf`.",
                  ""]
    if r.tuner_notes:
        lines += [f"- {n}" for n in r.tuner_notes] + [""]
    if lint_findings:
        lines += ["## Lint findings fixed on the way", ""] + [f"- {f}" for f in lint_findings] + [""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- writing the files

def load_knowledge() -> dict[str, dict[str, str]]:
    from ncdoc.resources import data_dir
    from ncdoc.tuner import datafile

    path = data_dir("tuners") / "knowledge.yaml"
    data = datafile.load(path)
    datafile.check_keys(data, ("schema_version", "variables"), "knowledge file", str(path), 1)
    out = {}
    for name, entry in (data.get("variables") or {}).items():
        datafile.check_keys(entry, ("what", "default", "helps"), f"knowledge of {name}", str(path),
                            datafile.line_of(data["variables"], name))
        out[name] = {k: str(v) for k, v in entry.items()}
    return out


def _env_comments(result: Any, knowledge: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    effects = {e.name: e for e in result.effects}
    out = {}
    for name in result.env:
        if name in result.baseline_env and result.baseline_env[name] == result.env[name]:
            out[name] = "unchanged from the current environment"
            continue
        what = knowledge.get(name, {}).get("what", "")
        e = effects.get(name)
        measured = (f" Without it the score drops {loss_pct(e.cost):.1f} % ({e.n} interleaved rounds)."
                    if e and e.n else "")
        out[name] = f"tuned: {what}{measured}".strip()
    return out


def _env_header(result: Any) -> list[str]:
    fin = result.final
    head = [f"NCCL environment recommended by ncdoc tune (study {result.study_name}, profile {result.profile.name})."]
    if fin is not None:
        head.append(f"Measured against the current environment, {fin.n} interleaved rounds: {_pct(fin.gain)} "
                    f"(lower confidence bound {_pct(fin.lcb)}). See EXPLAIN.md.")
    else:
        head.append("No change beat the measured noise: this is the current environment, unchanged. See EXPLAIN.md.")
    head += [f"Remove {name} from the environment (NCCL's default measured better)." for name in result.unset]
    return head


def env_file_text(result: Any, fmt: str, knowledge: Mapping[str, Mapping[str, str]]) -> str:
    from ncdoc.envfiles.formats import render_env

    body = render_env(result.env, fmt, _env_comments(result, knowledge))
    if fmt == "json":
        return body
    lines = _env_header(result)
    if fmt == "nccl.conf":                       # NCCL before 2.26 reads a '#' line holding '=' as a variable
        lines = [line.replace("=", " is ") for line in lines]
    head = "".join(f"# {line}\n" for line in lines)
    if fmt == "k8s":
        return head + body
    tail = "".join(f"unset {name}\n" for name in result.unset) if fmt in ("sh", "slurm") else ""
    return head + body + tail


def write_outputs(result: Any, backend: Any, records: Sequence[Any], out_dir: Any, formats: Sequence[str],
                  lint_findings: Sequence[str] = ()) -> Any:
    """Write nccl.env (and the requested formats), nccl_tuner.conf, EXPLAIN.md and summary.json."""
    import dataclasses
    import json
    from pathlib import Path

    from ncdoc.envfiles.formats import FILE_NAMES, write_atomic

    out = Path(out_dir)
    knowledge = load_knowledge()
    hw = backend.hardware()
    rules, tnotes = tuner_rules(records, result.profile, nodes=hw.nodes, nranks=hw.nodes * hw.gpus_per_node)
    files: dict[str, str] = {}
    for fmt in dict.fromkeys(("sh",) + tuple(formats)):
        files[fmt] = str(write_atomic(out / FILE_NAMES[fmt], env_file_text(result, fmt, knowledge)))
    files["tuner_conf"] = str(write_atomic(out / "nccl_tuner.conf", render_tuner_conf(
        rules, header=[f"study {result.study_name}; {hw.nodes} node(s) x {hw.gpus_per_node} GPU(s)"] + tnotes)))
    result = dataclasses.replace(result, tuner_rules=tuple(rules), tuner_notes=tuple(tnotes))
    expected = {}
    for c in result.profile.collectives:
        exp = backend.expectation(c)
        expected[c] = getattr(exp, "expected_busbw", None) if exp is not None else None
    files["explain"] = str(write_atomic(out / "EXPLAIN.md", render_explain(
        result, knowledge=knowledge, lint_findings=lint_findings, expected=expected)))
    files["summary"] = str(out / "summary.json")
    result = dataclasses.replace(result, files=files)
    write_atomic(out / "summary.json", json.dumps(result.to_json(), indent=2) + "\n")
    return result
