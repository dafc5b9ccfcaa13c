"""`ncdoc triage`: why is this job slow or failing? Read the evidence, say the most likely cause first."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

NAME = "triage"
HELP = "explain a slow or failing NCCL job from its logs, nccl-tests output, topology and settings"
DESCRIPTION = """\
Give ncdoc what you have, in any mix: NCCL_DEBUG=INFO logs, nccl-tests output, launch
scripts or env files, `nvidia-smi topo -m`, ibv_devinfo / ibstat / ibstatus / show_gids
output, an NCCL topology XML or an ncdoc snapshot. Each file's kind is detected; everything
is merged into one picture and checked in the order an expert works:

  1. RDMA path or TCP fallback
  2. GPUDirect RDMA, GPU-NIC affinity and rails
  3. link health
  4. bandwidth against what this hardware should reach
  5. settings and tuning hints

The most likely cause comes first, with the evidence lines (file:line) and the fix.

exit status: 0 no finding at or above --fail-on (default error), 1 there is one,
2 an input cannot be used (missing, empty, binary) or bad usage; a text file of no known kind
beside usable ones is skipped with a note (alone, it is exit 2 too).

examples:
  ncdoc triage job.log
  ncdoc triage rank0.log all_reduce.txt topo.txt launch.sh
  ncdoc triage results.txt --nic-gbps 400 --nics 8 --nodes 2
  ncdoc triage job.log --env NCCL_IB_HCA=mlx5_0,mlx5_1 --json
"""



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="evidence files: NCCL logs, nccl-tests output, env/launch files, topo -m, "
                             "ibv_devinfo/ibstat/ibstatus/show_gids, NCCL topology XML, snapshot JSON "
                             "('-' reads stdin)")
    parser.add_argument("--snapshot", metavar="FILE", help="an ncdoc snapshot of the node the job ran on")
    parser.add_argument("--example", metavar="NAME", help="use a bundled example machine as the node")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an NCCL variable the job ran with (repeatable; beats files and logs)")
    parser.add_argument("--nic-gbps", type=float, metavar="N", help="port rate of one NIC, Gb/s (e.g. 400)")
    parser.add_argument("--nics", type=int, metavar="K", help="rail NICs per node (with --nic-gbps)")
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes the job ran on")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default=None,
                        help="output format (default text)")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--fail-on", choices=("error", "warning", "info", "none"), default="error",
                        help="lowest severity that makes the exit status 1 (default error)")
    parser.add_argument("--show-skipped", action="store_true", help="list the rules skipped and why")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _use_color(mode: str) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def run(args: argparse.Namespace) -> int:
    from ncdoc.errors import UsageError
    from ncdoc.triage.run import triage

    fmt = "json" if args.json else (args.format or "text")
    if args.json and args.format not in (None, "json"):
        raise UsageError("--json and --format disagree")
    if args.nics is not None and args.nic_gbps is None:
        raise UsageError("--nics needs --nic-gbps")
    if args.snapshot and args.example:
        raise UsageError("give --snapshot or --example, not both")
    result = triage(args.paths, snapshot=args.snapshot, example=args.example, env=args.env,
                    nic_gbps=args.nic_gbps, nics=args.nics, nodes=args.nodes)
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        sys.stdout.write(render_text(result, markdown=fmt == "markdown",
                                     color=_use_color(args.color) and fmt == "text", show_skipped=args.show_skipped))
    return result.exit_code(args.fail_on)


# ---------------------------------------------------------------- text

def _gbps(x: Any) -> str:
    return "?" if x is None else f"{x:.1f} GB/s"


def facts_summary(facts: dict[str, Any]) -> list[str]:
    lines = []
    parts = []
    if facts.get("nccl_version"):
        parts.append(f"NCCL {facts['nccl_version']}")
    if facts.get("transport"):
        parts.append(f"transport {facts['transport']}")
    if facts.get("gdr") and facts["gdr"] != "unknown":
        parts.append(f"GPUDirect RDMA {facts['gdr']}")
    if facts.get("nodes"):
        parts.append(f"{facts['nodes']} node(s)")
    if facts.get("gpus_per_node"):
        parts.append(f"{facts['gpus_per_node']} GPU(s)/node")
    if parts:
        lines.append(", ".join(parts))
    if facts.get("net_devices"):
        lines.append("NICs in use: " + " ".join(facts["net_devices"][:12]))
    exp = facts.get("expected") or {}
    peak = facts.get("peak_busbw_gbps")
    if peak is not None or exp.get("expected_busbw_gbps") is not None:
        s = f"busbw peak {_gbps(peak)}"
        if exp.get("not_comparable"):
            s += " (one rank: not a measure of any link)"
        elif exp.get("expected_busbw_gbps") is not None:
            s += f", expected ~{_gbps(exp['expected_busbw_gbps'])}"
            if exp.get("achieved_pct") is not None:
                s += f" ({exp['achieved_pct']:.0f} %)"
        if facts.get("wrong"):
            s += f", {facts['wrong']} wrong value(s)"
        lines.append(s)
        if exp.get("basis"):
            lines.append("expected from: " + "; ".join(exp["basis"][:3]))
    ports = facts.get("ports") or []
    if ports:
        lines.append("ports: " + ", ".join(
            f"{p['device']}:{p['port']} {p.get('state') or '?'}"
            + (f" {p['rate_gbps']:g}G" if p.get("rate_gbps") else "")
            + (f" {p['link_layer']}" if p.get("link_layer") else "") for p in ports[:8])
            + (" ..." if len(ports) > 8 else ""))
    return lines


def verdict_lines(result, color: bool) -> list[str]:
    """The most likely cause, its evidence (file:line) and its fix; or that nothing was found."""
    from ncdoc.engine.rules import STAGE_TITLES
    from ncdoc.output.color import paint, severity
    v = result.verdict
    if v is None:
        return [paint("Verdict: no problem found in what was given", "bold", color)]
    stage = STAGE_TITLES.get(result.stage_of(v), "")
    out = [paint("Verdict: ", "bold", color) + severity(v.severity.upper(), v.severity, color)
           + f" {v.code} {v.name}" + (f" ({stage})" if stage else ""),
           f"  {v.message}"]
    for e in v.evidence:
        where = e.where()
        out.append(f"    {where + ': ' if where else ''}{e.text}")
    if v.fix:
        out.append(f"  fix: {v.fix.strip()}")
    if v.env_patch:
        out.append("  env: " + " ".join(f"{k}={val}" if val is not None else f"unset {k}"
                                        for k, val in v.env_patch.items()))
    return out


def verdict_items(result) -> list[str]:
    """The verdict as list items (markdown)."""
    from ncdoc.engine.rules import STAGE_TITLES
    v = result.verdict
    if v is None:
        return ["no problem found in what was given"]
    stage = STAGE_TITLES.get(result.stage_of(v), "")
    items = [f"{v.severity.upper()} {v.code} {v.name}" + (f" ({stage})" if stage else "") + f": {v.message}"]
    items += [f"evidence: {e.where() + ': ' if e.where() else ''}{e.text}" for e in v.evidence]
    if v.fix:
        items.append(f"fix: {v.fix.strip()}")
    return items


def render_text(result, *, markdown: bool = False, color: bool = False, show_skipped: bool = False) -> str:
    """The verdict first, then every finding by stage (ncdoc.output), then the facts."""
    from ncdoc.output import render
    inputs = [f"{i.path}: {i.kind.replace('_', ' ')}" + (f" (read as {', '.join(i.read_as)})"
                                                         if i.read_as and i.read_as != (i.kind,) else "")
              + "".join(f"; {n}" for n in i.notes) for i in result.inputs]
    facts = facts_summary(result.facts)
    if markdown:
        sections = {"Verdict": verdict_items(result), "Inputs": inputs}
        if facts:
            sections["Facts"] = facts
        return render(result.report, "markdown", title="ncdoc triage", facts=sections, skipped=show_skipped)
    head = verdict_lines(result, color) + [""]
    sections = {"Inputs": inputs}
    if facts:
        sections["Facts"] = facts
    body = render(result.report, "text", facts=sections, skipped=show_skipped, color="always" if color else "never")
    return "\n".join(head) + "\n" + body
