"""Simulated results printed exactly as nccl-tests 2.19.6 prints them (src/util.cu, nccl_facts.md 5.3)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ncdoc.tuner.sim.cluster import SimCluster
from ncdoc.tuner.sim.revisions import parse_version
from ncdoc.tuner.sim.run import counts, simulate_rows

NCCL_TESTS_VERSION = "2.19.6"
# Bus ids of the eight GPUs of an HGX H100 board, used for the device lines.
_BUS_IDS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_REDUCING = ("all_reduce", "reduce_scatter", "reduce")
_ROOTED = ("broadcast", "reduce")


def float_str(value: float, width: int) -> str:
    """getFloatStr: %.2f, else %.1f, else %.0f, else %.1e (%.0e below width 7), right-aligned."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    s = f"{value:{width}.{1 if width >= 7 else 0}e}"
    return s[:width]


def _c_g(value: float) -> str:
    return f"{value:g}"


def _step(sizes: Sequence[int]) -> tuple[int, str]:
    """nccl-tests' `step: N(factor|bytes)`: a constant ratio or difference; else the first ratio."""
    if len(sizes) < 2 or sizes[0] <= 0:
        return 1048576, "bytes"
    ratio, diff = sizes[1] // sizes[0], sizes[1] - sizes[0]
    if ratio > 1 and all(b == a * ratio for a, b in zip(sizes, sizes[1:])):
        return ratio, "factor"
    if diff > 0 and all(b - a == diff for a, b in zip(sizes, sizes[1:])):
        return diff, "bytes"
    return (ratio, "factor") if ratio > 1 else (max(diff, 1), "bytes")


def nccl_tests_text(cluster: SimCluster, env: Mapping[str, str], collective: str, sizes: Sequence[int], *,
                    seed: int = 0, table: Sequence[Any] = ()) -> str:
    """The nccl-tests stdout of `<collective>_perf -b min -e max` on the simulated cluster.

    One process per GPU (as under mpirun/srun), float data, sum, 20 iterations. Both the
    out-of-place and in-place columns are simulated (independent noise). Raises SimTrialError
    where the real run would fail. `table`: tuner-table rules loaded through NCCL's example plugin.
    """
    prog = f"{collective}_perf"
    code = parse_version(cluster.nccl_version)
    vcode = code[0] * 10000 + code[1] * 100 + code[2]
    sizes = [int(s) for s in sizes]
    out_rows = simulate_rows(cluster, env, collective, sizes, seed=seed, repeat_index=0, in_place=False, table=table)
    in_rows = simulate_rows(cluster, env, collective, sizes, seed=seed, repeat_index=0, in_place=True, table=table)
    step, kind = _step(sizes)
    lines = [
        f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={vcode} nccl-library={vcode}",
        f"# Collective test starting: {prog}",
        f"# nThread 1 nGpus 1 minBytes {min(sizes, default=0)} maxBytes {max(sizes, default=0)} step: {step}({kind}) "
        "warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(cluster.nranks):
        node, dev = divmod(rank, cluster.gpus_per_node)
        host = f"node{node + 1:02d}"
        bus = _BUS_IDS[dev] if dev < len(_BUS_IDS) else (0x10 * dev) & 0xFF
        lines.append(f"#  Rank {rank:2d} Group {0:2d} Pid {20000 + rank:6d} on {host:>10s} device {dev:2d} "
                     f"[{0:04x}:{bus:02x}:{0:02x}] {cluster.gpu_name}")
    lines += [
        "#",
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       "
        "in-place          ",
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  "
        f"{'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} ",
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
        f"{'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s} ",
    ]
    redop = "sum" if collective in _REDUCING else "none"
    root = 0 if collective in _ROOTED else -1
    total, rows = 0.0, 0
    for size, o, i in zip(sizes, out_rows, in_rows):
        c = counts(collective, size, cluster.nranks)
        line = f"{c.printed_size:12d}  {c.count:12d}  {'float':>8s}  {redop:>6s}  {root:6d}"
        for r in (o, i):
            line += f"  {float_str(r.time_us, 7)}  {float_str(r.algbw, 6)}  {float_str(r.busbw, 6)}  {_c_g(0):>6s}"
            total += r.busbw
            rows += 1
        lines.append(line)
    avg = total / rows if rows else 0.0
    lines += [
        f"# {'Out of bounds values':<20s} : 0 OK",
        f"# {'Avg bus bandwidth':<20s} : {_c_g(avg)} ",
        "#",
        f"# Collective test concluded: {prog}",
        "#",
        "",
    ]
    return "\n".join(lines) + "\n"
