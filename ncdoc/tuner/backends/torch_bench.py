"""The torch backend's program: a torch.distributed NCCL benchmark that takes nccl-tests' flags and
prints nccl-tests' format, so it runs through the same launchers and the same trust checks.

    python -m ncdoc.tuner.backends.torch_bench all_reduce -b 1M -e 1G -f 2 -g 1 -n 20 -w 5 -c 1 -T 300 \
        --master node01:29517

One process per rank under srun or mpirun (rank, world and local rank from SLURM_PROCID /
SLURM_NTASKS / SLURM_LOCALID, OMPI_COMM_WORLD_*, PMI_RANK / PMI_SIZE / MPI_LOCALRANKID); alone
with -g N (this machine, a Ray task) it starts N ranks itself. Rank 0 prints the table: time per
operation averaged over iterations after the warm-up and over ranks, algbw = S / t, busbw = algbw
x nccl-tests' factor (doc/PERFORMANCE.md); the in-place columns repeat the out-of-place run. The
results are checked (-c: that many checked runs per size): every rank's input holds known values,
every output element is compared with what the collective must give, and #wrong counts the
elements that differ, summed over ranks. NCCL's own INFO lines (NCCL_DEBUG=INFO) go to each
rank's stdout as with nccl-tests. Needs torch with CUDA and NCCL on every node.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Sequence

ELEMENT = 4          # float32, as nccl-tests' default
VERSION = "torch-bench 1"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def bus_factor(collective: str, n: int) -> float:
    if n <= 1:
        return 1.0
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def parse_size(text: str) -> int:
    t = text.strip().upper()
    if t[-1:] in _SUFFIX:
        return int(float(t[:-1]) * _SUFFIX[t[-1]])
    return int(t)


def parse_args(argv: Sequence[str]) -> tuple[str, dict]:
    if not argv or argv[0] not in COLLECTIVES:
        raise SystemExit(f"torch_bench: the first argument is the collective ({', '.join(COLLECTIVES)})")
    opts = {"-b": "32M", "-e": "32M", "-f": "2", "-g": "1", "-n": "20", "-w": "5", "-c": "1", "-T": "0",
            "--master": ""}
    rest = list(argv[1:])
    while rest:
        flag = rest.pop(0)
        if flag in opts and rest:
            opts[flag] = rest.pop(0)
        else:
            raise SystemExit(f"torch_bench: unknown or incomplete flag {flag!r}")
    return argv[0], opts


def sizes_of(opts: dict) -> list[int]:
    lo, hi, f = parse_size(opts["-b"]), parse_size(opts["-e"]), max(2, int(opts["-f"]))
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= f
    return out


def counts(collective: str, size: int, world: int) -> tuple[int, int]:
    """(elements each rank sends, elements each rank receives) for an nccl-tests size (bytes)."""
    total = max(world, size // ELEMENT // world * world)
    if collective == "all_gather":
        return total // world, total
    if collective == "reduce_scatter":
        return total, total // world
    return total, total


def expected(collective: str, rank: int, world: int, n_out: int) -> list[tuple[int, float]]:
    """What rank `rank`'s output must hold when every rank r's input is r + 1 (alltoall: chunk j of
    rank r is r * world + j + 1): (elements, value) runs. None-valued ranks (reduce's non-roots) hold
    nothing to check."""
    total = world * (world + 1) / 2
    if collective in ("all_reduce", "reduce_scatter"):
        return [(n_out, total)]
    if collective == "reduce":
        return [(n_out, total)] if rank == 0 else []
    if collective == "broadcast":
        return [(n_out, 1.0)]
    if collective == "all_gather":
        return [(n_out // world, float(j + 1)) for j in range(world)]
    if collective == "alltoall":
        return [(n_out // world, float(j * world + rank + 1)) for j in range(world)]
    if collective == "sendrecv":
        return [(n_out, float((rank - 1) % world + 1))]
    raise ValueError(collective)


def header(collective: str, opts: dict, sizes: Sequence[int], devices: Sequence[tuple[str, int, str, str]],
           gpus_per_rank: int) -> list[str]:
    """nccl-tests' header: the run's parameters and one line per rank (host, device, bus id, name)."""
    lines = [f"# nccl-tests version {VERSION} (ncdoc's torch.distributed benchmark, nccl-tests format)",
             f"# Collective test starting: {collective}_perf",
             f"# nThread 1 nGpus {gpus_per_rank} minBytes {min(sizes)} maxBytes {max(sizes)} step: {opts['-f']}(factor) "
             f"warmup iters: {opts['-w']} iters: {opts['-n']} agg iters: 1 validation: {opts['-c']} graph: 0 "
             "unalign: 0", "#", "# Using devices"]
    for r, (host, dev, bus, name) in enumerate(devices):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {os.getpid() + r:6d} on {host:>10s} device {dev:2d} [{bus}] {name}")
    lines += ["#",
              "#                                                              out-of-place                       "
              "in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong ",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
              "(GB/s)  (GB/s)         "]
    return lines


def float_str(value: float, width: int) -> str:
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return f"{value:{width}.1e}"[:width]


def row(collective: str, size: int, count: int, time_us: float, world: int, wrong: int) -> tuple[str, float]:
    """One result line (out-of-place figures repeated in-place) and its busbw."""
    algbw = size / (time_us * 1000.0) if time_us > 0 else 0.0
    busbw = algbw * bus_factor(collective, world)
    redop = "sum" if collective in ("all_reduce", "reduce_scatter", "reduce") else "none"
    root = 0 if collective in ("broadcast", "reduce") else -1
    cells = f"  {float_str(time_us, 7)}  {float_str(algbw, 6)}  {float_str(busbw, 6)}  {wrong:6d}"
    return f"{size:12d}  {count:12d}  {'float':>8s}  {redop:>6s}  {root:6d}" + cells + cells, busbw


def footer(collective: str, busbws: Sequence[float]) -> list[str]:
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    return ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:g} ", "#",
            f"# Collective test concluded: {collective}_perf", "#"]


def launched_rank() -> tuple[int, int, int] | None:
    """(rank, world, local rank) from the launcher's variables, or None when not launched as a rank."""
    for r, w, lr in (("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
                     ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                     ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w]), int(os.environ.get(lr, "0"))
    return None


def _rank(rank: int, world: int, local: int, master: str, collective: str, opts: dict) -> None:
    """One rank's whole run (torch imported here: the formatting above needs none of it)."""
    import datetime

    import torch
    import torch.distributed as dist

    ndev = torch.cuda.device_count()
    torch.cuda.set_device(local % max(1, ndev))
    limit = float(opts["-T"]) or 1800.0
    dist.init_process_group("nccl", init_method=f"tcp://{master}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=limit))
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    bus = getattr(props, "pci_bus_id", None)
    bus_text = f"{getattr(props, 'pci_domain_id', 0):04x}:{bus:02x}:00" if isinstance(bus, int) else "0000:00:00"
    me = (socket.gethostname().split(".")[0], dev, bus_text, props.name)
    devices: list = [None] * world
    dist.all_gather_object(devices, me)
    sizes = sizes_of(opts)
    iters, warmup, checks = int(opts["-n"]), int(opts["-w"]), max(1, int(opts["-c"]))
    lines = header(collective, opts, sizes, devices, 1) if rank == 0 else []
    busbws = []
    try:
        for size in sizes:
            n_in, n_out = counts(collective, size, world)
            x = torch.empty(n_in, dtype=torch.float32, device="cuda")
            y = torch.empty(n_out, dtype=torch.float32, device="cuda")

            def op():
                if collective == "all_reduce":
                    dist.all_reduce(x)
                    return x
                if collective == "all_gather":
                    dist.all_gather_into_tensor(y, x)
                    return y
                if collective == "reduce_scatter":
                    dist.reduce_scatter_tensor(y, x)
                    return y
                if collective == "broadcast":
                    dist.broadcast(x, src=0)
                    return x
                if collective == "reduce":
                    dist.reduce(x, dst=0)
                    return x
                if collective == "alltoall":
                    dist.all_to_all_single(y, x)
                    return y
                for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (rank + 1) % world),
                                                 dist.P2POp(dist.irecv, y, (rank - 1) % world)]):
                    w.wait()
                return y

            def fill():
                if collective == "alltoall":
                    chunk = n_in // world
                    for j in range(world):
                        x[j * chunk:(j + 1) * chunk].fill_(float(rank * world + j + 1))
                else:
                    x.fill_(float(rank + 1))

            wrong = 0
            for _ in range(checks):
                fill()
                out = op()
                torch.cuda.synchronize()
                at = 0
                for n, value in expected(collective, rank, world, out.numel()):
                    wrong += int((out[at:at + n] != value).sum().item())
                    at += n
            fill()
            for _ in range(warmup):
                op()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                op()
            end.record()
            torch.cuda.synchronize()
            stats = torch.tensor([start.elapsed_time(end) * 1000.0 / max(1, iters), float(wrong)], device="cuda")
            dist.all_reduce(stats)
            if rank == 0:
                text, bb = row(collective, n_out * ELEMENT if collective == "all_gather" else n_in * ELEMENT,
                               n_out if collective == "all_gather" else n_in, stats[0].item() / world, world,
                               int(stats[1].item()))
                lines.append(text)
                busbws.append(bb)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        sys.stdout.write("\n".join(lines + footer(collective, busbws)) + "\n")
        sys.stdout.flush()


def _spawned(local: int, world: int, master: str, collective: str, opts: dict) -> None:
    _rank(local, world, local, master, collective, opts)


def main(argv: Sequence[str]) -> int:
    collective, opts = parse_args(argv)
    placed = launched_rank()
    if placed is not None:
        rank, world, local = placed
        master = opts["--master"] or f"127.0.0.1:{29500 + os.getpid() % 1000}"
        _rank(rank, world, local, master, collective, opts)
        return 0
    world = max(1, int(opts["-g"]))
    with socket.socket() as s:            # one machine: the ranks meet on a free local port
        s.bind(("127.0.0.1", 0))
        master = f"127.0.0.1:{s.getsockname()[1]}"
    import torch.multiprocessing as mp
    mp.spawn(_spawned, args=(world, master, collective, opts), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
