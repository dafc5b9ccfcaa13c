"""Logs of many ranks made from a real one: the per-rank init of NCCL 2.28.9 on an H200
(tests/fixtures/logs/h200_torchrun_1rank_2_28.log) repeated for every rank of a job, each with its own
host, pid, device, rank, comm pointer and address, eight ranks a node, the ranks of a node writing at
once (their lines interleaved a few at a time). Used by the scan equivalence tests and by
benchmarks/log_throughput.py; what it writes is the same for the same arguments.

    write_ranks_log(path, ranks=4096)          # -> bytes written
"""

from __future__ import annotations

import random
import re
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "logs" / "h200_torchrun_1rank_2_28.log"
_PREFIX = re.compile(r"^vm:502:(\d+) \[0\] ")


def _template() -> tuple[str, list[tuple[str, str]]]:
    """The launch line, and each line of the one rank as (thread id, text after the prefix) ("" for a line
    the application printed)."""
    launch, body = "", []
    for line in TEMPLATE.read_text().splitlines():
        m = _PREFIX.match(line)
        if m:
            body.append((m.group(1), line[m.end():]))
        elif line.startswith("$ "):
            launch = line
        else:
            body.append(("", line))
    return launch, body


def rank_lines(body: list[tuple[str, str]], rank: int, nranks: int, commid: str) -> list[str]:
    node, dev = divmod(rank, 8)
    host, pid = f"h200-{node:05d}", 10000 + rank
    ip = f"10.{node >> 8 & 255}.{node & 255}.{dev + 2}"
    comm = f"0x{0x3ea48d50 + rank * 0x1000:x}"
    out = []
    for tid, text in body:
        text = (text.replace("0x3ea48d50", comm).replace("0x11252c3b3ebdcc10", commid)
                .replace("192.0.2.2", ip)
                .replace("rank 0 nranks 1", f"rank {rank} nranks {nranks}")
                .replace("rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0",
                         f"rank {rank} nRanks {nranks} nNodes {max(1, nranks // 8)} localRanks {min(8, nranks)} "
                         f"localRank {dev}")
                .replace("cudaDev 0 nvmlDev 0 busId 60", f"cudaDev {dev} nvmlDev {dev} busId {0x60 + 0x10 * dev:x}")
                .replace("rank 0:", f"rank {rank}:"))
        if tid:
            t = pid if tid == "502" else pid + int(tid) - 502
            out.append(f"{host}:{pid}:{t} [{dev}] {text}\n")
        else:
            out.append(text + "\n")
    return out


_KEEP = ("comm 0x", "NCCL version", "Using", "Init ", "No device", "Assigned", "cudaDriverVersion")


def write_ranks_log(path: str | Path, ranks: int, seed: int = 14, keep: float = 1.0) -> int:
    """Write a log of `ranks` ranks' init to `path`; returns its size in bytes. `keep` < 1: only that share of
    each rank's lines (every n-th), and the ones that name its comm, version and network."""
    launch, body = _template()
    if keep < 1:
        every = max(1, round(1 / keep))
        body = [x for i, x in enumerate(body) if i % every == 0 or any(k in x[1] for k in _KEEP)]
    rnd = random.Random(seed)
    commid = f"0x{rnd.getrandbits(64):016x}"
    written = 0
    with open(path, "w") as out:
        out.write(launch + "\n")
        written += len(launch) + 1
        for first in range(0, ranks, 8):
            node = [rank_lines(body, r, ranks, commid) for r in range(first, min(first + 8, ranks))]
            at = [0] * len(node)
            live = list(range(len(node)))
            while live:
                for i in list(live):
                    k = rnd.randint(1, 4)
                    chunk = node[i][at[i]:at[i] + k]
                    at[i] += k
                    if at[i] >= len(node[i]):
                        live.remove(i)
                    text = "".join(chunk)
                    out.write(text)
                    written += len(text.encode())
    return written


__all__ = ["write_ranks_log", "rank_lines", "TEMPLATE"]
