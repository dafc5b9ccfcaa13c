"""What a tune leaves behind: nccl.env (and the other formats), nccl_tuner.conf, EXPLAIN.md, summary.json.

Each file is written only when it is safe to load: the env only when `ncdoc lint` passes it for
the NCCL version in use without a warning (else no env file, and EXPLAIN.md and the console say
why); the tuner table only when the guard sweep measured it with the env and found no size
slower. A file a previous run left that this run does not stand behind is removed. A simulated
tune says SIMULATED at the top of every file and in summary.json ("simulated": true).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ncdoc.tuner.confirm import loss_pct, pct
from ncdoc.tuner.datafile import format_size
from ncdoc.tuner.knowledge import load_knowledge
from ncdoc.tuner.space import UNSET

SIMULATED = ("SIMULATED: not measured on hardware; every figure comes from ncdoc's simulator. "
             "Rerun with --backend nccl-tests before deploying.")


def _pct(x: float) -> str:
    return f"{pct(x):+.1f} %"


def _bw(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def labels(result: Any) -> list[str]:
    return [SIMULATED] if result.simulated else []


def _size_table(workload: Any, base_sizes: Mapping[str, list], tuned_sizes: Mapping[str, list],
                expected: Mapping[str, float | None]) -> list[str]:
    out = ["| collective | size | baseline busbw (GB/s) | recommended busbw (GB/s) | change | % of expected |",
           "|---|---:|---:|---:|---:|---:|"]
    for collective, sizes in workload:
        b = {row[0]: row[1] for row in base_sizes.get(collective, [])}
        t = {row[0]: row[1] for row in tuned_sizes.get(collective, [])}
        exp = expected.get(collective)
        for s in sizes:
            bb, tt = b.get(s), t.get(s)
            if bb is None and tt is None:
                continue
            change = f"{100.0 * (tt / bb - 1.0):+.1f} %" if bb and tt else "-"
            share = f"{100.0 * tt / exp:.0f} %" if tt and exp else "-"
            out.append(f"| {collective} | {format_size(s)} | {_bw(bb)} | {_bw(tt)} | {change} | {share} |")
    return out


def _table_section(r: Any) -> list[str]:
    t = r.table
    lines = ["## Tuner table (nccl_tuner.conf)", ""]
    if not t.rules:
        lines += ["No nccl_tuner.conf was written:", ""] + [f"- {n}" for n in t.notes or ("nothing to put in it",)]
        return lines + [""]
    cmp = t.comparison
    nodes, ranks = t.rules[0].n_nodes, t.rules[0].n_ranks
    lines += [f"{len(t.rules)} rules for NCCL's example tuner plugin. Every size of every collective the plugin "
              "steers has a rule with the channel count NCCL would choose; NCCL's own algorithm and protocol "
              "everywhere except these measured choices:", ""]
    lines += [f"- {o.collective} {format_size(o.lo)}-{format_size(o.hi)} bytes: {o.algo}/{o.proto} ({o.why})"
              for o in t.overrides]
    if t.notes:
        lines += [""] + [f"- {n}" for n in t.notes]
    if cmp is not None:
        lines += ["", f"Measured with the environment above, against it alone, {cmp.n} rounds of the guard sweep: "
                      f"{_pct(cmp.gain)} (Wilcoxon p={cmp.p_wilcoxon:.3f}); no measured size slower."]
    lines += ["",
              f"The rules name communicators of {nodes} node(s) and {ranks} rank(s), the shape that was measured. "
              "Under the example plugin a call no rule matches runs on ONE channel: load this table only in jobs "
              "whose NCCL communicators all have that shape (data parallel over every GPU, as measured).",
              "",
              "Load it on every rank, the same file everywhere (ranks that disagree on an algorithm or protocol "
              "hang or fail):",
              "",
              "    NCCL_TUNER_PLUGIN=/path/to/libnccl-tuner-example.so",
              "    NCCL_TUNER_CONFIG_FILE=/path/to/nccl_tuner.conf", ""]
    return lines


def _scale_section(r: Any) -> list[str]:
    """Tuning at scale (real backends): node groups, the health gate, per-group baselines, full scale."""
    sc = r.scale
    if not sc:
        return []
    from ncdoc.cluster.nodes import compress
    lines = ["## Tuning at scale", "",
             f"- Nodes reached: {len(sc['nodes'])} ({compress(sc['nodes'])}); trials on groups of {sc['per_group']}, "
             f"placed by {sc['placement']}" + (f"; left out: {', '.join(sc['left_out'])}" if sc["left_out"] else "")]
    gate = sc.get("health_gate")
    if gate is None:
        lines.append("- Health gate: off")
    else:
        bad = gate.get("bad_nodes") or {}
        lines.append(f"- Health gate (env check, then {', '.join(gate['scales']) or 'no isolation scale'}; "
                     f"{gate.get('rounds') or 0} isolation round(s)): "
                     + ("every node healthy" if not bad else f"{len(bad)} node(s) found bad:"))
        lines += [f"    - {n}: {why}" for n, why in bad.items()]
    lines += [f"- {n}" for n in sc.get("notes", [])]
    lines += ["", "| group | nodes | used | baseline against the groups' mean |", "|---|---|---|---:|"]
    for g in sc["groups"]:
        rel = f"x{g['relative']:.3f}" if g.get("relative") else "-"
        used = "yes" if g["used"] else f"no: {g['why']}"
        lines.append(f"| {g['name']} | {', '.join(g['nodes'])} | {used} | {rel} |")
    full = sc.get("full_scale")
    lines.append("")
    if full:
        lines.append(f"Full scale ({full['nodes']} healthy nodes, {full['rounds']} shuffled rounds against the baseline):")
        for label, side in full["sides"].items():
            what = "the final env" if label == "B" else f"candidate {label}"
            ch = ", ".join(f"{k}={v}" for k, v in side["changes"].items()) or "no change"
            verdict = (f"{side['gain_pct']:+.1f} %" if side.get("ok") else side.get("why", "rejected"))
            lines.append(f"- {what} ({ch}): {verdict}")
        lines.append("")
    elif len(sc["nodes"]) > sc["per_group"]:
        lines += ["No full-scale check: nothing was recommended to check." if not r.recommended else
                  "No full-scale check (--full-scale-rounds 0).", ""]
    return lines


def render_explain(result: Any, *, lint_findings: Sequence[str] = (),
                   expected: Mapping[str, float | None] | None = None) -> str:
    """EXPLAIN.md for a TuneResult (ncdoc.tuner.run): what was set, why, and how sure we are."""
    r = result
    know = load_knowledge().notes
    expected = expected or {}
    lines = ["# ncdoc tune: what was changed and why", ""]
    lines += [f"> {line}" for line in labels(r)] + ([""] if r.simulated else [])
    lines += [f"- Backend: {r.backend.get('backend')}" + (f", cluster {r.backend.get('cluster')}"
                                                          if r.backend.get("cluster") else "")
              + (f", NCCL {r.nccl_version}" if r.nccl_version else ""),
              f"- Workload profile: {r.profile.name} ({r.profile.description})",
              f"- Study: {r.study_name} in {r.storage_display}; {r.trials_complete} trials measured, "
              f"{r.trials_stopped} stopped early, {r.trials_failed} failed, sampler {r.sampler}, up to {r.repeats} "
              f"run(s) per trial; {r.measurements} measurements in all",
              f"- Run-to-run spread of the score: {100 * r.noise:.1f} %",
              "- Baseline: the environment jobs run with today"
              + (f" ({', '.join(f'{k}={v}' for k, v in r.baseline_env.items())})" if r.baseline_env else
                 " (no NCCL variables set: NCCL's defaults)"), ""]
    fin = r.final
    if r.refused:
        lines += ["## No env file written", "", r.refused, ""]
    elif r.recommended or r.unset:
        lines += ["## Recommended environment", ""]
        if fin is not None:
            lines += [f"Measured against the baseline in the guard sweep, {fin.n} rounds in shuffled order: "
                      f"{_pct(fin.gain)} (lower confidence bound {_pct(fin.lcb)}, Wilcoxon p={fin.p_wilcoxon:.3f}); "
                      "no size of the profile, of 8 B - 1 MiB or of "
                      f"{', '.join(dict.fromkeys(r.profile.collectives + r.profile.guard))} slower beyond noise.", ""]
        if r.replica is not None:
            lines += [f"On a second node group: {_pct(r.replica.gain)}, no size slower.", ""]
        effects = {e.name: e for e in r.effects if e.final}
        lines += ["| variable | value | what it does | without it (in this env) | helps |", "|---|---|---|---|---|"]
        for name, value in r.recommended.items():
            k = know.get(name, {})
            e = effects.get(name)
            if e:
                eff = f"-{loss_pct(e.cost):.1f} % ± {100 * e.sd:.1f} %, {e.n} rounds"
                helps = ", ".join(f"{bk} ({_pct(m)})" for bk, (m, _) in e.buckets.items() if m > 0.005) or "-"
            elif fin is not None and len(r.recommended) == 1:
                eff, helps = f"{_pct(-fin.gain)} (the guard sweep: it is the only change)", "-"
            else:
                eff, helps = "not measured alone", "-"
            lines.append(f"| `{name}` | `{value}` | {k.get('what', '')} | {eff} | {helps} |")
        kept = [f"`{k}={v}`" for k, v in r.env.items() if k not in r.recommended]
        if kept:
            lines += ["", f"Kept as they are in the current environment: {', '.join(kept)}."]
        if r.unset:
            lines += ["", f"Removed from the current environment: {', '.join(f'`{k}`' for k in r.unset)}."]
        lines.append("")
        for name in r.recommended:
            k = know.get(name)
            if k:
                lines.append(f"- `{name}`: when unset, {k.get('default', '')} Usually pays off: {k.get('helps', '')}")
        lines.append("")
    else:
        lines += ["## No change recommended", "",
                  "No candidate beat the baseline by more than the measured noise; keep the current environment.", ""]
    dropped = [e for e in r.effects if not e.kept]
    if dropped:
        lines += ["## Dropped by leave-one-out", ""] + [f"- `{e.name}={e.value}`: {e.why}" for e in dropped] + [""]
    lines += ["## Candidates re-measured before recommending", ""]
    for v in r.verdicts:
        ch = ", ".join(f"{k}={val}" for k, val in v.params.items() if val != UNSET) or "(NCCL defaults)"
        lines.append(f"- {'accepted' if v.recommended else 'rejected'}: {ch}: {v.why}")
    if not r.verdicts:
        lines.append("- none: no trial's estimate beat the baseline")
    lines += ["", "## What was tried", ""]
    for name, tried in r.tried.items():
        vals = ", ".join(f"{val} (best x{best:.3f}, {n} trial{'s' if n != 1 else ''})" for val, (best, n) in tried.items())
        lines.append(f"- `{name}`: {vals}")
    if r.failures:
        lines += ["", "Failed trials (recorded as failures, not as slow results):", ""]
        lines += [f"- {n} x {reason}" for reason, n in r.failures.items()]
    workload = fin_workload(r)
    lines += ["", "## Bus bandwidth by size", "",
              "Median busbw per size; \"% of expected\" is against the line-rate expectation"
              + (f" ({', '.join(f'{c}: {e:.0f} GB/s' for c, e in expected.items() if e)})." if any(expected.values())
                 else " (unknown for this cluster)."), ""]
    lines += _size_table(workload, r.baseline_sizes, r.tuned_sizes, expected)
    lines.append("")
    lines += _scale_section(r)
    lines += _table_section(r)
    if lint_findings:
        lines += ["## Lint findings fixed on the way", ""] + [f"- {f}" for f in lint_findings] + [""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    return "\n".join(lines)


def fin_workload(r: Any) -> Any:
    if r.final is not None:
        merged: dict[str, set[int]] = {}
        for c, sizes in tuple(r.profile.workload()) + tuple(r.profile.guard_workload()):
            merged.setdefault(c, set()).update(sizes)
        return tuple((c, tuple(sorted(s))) for c, s in merged.items())
    return r.profile.workload()


def _env_comments(result: Any) -> dict[str, str]:
    know = load_knowledge().notes
    effects = {e.name: e for e in result.effects if e.final}
    out = {}
    for name in result.env:
        if name not in result.recommended:
            out[name] = "unchanged from the current environment"
            continue
        e = effects.get(name)
        measured = f" Without it the score drops {loss_pct(e.cost):.1f} % ({e.n} rounds)." if e else ""
        out[name] = f"tuned: {know.get(name, {}).get('what', '')}{measured}".strip()
    return out


def _env_header(result: Any) -> list[str]:
    fin = result.final
    head = labels(result)
    head.append(f"NCCL environment recommended by ncdoc tune (study {result.study_name}, profile "
                f"{result.profile.name}" + (f", NCCL {result.nccl_version}" if result.nccl_version else "") + ").")
    if fin is not None and (result.recommended or result.unset):
        head.append(f"Against the current environment, {fin.n} rounds of the guard sweep: {_pct(fin.gain)} "
                    f"(lower confidence bound {_pct(fin.lcb)}); no measured size slower. See EXPLAIN.md.")
    else:
        head.append("No change beat the measured noise: this is the current environment, unchanged. See EXPLAIN.md.")
    if result.unset:
        # As a comment: ncdoc's env-file reader (what `ncdoc lint --env-file` reads) takes assignments only.
        head.append(f"Remove from the environment jobs run with today: unset {' '.join(result.unset)}")
    head.append("ncdoc lint passes this file for the NCCL version above without a warning.")
    return head


def env_file_text(result: Any, fmt: str) -> str:
    import json

    from ncdoc.envfiles.formats import comment_lines, render_env

    body = render_env(result.env, fmt, _env_comments(result))
    if fmt == "json":
        data = json.loads(body)
        data["simulated"] = bool(result.simulated)
        if result.simulated:
            data["note"] = SIMULATED
        return json.dumps(data, indent=2) + "\n"
    # one comment line each, whatever the study's name holds (comment_lines: nccl.conf without '=')
    head = "".join(line + "\n" for line in comment_lines(_env_header(result), fmt))
    return head + body


def write_outputs(result: Any, backend: Any, out_dir: Any, formats: Sequence[str],
                  lint_findings: Sequence[str] = ()) -> Any:
    """Write what is safe to load (env formats, nccl_tuner.conf), EXPLAIN.md and summary.json."""
    import dataclasses
    import json

    from ncdoc.envfiles.formats import FILE_NAMES, write_atomic
    from ncdoc.tuner import safety
    from ncdoc.tuner.table import render

    out = Path(out_dir)
    files: dict[str, str] = {}
    removed: list[str] = []
    refused = result.refused
    if not refused:
        problems = safety.blocking(result.env, result.nccl_version)
        if problems:
            refused = (f"The environment would lint with {len(problems)} warning(s) or error(s) for NCCL "
                       f"{result.nccl_version or '(version unknown)'}, so it was not written: " + "; ".join(problems)
                       + ". Fix today's environment (ncdoc lint) and tune again.")
    for fmt in dict.fromkeys(("sh",) + tuple(formats)):
        path = out / FILE_NAMES[fmt]
        if refused:
            if path.exists():
                path.unlink()
                removed.append(path.name)
            continue
        files[fmt] = str(write_atomic(path, env_file_text(result, fmt)))
    conf = out / "nccl_tuner.conf"
    if result.table.rules and not refused:
        head = labels(result) + [f"study {result.study_name}; NCCL {result.nccl_version or 'version unknown'}; "
                                 f"measured with the env in nccl.env (see EXPLAIN.md)"]
        files["tuner_conf"] = str(write_atomic(conf, render(result.table.rules, header=head)))
    elif conf.exists():
        conf.unlink()
        removed.append(conf.name)
    notes = result.notes + tuple(f"{name} from an earlier run removed: this run does not stand behind it"
                                 for name in removed)
    result = dataclasses.replace(result, refused=refused, notes=notes,
                                 table=result.table if files.get("tuner_conf") else
                                 dataclasses.replace(result.table, rules=(), overrides=()))
    expected = {}
    for c in result.profile.collectives:
        exp = backend.expectation(c)
        expected[c] = getattr(exp, "expected_busbw", None) if exp is not None else None
    files["explain"] = str(write_atomic(out / "EXPLAIN.md", render_explain(result, lint_findings=lint_findings,
                                                                           expected=expected)))
    files["summary"] = str(out / "summary.json")
    result = dataclasses.replace(result, files=files)
    write_atomic(out / "summary.json", json.dumps(result.to_json(), indent=2) + "\n")
    return result


def console_summary(result: Any) -> str:
    """What `ncdoc tune` prints on stdout."""
    r = result
    lines = labels(r)
    lines.append(f"ncdoc tune: {r.trials_complete} trials measured ({r.trials_stopped} stopped early, "
                 f"{r.trials_failed} failed, {r.measurements} measurements), backend {r.backend.get('backend')}"
                 + (f" ({r.backend['cluster']})" if r.backend.get("cluster") else "") + f", profile {r.profile.name}")
    if r.refused:
        lines.append(f"nothing written to deploy: {r.refused}")
    elif r.final is not None and (r.recommended or r.unset):
        f = r.final
        lines.append(f"recommended: {pct(f.gain):+.1f} % busbw against the current environment "
                     f"(lower confidence bound {pct(f.lcb):+.1f} %, {f.n} rounds; no measured size slower):")
        lines += [f"  {k}={v}" for k, v in r.recommended.items()]
        lines += [f"  unset {k}" for k in r.unset]
    else:
        lines.append("no change recommended: nothing beat the current environment by more than the measured noise")
    if r.table.rules:
        lines.append(f"tuner table: {len(r.table.rules)} rules ({len(r.table.overrides)} measured choice(s)); load "
                     "it on every rank (see EXPLAIN.md)")
    lines.append("files:")
    lines += [f"  {path}" for path in r.files.values()]
    return "\n".join(lines)
