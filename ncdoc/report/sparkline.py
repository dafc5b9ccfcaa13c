"""A curve in one line of text, for terminals: busbw by size as block characters."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII = "_.-~=+*#"          # the same eight levels where the terminal cannot print blocks


def sparkline(values: Sequence[float], *, ascii_only: bool = False) -> str:
    """Each value as one of eight levels, scaled to the largest (0 is the lowest)."""
    ramp = ASCII if ascii_only else BLOCKS
    top = max((v for v in values if v is not None), default=0.0)
    if top <= 0:
        return ramp[0] * len(values)
    return "".join(ramp[min(len(ramp) - 1, int(v / top * (len(ramp) - 1) + 0.5))] if v is not None else " "
                   for v in values)


def size_text(n: int) -> str:
    units, i, v = ("B", "K", "M", "G", "T"), 0, float(n)
    while v >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.0f}{units[i]}" if v == int(v) else f"{v:.1f}{units[i]}"


def curve_line(points: Sequence[Sequence[float]], *, ascii_only: bool = False) -> str:
    """'busbw 8B..8G ▁▁▁▂▃▅▇█ peak 249.8 GB/s at 2G' for [[size, busbw], ...]; '' when empty."""
    pts = sorted((int(p[0]), float(p[1])) for p in points if p and len(p) >= 2)
    if not pts:
        return ""
    peak = max(pts, key=lambda p: p[1])
    return (f"busbw {size_text(pts[0][0])}..{size_text(pts[-1][0])} "
            f"{sparkline([bw for _, bw in pts], ascii_only=ascii_only)} "
            f"peak {peak[1]:.1f} GB/s at {size_text(peak[0])}")


__all__ = ["sparkline", "curve_line", "size_text"]
