"""One simulated nccl-tests run: NCCL's choice per size (layer a), its real time (layer b), noise."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ncdoc.errors import UsageError
from ncdoc.tuner.sim.cluster import SimCluster
from ncdoc.tuner.sim.fabric import true_time_us, view
from ncdoc.tuner.sim.errors import SimTrialError
from ncdoc.tuner.sim.nccl_model import COLLECTIVES, busbw_factor, choose, env_key, model_tables
from ncdoc.tuner.sim.revisions import ALGOS
from ncdoc.tuner.sim.tuning import ll128_supported

TYPE_SIZE = 4          # nccl-tests' default datatype, float


@dataclass(frozen=True)
class SimResult:
    size: int           # bytes, as nccl-tests prints the row (max of send and receive bytes)
    time_us: float
    algbw: float        # GB/s
    busbw: float        # GB/s, nccl-tests factor (doc/PERFORMANCE.md)
    algo: str
    proto: str
    nchannels: int


@dataclass(frozen=True)
class Counts:
    """nccl-tests' byte arithmetic for one requested size (src/<coll>.cu GetCollByteCount)."""
    printed_size: int   # the size column
    count: int          # the count column: elements per rank passed to NCCL
    nccl_bytes: int     # NCCL's nBytes: total buffer for all_gather/reduce_scatter


def counts(collective: str, size: int, nranks: int) -> Counts:
    count = max(0, size) // TYPE_SIZE
    align = ~(16 // TYPE_SIZE - 1)
    if collective in ("all_gather", "reduce_scatter"):
        base = (count // nranks) & align
        return Counts(base * nranks * TYPE_SIZE, base, base * nranks * TYPE_SIZE)
    if collective == "alltoall":
        per = (count // nranks) & align
        return Counts(per * nranks * TYPE_SIZE, per, per * nranks * TYPE_SIZE)
    return Counts(count * TYPE_SIZE, count, count * TYPE_SIZE)


def _unit(*parts: object) -> tuple[float, float]:
    """Two uniforms in (0, 1) from a stable hash of the parts (not Python's salted hash())."""
    h = hashlib.blake2b(repr(parts).encode(), digest_size=16).digest()
    a = (int.from_bytes(h[:8], "little") + 0.5) / 2**64
    b = (int.from_bytes(h[8:], "little") + 0.5) / 2**64
    return a, b


def _noise(cluster: SimCluster, nnodes: int, key: tuple, size: int, in_place: bool) -> float:
    """Multiplicative noise: log-normal jitter plus, rarely, a straggling node."""
    u1, u2 = _unit(key, size, in_place, "jitter")
    z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u2)
    factor = math.exp(cluster.noise_sigma * z)
    if cluster.straggler_prob > 0:
        s1, s2 = _unit(key, size, in_place, "straggler")
        if s1 < 1 - (1 - cluster.straggler_prob) ** nnodes:
            factor *= 1 + cluster.straggler_scale * (0.5 + 0.5 * s2)
    return factor


def simulate_rows(cluster: SimCluster, env: Mapping[str, str], collective: str, sizes: Sequence[int], *,
                  seed: int, repeat_index: int, in_place: bool, table: Sequence[Any] = ()) -> list[SimResult]:
    if collective not in COLLECTIVES:
        raise UsageError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
    tables = model_tables(cluster, env, plugin=bool(table))
    fab = view(cluster, tables)
    n = tables.topo.nranks
    key = (cluster.seed, seed, repeat_index, env_key(env), collective) + ((tuple(table),) if table else ())
    run_seed = int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")
    coll = COLLECTIVES[collective]
    factor = busbw_factor(collective, n)
    out = []
    for size in sizes:
        c = counts(collective, int(size), n)
        choice = choose(tables, collective, c.nccl_bytes, table)
        if coll is not None and choice.proto == "LL128" and not ll128_supported(tables, coll, ALGOS.index(choice.algo)):
            # NCCL's rule keeps LL128 off here; forced on, its 128-byte stores can arrive split or out
            # of order: nccl-tests reports wrong values (NVIDIA/nccl#831: 2 wrong at 8 MB over sockets).
            raise SimTrialError(f"{collective}_perf would report wrong results (#wrong > 0) at {c.printed_size} "
                                f"bytes: LL128 forced (NCCL_PROTO={tables.params.proto_env}) where NCCL's own rule "
                                "disables it (data corruption)", kind="call")
        t = true_time_us(fab, collective, coll, choice, c.nccl_bytes, run_seed)
        t *= _noise(cluster, tables.topo.nnodes, key, c.printed_size, in_place)
        algbw = c.printed_size / (t * 1000.0) if t > 0 else 0.0
        out.append(SimResult(c.printed_size, t, algbw, algbw * factor, choice.algo, choice.proto, choice.nchannels))
    return out
