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


_ID = re.compile(r'\bid="([^"]+)"')


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


def history_chart(trials: Sequence[tuple[int, float | None, str]], chart_id: str, *, metric: str = "score") -> str:
    """Each trial's score (1.0 = the baseline) and the best so far as a step line; failed trials marked at 0."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 3.6))
        ax = fig.add_subplot()
        done = [(n, v) for n, v, st in trials if v is not None and st == "complete"]
        failed = [n for n, v, st in trials if st != "complete"]
        if done:
            (pts,) = ax.plot([n for n, _ in done], [v for _, v in done], linestyle="none", marker="o",
                             markersize=5, color="#7f7f7f", label="trial")
            pts.set_gid("series-0")
            best, xs, ys = None, [], []
            for n, v in done:
                best = v if best is None or v > best else best
                xs.append(n)
                ys.append(best)
            (line,) = ax.step(xs, ys, where="post", color="#0072B2", linewidth=2, label="best so far")
            line.set_gid("series-1")
        if failed:
            (fx,) = ax.plot(failed, [0] * len(failed), linestyle="none", marker="x", markersize=7,
                            color="#D55E00", label="failed or pruned")
            fx.set_gid("series-2")
        ax.axhline(1.0, color="#000000", linestyle="--", linewidth=1, label="baseline (1.0)")
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("trial")
        ax.set_ylabel(metric)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9.5)
        return _save(fig, chart_id)


def effects_chart(effects: Sequence[tuple[str, float, float | None, bool]], chart_id: str) -> str:
    """Per variable: the score change when it is removed from the tuned env (%), ± its spread, kept or dropped."""
    matplotlib, Figure = _plt()
    with matplotlib.rc_context(_rc(matplotlib)):
        fig = Figure(figsize=(11.0, 0.9 + 0.42 * len(effects)))
        ax = fig.add_subplot()
        names = [e[0] for e in effects]
        vals = [e[1] for e in effects]
        errs = [e[2] or 0.0 for e in effects]
        colours = ["#0072B2" if e[3] else "#bbbbbb" for e in effects]
        bars = ax.barh(range(len(effects)), vals, xerr=errs, color=colours, edgecolor="#333333", linewidth=0.6,
                       error_kw={"ecolor": "#333333", "capsize": 3, "elinewidth": 1})
        for i, bar in enumerate(bars):
            bar.set_gid(f"effect-{i}")
            bar.set_hatch("" if effects[i][3] else "//")
        ax.set_yticks(range(len(effects)), names)
        ax.invert_yaxis()
        ax.axvline(0, color="#000000", linewidth=0.8)
        ax.set_xlabel("score change without it (%); blue: kept, grey hatched: dropped (within noise)")
        ax.grid(axis="y", visible=False)
        return _save(fig, chart_id)


__all__ = ["busbw_chart", "history_chart", "effects_chart", "ChartsUnavailable", "PALETTE"]
