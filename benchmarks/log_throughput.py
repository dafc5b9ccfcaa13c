#!/usr/bin/env python3
"""How fast ncdoc reads a big NCCL log, next to `grep -c "NCCL WARN"` on the same file.

Builds a log (default 512 MB) in a temporary directory from real line shapes: the per-process
init sequences of the corpus NCCL logs (../shared/corpus, when present) and the format strings
of nccl_facts.md section 6, spread over many jobs with their own hosts, pids, ranks, comm ids
and addresses, interleaved the way ranks write, with WARN lines and (--noise) application
output mixed in. Then, in one run: grep's MB/s, ncdoc's MB/s and peak RSS (parse_nccl_log_file
in a child process; RUSAGE_CHILDREN), and the ratio.

    .venv/bin/python benchmarks/log_throughput.py                 # 512 MB
    .venv/bin/python benchmarks/log_throughput.py --size 64 --noise 0.5
    .venv/bin/python benchmarks/log_throughput.py --floors        # + pure-Python ceilings
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
_PREFIX = re.compile(r"^(\S+?):(\w+):(\w+) \[(\d+)\] (.*)$")
_NEEDS_VARY = re.compile(r"commId|comm 0x|rank \d|10\.99\.91\.63|169\.254\.103\.56")

# nccl_facts.md section 6: the formats, with invented values (one process's init, roughly in order).
SECTION6 = [
    "cudaDriverVersion 12090", "NCCL version 2.30.7+cuda12.9", "Bootstrap: Using {ifname}:{ip}<0>",
    "NET/Plugin: Could not find: libnccl-net.so", "NCCL_SOCKET_IFNAME set by environment to {ifname}",
    "NCCL_IB_HCA set to =mlx5_0:1,mlx5_1:1",
    "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 context=0x55d0c1 "
    "pciPath=/sys/devices/pci0000:00/0000:00:01.0/0000:18:00.0 ar=1 oooRqSize=0",
    "NET/IB : Made virtual device [0] name=mlx5_0 speed=400000 ndevs=1 rail=-1 plane=-1",
    "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB {ifname}:{ip}<0>",
    "Initialized NET plugin IB", "Assigned NET plugin IB to comm", "Using network IB",
    "DMA-BUF is available on GPU device {dev}",
    "[Rank {rank}] ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} "
    "busId {bus}000 commId {commid} - Init START",
    "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'", "NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'",
    "comm {comm} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks 8 localRank {dev} MNNVL 0",
    "Pattern 4, crossNic 0, nChannels 4, bw 40.000000/24.000000, type NVL/PXB, sameChannels 1",
    "Ring 00 : {prev} -> {rank} -> {next}", "Trees [0] {next}/-1/-1->{rank}->{prev} [1] {next}/-1/-1->{rank}->{prev}",
    "P2P Chunksize set to 131072", "Channel 00/0 : {rank}[{dev}] -> {next}[{ndev}] via P2P/CUMEM/read",
    "Channel 01/0 : {rank}[{dev}] -> {next}[{ndev}] via P2P/CUMEM/read",
    "Channel 00/0 : {peer}[{dev}] -> {rank}[{dev}] [receive] via NET/IB/0/GDRDMA",
    "Channel 00/0 : {rank}[{dev}] -> {peer}[{dev}] [send] via NET/IB/0/GDRDMA",
    "Channel 02/0 : {rank}[{dev}] -> {peer}[{dev}] [send] via NET/IB/1(1)/GDRDMA/Shared",
    "Connected all rings, use ring PXN 0 GDR 1", "Connected all trees",
    "8 coll channels, 8 collnet channels, 16 nvls channels, 8 p2p channels, 2 p2p channels per peer",
    "threadThresholds 8/8/64 | 128/8/64 | 512 | 512", "CC Off, workFifoBytes 1048576",
    "ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {bus}000 "
    "commId {commid} - Init COMPLETE",
    "Init timings - ncclCommInitRank: rank {rank} nranks {nranks} total 1.23 (kernels 0.20, alloc 0.01, "
    "bootstrap 0.30, allgathers 0.05, topo 0.25, graphs 0.02, connections 0.35, rest 0.05)",
    "AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..7}}",
]
WARNS = [
    "[{ts}] {host}:{pid}:{tid} [{dev}] transport/net_ib/p2p.cc:688 (ncclIbCompletionEventProcess) NCCL WARN "
    "NET/IB: Got completion from peer 10.0.0.12<43211> with status=transport retry counter exceeded(12) "
    "opcode=RDMA_WRITE(0) vendor_err=129  localGid ::ffff:{ip} remoteGids::ffff:10.0.0.12 hca mlx5_0",
    "[{ts}] {host}:{pid}:{tid} [{dev}] misc/socket.cc:617 (ncclSocketConnect) NCCL WARN ncclSocketConnect: "
    "connect to 10.0.0.12<43211> returned Connection refused, exceeded error retry count after 35 attempts",
]
NOISE = [
    "[2024-03-18 17:38:50,208] torch.distributed.elastic.multiprocessing.api: [WARNING] step {n} loss 2.{n}",
    "{{'loss': 1.{n}, 'grad_norm': 0.{n}, 'learning_rate': 1e-05, 'epoch': 0.{n}}}",
    "[{n}] rank = {rank}, world_size = {nranks}, n = 1, device_ids = [{dev}]",
    " {n}%|#####     | {n}/1000 [01:{n}<02:00,  1.52it/s]",
]


def corpus_sequences() -> tuple[list[list[str]], list[str]]:
    """Per-process message sequences and unprefixed lines from the corpus NCCL logs."""
    seqs: list[list[str]] = []
    plain: list[str] = []
    if not (CORPUS / "EXPECT.json").is_file():
        return seqs, plain
    for case, exp in json.loads((CORPUS / "EXPECT.json").read_text()).items():
        if exp.get("kind") != "nccl_log":
            continue
        by_proc: dict[str, list[str]] = {}
        for line in (CORPUS / case / "artifact.txt").read_text(errors="replace").splitlines():
            m = _PREFIX.match(line)
            if m:
                by_proc.setdefault(f"{m.group(1)}:{m.group(2)}", []).append(m.group(5))
            elif line.strip() and "NCCL" not in line and "nccl" not in line:
                plain.append(line)                       # application lines, not NCCL's own
        seqs += [s for s in by_proc.values() if len(s) > 3]
    return seqs, plain


def _vary(msg: str, v: dict) -> str:
    """Give a corpus message this rank's comm id, pointer, rank numbers and address."""
    msg = re.sub(r"commId 0x[0-9a-f]+", f"commId {v['commid']}", msg)
    msg = re.sub(r"comm 0x[0-9a-f]+ rank \d+ n([Rr])anks \d+",
                 lambda m: f"comm {v['comm']} rank {v['rank']} n{m.group(1)}anks {v['nranks']}", msg)
    msg = re.sub(r"rank \d+ nranks \d+", f"rank {v['rank']} nranks {v['nranks']}", msg)
    return re.sub(r"\b10\.99\.91\.63\b|\b169\.254\.103\.56\b", v["ip"], msg)


def build_log(path: Path, size_mb: int, noise: float, seed: int = 7) -> dict:
    rnd = random.Random(seed)
    seqs, plain = corpus_sequences()
    section6 = [SECTION6]
    target = size_mb << 20
    written = lines = warns = noise_lines = jobs = 0
    with path.open("w") as out:
        while written < target:
            jobs += 1
            nnodes = rnd.choice((2, 4, 8, 16))
            nranks = nnodes * 8
            commid = "0x%016x" % rnd.getrandbits(64)
            per_rank = []
            for r in range(nranks):
                host, dev = f"gpu{jobs:05d}-{r // 8:02d}", r % 8
                pid = rnd.randint(1000, 999999)
                v = {"host": host, "pid": pid, "tid": pid, "dev": dev, "rank": r, "nranks": nranks,
                     "nnodes": nnodes, "prev": (r - 1) % nranks, "next": (r + 1) % nranks,
                     "ndev": (dev + 1) % 8, "peer": (r + 8) % nranks, "bus": "%x" % (0x18 + 16 * dev),
                     "comm": "0x%x" % rnd.getrandbits(44), "commid": commid, "ifname": "enp25s0np0",
                     "ip": f"10.{jobs % 250}.{r // 8}.1", "ts": "2026-06-11 10:22:33"}
                pool = seqs + section6 if seqs else section6
                seq = pool[rnd.randrange(len(pool))]
                if seq is SECTION6:
                    msgs = [m.format(**v) for m in seq]
                else:
                    msgs = [_vary(m, v) if _NEEDS_VARY.search(m) else m for m in seq]
                # corpus messages keep their own "NCCL INFO " / "file:line NCCL WARN "; section 6 ones have none
                per_rank.append((v, [f"{host}:{pid}:{pid} [{dev}] "
                                     + (m if m.startswith("NCCL INFO ") or " NCCL WARN " in m else "NCCL INFO " + m)
                                     + "\n" for m in msgs]))
            # ranks write concurrently: interleave a few lines of each in turn
            cursors = [0] * nranks
            live = list(range(nranks))
            while live:
                for r in list(live):
                    v, rl = per_rank[r]
                    chunk = rl[cursors[r]:cursors[r] + rnd.randint(1, 6)]
                    cursors[r] += len(chunk)
                    if cursors[r] >= len(rl):
                        live.remove(r)
                    for line in chunk:
                        out.write(line)
                        written += len(line)
                        lines += 1
                        warns += " NCCL WARN " in line
                        while noise and rnd.random() < noise:
                            n = rnd.randint(1, 99)
                            text = (rnd.choice(plain) if plain and rnd.random() < 0.2 else
                                    rnd.choice(NOISE).format(n=n, **v)) + "\n"
                            out.write(text)
                            written += len(text)
                            lines += 1
                            noise_lines += 1
                if rnd.random() < 0.05:
                    v = per_rank[rnd.randrange(nranks)][0]
                    text = "\n" + rnd.choice(WARNS).format(**v) + "\n"
                    out.write(text)
                    written += len(text)
                    lines += 2
                    warns += 1
    return {"bytes": written, "lines": lines, "warn_lines": warns, "noise_lines": noise_lines, "jobs": jobs,
            "corpus_sequences": len(seqs)}


def time_grep(path: Path) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        # capture the count: GNU grep stops at the first match when its output is /dev/null
        subprocess.run(["grep", "-c", "NCCL WARN", str(path)], capture_output=True, check=False)
        best = min(best, time.perf_counter() - t)
    return best


def time_ncdoc(path: Path) -> tuple[float, int, dict]:
    code = ("import json, sys, time\n"
            "from ncdoc.evidence import parse_nccl_log_file\n"
            "t = time.perf_counter(); f = parse_nccl_log_file(sys.argv[1]); e = time.perf_counter() - t\n"
            "print(json.dumps({'seconds': e, 'lines': f.lines, 'warns': f.warn_lines, 'ranks': f.rank_count,"
            " 'transport': f.transport, 'gdr': f.gdr.state, 'version': f.nccl_version}))\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = json.loads(done.stdout)
    return result["seconds"], max(peak_kb, before), result


def time_floors(path: Path) -> list[tuple[str, float]]:
    """Seconds for what any pure-Python reader of this file must at least do, best of three each.

    Shows where the target sits against the interpreter itself: one Python test per line, and
    the C regex passes ncdoc runs per block (before it reads a single fact), each alone.
    """
    sys.path.insert(0, str(ROOT))
    from ncdoc.evidence import nccl_log_patterns as P

    def lines() -> None:
        with path.open("rb") as fh:
            for _ in fh:
                pass

    def test_each_line() -> None:
        with path.open("rb") as fh:
            for line in fh:
                if b"NCCL WARN" in line:
                    pass

    def blocks(fn) -> None:
        with path.open("rb") as fh:
            while block := fh.read(4 << 20):
                fn(block)

    cases = [("for line in file", lines), ("one `in` test per line", test_each_line),
             ("VIA pass (C regex)", lambda: blocks(P.VIA.findall)),
             ("AGG pass (C regex)", lambda: blocks(P.AGG.findall)),
             ("SCAN pass (C regex)", lambda: blocks(P.SCAN.findall))]
    out = []
    for name, fn in cases:
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        out.append((name, best))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=512, help="log size in MB (default 512)")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="chance of an application line after each NCCL line (default 0: init lines only)")
    ap.add_argument("--keep", help="also copy the generated log to this path")
    ap.add_argument("--floors", action="store_true",
                    help="also time what any pure-Python reader must do (a line loop, ncdoc's regex passes)")
    args = ap.parse_args(argv)
    if not 0 <= args.noise < 1:
        ap.error("--noise is a probability: 0 <= NOISE < 1")
    tmp = Path(tempfile.mkdtemp(prefix="ncdoc-bench-"))
    try:
        log = tmp / "nccl.log"
        t = time.perf_counter()
        info = build_log(log, args.size, args.noise)
        mb = info["bytes"] / 1e6
        print(f"built {mb:.0f} MB, {info['lines']} lines ({info['noise_lines']} application, "
              f"{info['warn_lines']} WARN, {info['jobs']} jobs, {info['corpus_sequences']} corpus sequences) "
              f"in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        if args.keep:
            shutil.copy(log, args.keep)
        with log.open("rb") as fh:                     # warm the page cache for both readers
            while fh.read(16 << 20):
                pass
        grep_s = time_grep(log)
        ncdoc_s, rss_kb, facts = time_ncdoc(log)
        print(f"grep -c 'NCCL WARN': {mb / grep_s:8.0f} MB/s  ({grep_s:.2f} s)")
        print(f"ncdoc nccl_log     : {mb / ncdoc_s:8.0f} MB/s  ({ncdoc_s:.2f} s), peak RSS {rss_kb / 1024:.0f} MB")
        print(f"ratio ncdoc/grep   : {grep_s / ncdoc_s:8.3f}  (target >= 0.25; peak RSS target < 200 MB)")
        print(f"facts: {facts}")
        if args.floors:
            passes = 0.0
            for name, sec in time_floors(log):
                passes += sec if "pass" in name else 0.0
                print(f"  floor {name:26s}: {mb / sec:8.0f} MB/s  ratio {grep_s / sec:.3f}")
            print(f"  floor {'three passes together':26s}: {mb / passes:8.0f} MB/s  ratio {grep_s / passes:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
