"""Charts as inline SVG, drawn with matplotlib's SVG backend (no display, no network, no JavaScript).

Why matplotlib (docs/report.md has the figures): it is the best-kept Python plotting library, it
renders offline to static SVG that reads without JavaScript and prints as vectors, and a log2 size
axis, error bars and shaded regions are one call each. Its import costs about a second, so it is
imported here only, when a chart is drawn; `ncdoc check` and the text commands never load it.

The SVG is made fit to sit inline in one HTML page with other charts: text stays text
(svg.fonttype none: small, selectable, drawn in the page's font), ids get a per-chart prefix so
two charts never share one, and the <style>, <metadata> and namespace URLs matplotlib writes are
taken out (the page has its own style, and no URL at all appears in the report). Every series
carries an id ("<chart>-series-<n>") and its points one element each, which the browser tests count.
"""

from __future__ import annotations

import io
import re
from typing import Sequence

from ncdoc.report.curves import CurveSet
from ncdoc.startup.compiled_patterns import precompiled

# Okabe-Ito, in the order series take them; dashes and markers differ too, for greyscale prints.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
ROLE_STYLE = {"baseline": ("#7f7f7f", "--", "s"), "tuned": ("#0072B2", "-", "o"),
              "guard-baseline": ("#7f7f7f", "--", "s"), "guard-tuned": ("#009E73", "-", "o")}


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed: charts are replaced by their tables."""


def _plt():
    try:
        import matplotlib
    except ImportError as exc:              # pragma: no cover - a dependency, but keep the report alive
        raise ChartsUnavailable(f"matplotlib is not installed ({exc}); the data tables below show the numbers") \
            from None
    matplotlib.use("svg", force=True)
    from matplotlib.figure import Figure
    return matplotlib, Figure


def _rc(matplotlib) -> dict:
    return {"svg.fonttype": "none", "svg.hashsalt": "ncdoc", "font.family": "sans-serif",
            "font.sans-serif": ["DejaVu Sans", "Verdana", "Arial"], "font.size": 10,
            "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
            "grid.color": "#dddddd", "grid.linewidth": 0.6, "axes.edgecolor": "#555555",
            "legend.frameon": False, "figure.dpi": 72, "axes.axisbelow": True}


_ID = precompiled(r'\bid="([^"]+)"')


def _inline(svg: str, prefix: str) -> str:
    """matplotlib's document as an element for an HTML page (see the module docstring)."""
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r"<style[^>]*>.*?</style>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = re.sub(r'\s+version="[^"]*"', "", svg, count=1)
    ids = set(_ID.findall(svg))
    for old in sorted(ids, key=len, reverse=True):
        new = f"{prefix}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"url(#{old})", f"url(#{new})") \
                 .replace(f'href="#{old}"', f'href="#{new}"')
    return svg.replace("<svg ", f'<svg class="chart" data-chart="{prefix}" ', 1).strip()


def _save(fig, prefix: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return _inline(buf.getvalue(), prefix)


def _size_label(n: float) -> str:
    units, i = ("B", "K", "M", "G", "T"), 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f}{units[i]}"


def busbw_chart(curves: CurveSet, chart_id: str) -> str:
    """busbw (GB/s) against message size on a log2 axis: one line per series, one marker per size,
    the expected figure and the NIC line rate as horizontal lines, the bandwidth-bound region shaded."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 4.2))
        ax = fig.add_subplot()
        sizes = sorted({s for ser in curves.series for s, _ in ser.points})
        lo, hi = sizes[0], sizes[-1]
        start = curves.bandwidth_bound_from()
        if start is not None and start < hi:
            ax.axvspan(start, hi, color="#56B4E9", alpha=0.10, lw=0, label="bandwidth-bound (≥ 80 % of peak)")
        k = 0
        for n, ser in enumerate(curves.series):
            if ser.role in ROLE_STYLE:
                colour, ls, marker = ROLE_STYLE[ser.role]
            else:
                colour, ls, marker = PALETTE[k % len(PALETTE)], "-", MARKERS[k % len(MARKERS)]
                k += 1
            xs = [s for s, _ in ser.points]
            ys = [bw for _, bw in ser.points]
            (line,) = ax.plot(xs, ys, color=colour, linestyle=ls, marker=marker, markersize=5, linewidth=1.8,
                              label=ser.label)
            line.set_gid(f"series-{n}")
        if curves.expected_busbw:
            ax.axhline(curves.expected_busbw, color="#000000", linestyle="--", linewidth=1.1,
                       label=f"expected {curves.expected_busbw:.0f} GB/s")
        if curves.line_rate and (not curves.expected_busbw or abs(curves.line_rate - curves.expected_busbw) > 1):
            ax.axhline(curves.line_rate, color="#555555", linestyle=":", linewidth=1.1,
                       label=f"NIC line rate {curves.line_rate:.0f} GB/s")
        ax.set_xscale("log", base=2)
        ticks = [2 ** e for e in range(max(0, lo.bit_length() - 1), hi.bit_length() + 1)]
        step = max(1, len(ticks) // 12)
        ticks = ticks[::step]
        ax.set_xticks(ticks, [_size_label(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlim(lo / 1.3, hi * 1.3)
        top = max([p or 0.0 for p in (curves.expected_busbw, curves.line_rate)] + [s.peak or 0.0 for s in curves.series])
        ax.set_ylim(0, max(top, 1e-3) * 1.1)
        ax.set_xlabel("message size (bytes, log2)")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9.5)
        return _save(fig, chart_id)


# The tuner's stages (ncdoc.tuner.study), each with its own marker and colour, in the order they run.
STAGES = (("start", "baseline and start points", "s", "#7f7f7f"), ("screen", "screening", "o", "#0072B2"),
          ("refine", "refinement", "^", "#009E73"), ("joint", "joint search", "D", "#CC79A7"))


def _stage_style(stage: str) -> tuple[str, str, str]:
    for key, label, marker, colour in STAGES:
        if stage == key:
            return label, marker, colour
    return (stage or "search"), "v", "#E69F00"


def history_chart(trials: Sequence[tuple[int, float | None, str, str]], chart_id: str, *,
                  metric: str = "score") -> str:
    """Each trial's score (1.0 = the baseline) by stage, trials stopped early as hollow markers at the
    score of their runs so far, failed ones as crosses on the bottom edge, and the best so far as a step
    line. The y axis spans the scores (a 2 % gain on an axis from 0 would be a flat line)."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 3.8))
        ax = fig.add_subplot()
        done = [(n, v, st) for n, v, state, st in trials if v is not None and state == "complete"]
        early = [(n, v) for n, v, state, _ in trials if v is not None and state == "stopped early"]
        failed = [n for n, v, state, _ in trials if state in ("failed", "running", "waiting") or
                  (v is None and state == "stopped early")]
        values = [v for _, v, _ in done] + [v for _, v in early] + [1.0]
        lo, hi = min(values), max(values)
        pad = max(0.02, (hi - lo) * 0.12)
        bottom, top = max(0.0, lo - pad), hi + pad
        stages = list(dict.fromkeys(st for _, _, st in done))
        for st in stages:
            label, marker, colour = _stage_style(st)
            pts = [(n, v) for n, v, s in done if s == st]
            (line,) = ax.plot([n for n, _ in pts], [v for _, v in pts], linestyle="none", marker=marker,
                              markersize=6, color=colour, label=f"{label} ({len(pts)})")
            line.set_gid(f"complete-{st or 'search'}")
        if early:
            (pe,) = ax.plot([n for n, _ in early], [v for _, v in early], linestyle="none", marker="o",
                            markersize=6, markerfacecolor="none", markeredgecolor="#555555",
                            label=f"stopped early ({len(early)}): its runs so far")
            pe.set_gid("stopped-early")
        if done:
            best, xs, ys = None, [], []
            for n, v, _ in sorted(done):
                best = v if best is None or v > best else best
                xs.append(n)
                ys.append(best)
            last = max(n for n, _, _, _ in trials)
            if xs[-1] < last:
                xs.append(last)
                ys.append(ys[-1])
            (line,) = ax.step(xs, ys, where="post", color="#0072B2", linewidth=2, label="best so far")
            line.set_gid("best-so-far")
        if failed:
            (fx,) = ax.plot(failed, [bottom + (top - bottom) * 0.03] * len(failed), linestyle="none", marker="x",
                            markersize=7, color="#D55E00", label=f"failed ({len(failed)})")
            fx.set_gid("failed")
        ax.axhline(1.0, color="#000000", linestyle="--", linewidth=1, label="baseline (1.0)")
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("trial")
        ax.set_ylabel(metric)
        ax.set_ylim(bottom, top)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9.5)
        return _save(fig, chart_id)


def effects_chart(effects: Sequence[tuple[str, float, float | None, bool, float | None]], chart_id: str, *,
                  noise_pct: float | None = None, confidence: str = "") -> str:
    """Per variable: the score change when it is removed from the tuned env (%), ± its spread where
    known, the confidence bound on the drop as a bar mark, kept (solid) or dropped (grey, hatched), and
    the run-to-run spread as a band around 0."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 1.2 + 0.5 * len(effects)))
        ax = fig.add_subplot()
        names = [e[0] for e in effects]
        vals = [e[1] for e in effects]
        errs = [e[2] or 0.0 for e in effects]
        colours = ["#0072B2" if e[3] else "#bbbbbb" for e in effects]
        if noise_pct:
            ax.axvspan(-noise_pct, noise_pct, color="#E69F00", alpha=0.18, lw=0,
                       label=f"run-to-run spread (± {noise_pct:.1f} %)")
        bars = ax.barh(range(len(effects)), vals, xerr=errs if any(errs) else None, color=colours,
                       edgecolor="#333333", linewidth=0.6, height=0.55,
                       error_kw={"ecolor": "#333333", "capsize": 3, "elinewidth": 1})
        for i, bar in enumerate(bars):
            bar.set_gid(f"effect-{i}")
            bar.set_hatch("" if effects[i][3] else "//")
        bounds = [(i, e[4]) for i, e in enumerate(effects) if e[4] is not None]
        if bounds:
            (bm,) = ax.plot([b for _, b in bounds], [i for i, _ in bounds], linestyle="none", marker="|",
                            markersize=22, markeredgewidth=2.5, color="#000000",
                            label=f"the drop is at least this ({confidence or 'one-sided'} confidence)")
            bm.set_gid("bounds")
        for i, v in enumerate(vals):
            ax.annotate(f"{v:+.1f} %", (v, i), xytext=(-4 if v < 0 else 4, 0), textcoords="offset points",
                        ha="right" if v < 0 else "left", va="center", fontsize=9.5)
        ax.set_yticks(range(len(effects)), names)
        ax.invert_yaxis()
        span = max([abs(v) for v in vals] + [noise_pct or 0.0, 1.0])
        ax.set_xlim(-span * 1.25 if min(vals) < 0 else -span * 0.3, span * 1.25 if max(vals) > 0 else span * 0.3)
        ax.axvline(0, color="#000000", linewidth=0.8)
        ax.set_xlabel("score change when the variable is removed from the recommended env (%); "
                      "solid: kept, grey hatched: dropped")
        ax.grid(axis="y", visible=False)
        if noise_pct or bounds:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9.5)
        return _save(fig, chart_id)


def guard_chart(rows: Sequence[tuple[str, int, float | None, bool]], chart_id: str, *,
                noise_pct: float | None = None) -> str:
    """The guard sweep: tuned against baseline (%) at each size of each collective, a line and marker per
    collective, sizes found slower marked with a large cross, the run-to-run spread as a band."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 3.8))
        ax = fig.add_subplot()
        if noise_pct:
            ax.axhspan(-noise_pct, noise_pct, color="#E69F00", alpha=0.18, lw=0,
                       label=f"run-to-run spread (± {noise_pct:.1f} %)")
        colls = list(dict.fromkeys(r[0] for r in rows))
        sizes = sorted({r[1] for r in rows})
        for k, c in enumerate(colls):
            pts = [(s, ch) for cc, s, ch, _ in rows if cc == c and ch is not None]
            if not pts:
                continue
            (line,) = ax.plot([s for s, _ in pts], [ch for _, ch in pts], color=PALETTE[k % len(PALETTE)],
                              marker=MARKERS[k % len(MARKERS)], linestyle=("-", "--", "-.", ":")[k % 4],
                              markersize=5, linewidth=1.5, label=c)
            line.set_gid(f"guard-{k}")
        bad = [(s, ch) for _, s, ch, slower in rows if slower and ch is not None]
        if bad:
            (bx,) = ax.plot([s for s, _ in bad], [ch for _, ch in bad], linestyle="none", marker="X",
                            markersize=11, color="#D55E00", label="slower beyond noise")
            bx.set_gid("guard-slower")
        ax.axhline(0, color="#000000", linewidth=0.8)
        ax.set_xscale("log", base=2)
        if sizes:
            lo, hi = sizes[0], sizes[-1]
            ticks = [2 ** e for e in range(max(0, lo.bit_length() - 1), hi.bit_length() + 1)]
            ticks = ticks[::max(1, len(ticks) // 12)]
            ax.set_xticks(ticks, [_size_label(t) for t in ticks])
            ax.minorticks_off()
            ax.set_xlim(lo / 1.3, hi * 1.3)
        ax.set_xlabel("message size (bytes, log2)")
        ax.set_ylabel("tuned vs baseline busbw (%)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9.5)
        return _save(fig, chart_id)


__all__ = ["busbw_chart", "history_chart", "effects_chart", "guard_chart", "STAGES", "ChartsUnavailable", "PALETTE"]
