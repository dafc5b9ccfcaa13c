"""`ncdoc triage`'s report: the verdict first (the most likely cause, its evidence lines and fix),
then every finding by stage, the inputs as read, and the facts; as text, markdown or JSON.

    render(result, fmt="text"|"markdown"|"json", *, color="auto", show_skipped=False) -> str
"""

from __future__ import annotations

from ncdoc.output.parts import one_line

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any

FORMATS = ("text", "markdown", "json")


def _gbps(x: Any) -> str:
    return "?" if x is None else f"{x:.1f} GB/s"


def facts_summary(facts: dict[str, Any]) -> list[str]:
    """The facts in a few lines: NCCL, transport, GDR, scale, NICs, bandwidth against expectation, ports."""
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
    lines.extend(_curves(facts))
    ports = facts.get("ports") or []
    if ports:
        lines.append("ports: " + ", ".join(
            f"{p['device']}:{p['port']} {p.get('state') or '?'}"
            + (f" {p['rate_gbps']:g}G" if p.get("rate_gbps") else "")
            + (f" {p['link_layer']}" if p.get("link_layer") else "") for p in ports[:8])
            + (" ..." if len(ports) > 8 else ""))
    return lines


def _curves(facts: dict[str, Any]) -> list[str]:
    """Each nccl-tests input's busbw by size as a one-line sparkline (ASCII where stdout cannot take blocks)."""
    import os
    import sys
    from ncdoc.report.sparkline import curve_line
    try:
        "\u2581\u2588".encode(getattr(sys.stdout, "encoding", None) or "ascii")
        plain = False
    except (LookupError, UnicodeEncodeError):
        plain = True
    out = []
    for src in facts.get("sources") or ():
        curve = (src.get("facts") or {}).get("curve") if src.get("kind") == "nccl_tests" else None
        line = curve_line(curve or (), ascii_only=plain)
        if line:
            out.append(f"{line} ({os.path.basename(str(src.get('path') or ''))})")
    return out


def _stage_title(result, f) -> str:
    from ncdoc.engine.rules import STAGE_TITLES
    return STAGE_TITLES.get(result.stage_of(f), "")


def verdict_lines(result, color: bool) -> list[str]:
    """The most likely cause, its evidence (file:line) and its fix; or that nothing was found."""
    from ncdoc.output.color import paint, severity
    v = result.verdict
    if v is None:
        c = getattr(result, "conclusion", None) or {}
        if c.get("state") == "inconclusive":
            out = [paint("Verdict: inconclusive: ", "bold", color) + one_line("; ".join(c.get("reasons") or ()))]
            out += [f"  to decide: {one_line(n)}" for n in c.get("needs") or ()]
            return out
        return [paint("Verdict: no problem found in what was given", "bold", color)]
    stage = _stage_title(result, v)
    out = [paint("Verdict: ", "bold", color) + severity(v.severity.upper(), v.severity, color)
           + f" {one_line(v.code)} {one_line(v.name)}" + (f" ({stage})" if stage else ""),
           f"  {one_line(v.message)}"]
    for e in v.evidence:
        where = e.where()
        out.append(f"    {one_line(where) + ': ' if where else ''}{one_line(e.text)}")
    if v.fix:
        out.append(f"  fix: {one_line(v.fix.strip())}")
    if v.env_patch:
        out.append("  env: " + one_line(" ".join(f"{k}={val}" if val is not None else f"unset {k}"
                                                 for k, val in v.env_patch.items())))
    return out


def verdict_items(result) -> list[str]:
    """The verdict as list items (markdown escapes them as it renders them)."""
    v = result.verdict
    if v is None:
        c = getattr(result, "conclusion", None) or {}
        if c.get("state") == "inconclusive":
            return ["inconclusive: " + "; ".join(c.get("reasons") or ())] + [
                f"to decide: {n}" for n in c.get("needs") or ()]
        return ["no problem found in what was given"]
    stage = _stage_title(result, v)
    items = [f"{v.severity.upper()} {v.code} {v.name}" + (f" ({stage})" if stage else "") + f": {v.message}"]
    items += [f"evidence: {e.where() + ': ' if e.where() else ''}{e.text}" for e in v.evidence]
    if v.fix:
        items.append(f"fix: {v.fix.strip()}")
    return items


def input_lines(result, verbose: bool = False) -> list[str]:
    """Each input as read: its kind, the parsers that found something in it, notes; with `verbose` why it was
    taken for that kind, and which scanner read an NCCL log (the native one when ncdoc_fast is installed)."""
    scanner = ""
    if verbose and any(i.kind == "nccl_log" or "nccl_log" in (i.read_as or ()) for i in result.inputs):
        from ncdoc.evidence.nccl_log_native import describe
        scanner = f"; log scanner: {describe()}"
    return [f"{i.path}: {i.kind.replace('_', ' ')}" + (f" (read as {', '.join(i.read_as)})"
                                                       if i.read_as and i.read_as != (i.kind,) else "")
            + "".join(f"; {n}" for n in i.notes)
            + (f"; detected: {getattr(i, 'detected', '')}" if verbose and getattr(i, "detected", "") else "")
            + (scanner if i.kind == "nccl_log" or "nccl_log" in (i.read_as or ()) else "")
            for i in result.inputs]


def render(result, fmt: str = "text", *, color="auto", show_skipped: bool = False, stream=None,
           verbose: bool = False) -> str:
    """The triage report in `fmt`; colour (text only) resolved by ncdoc.output.color.use_color."""
    if fmt == "json":
        from ncdoc.startup.json_dump import dumps_indented     # json.dumps(indent=2, default=str)'s text
        return dumps_indented(result.to_dict()) + "\n"
    from ncdoc.output import render as render_report
    facts = facts_summary(result.facts)
    if fmt == "markdown":
        sections = {"Verdict": verdict_items(result), "Inputs": input_lines(result, verbose)}
        if facts:
            sections["Facts"] = facts
        return render_report(result.report, "markdown", title="ncdoc triage", facts=sections, skipped=show_skipped)
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    from ncdoc.output.color import use_color
    enabled = use_color(color, stream)
    sections = {"Inputs": input_lines(result, verbose)}
    if facts:
        sections["Facts"] = facts
    body = render_report(result.report, "text", facts=sections, skipped=show_skipped, color=enabled)
    return "\n".join(verdict_lines(result, enabled) + [""]) + "\n" + body


__all__ = ["FORMATS", "facts_summary", "verdict_lines", "verdict_items", "input_lines", "render"]
