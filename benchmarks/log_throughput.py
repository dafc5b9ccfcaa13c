#!/usr/bin/env python3
"""How fast `ncdoc triage` reads NCCL logs of every size, end to end, next to `grep -c "NCCL WARN"` and the
closest peer (nshinde/nccl-doctor, stdlib Python) on the same files, in one run.

Inputs (generated in a temporary folder, never in the repository):
  * ranks logs: 64 / 1k / 4k / 16k / 64k ranks of a real per-rank init (NCCL 2.28.9 on an H200,
    tests/fixtures/logs/h200_torchrun_1rank_2_28.log, via tests/scaled_logs.py), 1.3 MB to 1.4 GB;
  * the mixed log (default 512 MB): the per-process init sequences of the corpus NCCL logs
    (../shared/corpus, when present) and the format strings of nccl_facts.md section 6, spread over
    many jobs with their own hosts, pids, ranks, comm ids and addresses, interleaved the way ranks
    write, with WARN lines and (--noise) application output mixed in;
  * a small artifact (the real one-rank log itself, 17 KB), where start-up is everything.

For each input: `grep -c` (best of 3), `ncdoc triage --json` with --jobs 1 and --jobs 2, the native
scanner when ncdoc_fast is importable, and the peer (`nccl-doctor analyze` over a job folder holding
the log; --peer DIR or $NCDOC_PEER, a checkout of it; skipped when absent). Printed: wall and CPU
seconds (user + system of the process and its workers), MB/s, the ratios to grep and to the peer
(paired: the runs of one input are interleaved, round by round, so a busy machine slows all alike),
peak RSS (the whole process tree, sampled), time per 1k ranks (also in units of a fixed Python workload timed
just before each run, REFERENCE: the ranks logs are measured minutes apart, and what a CPU second buys on a
shared machine changes in between), and each target met or not:

  pure Python --jobs 2 >= 0.1x grep -c on the mixed log (wall), >= 3x faster than the peer from 1 MB up;
  the native scanner >= 0.5x grep -c on one core (--jobs 1; --parser measures the log parser alone);
  the small artifact's triage no slower than the peer's; peak RSS < 200 MB at every size; time per rank
  constant within 20 % from 1k to 64k ranks (also shown net of start-up: the small artifact's CPU time
  taken from each run, which tells a cliff from a fixed cost).

Exit status 0 either way (the figures are the result). Bytecode is cached in a private
PYTHONPYCACHEPREFIX (these machines set PYTHONDONTWRITEBYTECODE=1), and every command runs once
before it is timed.

    .venv/bin/python benchmarks/log_throughput.py                        # the whole suite (~1.8 GB of logs)
    .venv/bin/python benchmarks/log_throughput.py --ranks 64,1024 --mixed-mb 64 --rounds 3
    .venv/bin/python benchmarks/log_throughput.py --parser --size 64     # the log parser alone (no triage)
    .venv/bin/python benchmarks/log_throughput.py --parser --floors      # + pure-Python ceilings
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
SMALL = ROOT / "tests" / "fixtures" / "logs" / "h200_torchrun_1rank_2_28.log"
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


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_grep(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `grep -c 'NCCL WARN'`, the best of three by wall."""
    best = (float("inf"), 0.0)
    for _ in range(3):
        t, c = time.perf_counter(), _child_cpu()
        # capture the count: GNU grep stops at the first match when its output is /dev/null
        subprocess.run(["grep", "-c", "NCCL WARN", str(path)], capture_output=True, check=False)
        best = min(best, (time.perf_counter() - t, _child_cpu() - c))
    return best


def time_ncdoc(path: Path, native: bool = False) -> tuple[float, float, int, dict]:
    """(wall, CPU) seconds of parse_nccl_log_file in a fresh process (the import not counted), its peak RSS
    in KiB and the facts it read; `native`: with the native scanner (else NCDOC_NATIVE=0)."""
    code = ("import json, sys, time\n"
            "from ncdoc.evidence import parse_nccl_log_file\n"
            "from ncdoc.evidence.nccl_log_native import describe\n"
            "t, c = time.perf_counter(), time.process_time(); f = parse_nccl_log_file(sys.argv[1])\n"
            "e, u = time.perf_counter() - t, time.process_time() - c\n"
            "print(json.dumps({'seconds': e, 'cpu': u, 'scanner': describe(), 'facts': f.to_facts()}, default=str))\n")
    env = {k: v for k, v in os.environ.items() if k != "NCDOC_NATIVE"}
    if not native:
        env["NCDOC_NATIVE"] = "0"
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                          cwd=ROOT, env=env)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = json.loads(done.stdout)
    return result["seconds"], result["cpu"], peak_kb, result


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


def parser_main(args) -> int:
    """The log parser alone over the mixed log (parse_nccl_log_file, one process, one core), with the Python
    scanner and with the native one when ncdoc_fast is installed, against grep -c (wall and CPU)."""
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
        grep_s, grep_cpu = time_grep(log)
        print(f"grep -c 'NCCL WARN': {mb / grep_s:8.0f} MB/s wall ({grep_s:.3f} s), {grep_cpu:.3f} s CPU")
        runs = {"python": [time_ncdoc(log, native=False) for _ in range(args.rounds)]}
        if native_available():
            runs["native"] = [time_ncdoc(log, native=True) for _ in range(args.rounds)]
        facts = {}
        for key, rs in runs.items():
            wall = statistics.median(r[0] for r in rs)
            cpu = statistics.median(r[1] for r in rs)
            rss = max(r[2] for r in rs)
            facts[key] = rs[0][3]["facts"]
            print(f"ncdoc {key:13s}: {mb / wall:8.0f} MB/s wall ({wall:.3f} s), {mb / cpu:6.0f} MB/s CPU ({cpu:.3f} s);"
                  f" vs grep -c: {grep_s / wall:.3f}x wall, {grep_cpu / cpu:.3f}x CPU; peak RSS <= {rss / 1024:.0f} MB"
                  f"  [{rs[0][3]['scanner']}]")
        if "native" in facts:
            print(f"native vs python: facts {'identical' if facts['native'] == facts['python'] else 'DIFFER'}")
        if args.floors:
            passes = 0.0
            for name, sec in time_floors(log):
                passes += sec if "pass" in name else 0.0
                print(f"  floor {name:26s}: {mb / sec:8.0f} MB/s  ratio {grep_s / sec:.3f}")
            print(f"  floor {'three passes together':26s}: {mb / passes:8.0f} MB/s  ratio {grep_s / passes:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


# ---------------------------------------------------------------- triage end to end

class Run:
    """One command's cost: wall and CPU seconds (it and its descendants), peak RSS of its whole process
    tree (sampled every 10 ms, summed over the processes alive together), exit status."""

    def __init__(self, wall: float, cpu: float, rss_mb: float, rc: int):
        self.wall, self.cpu, self.rss_mb, self.rc = wall, cpu, rss_mb, rc


def _tree_rss_kb(root: int) -> int:
    """VmRSS summed over `root` and its descendants (Linux /proc; 0 where unreadable)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def measure(cmd: list[str], env: dict, cwd: str | Path | None = None) -> Run:
    peak = [0]
    t0 = time.perf_counter()
    # output to a file, not /dev/null: GNU grep stops at the first match when its output is /dev/null
    sink = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env, cwd=cwd)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    sink.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # the process's own peak, and its waited-for workers' (wait4 counts them too), beside the sampled sum
    peak_kb = max(peak[0], usage.ru_maxrss)
    if proc.returncode not in (0, 1):
        print(f"  ! {' '.join(map(str, cmd[-4:]))} exited {proc.returncode}: {err.decode(errors='replace')[-300:]}",
              file=sys.stderr)
    return Run(wall, usage.ru_utime + usage.ru_stime, peak_kb / 1024, proc.returncode)


def grep_run(path: Path, env: dict) -> Run:
    # capture the count: GNU grep stops at the first match when its output is /dev/null
    best = None
    for _ in range(3):
        r = measure(["grep", "-c", "NCCL WARN", str(path)], env)
        best = r if best is None or r.wall < best.wall else best
    return best


def peer_job(path: Path, work: Path) -> Path:
    """A job folder the peer analyses: its logs/ holding the log (a link), and the job.json it requires."""
    job = work / f"peer-{path.stem}"
    (job / "logs").mkdir(parents=True, exist_ok=True)
    link = job / "logs" / "job.0.log"
    if not link.exists():
        link.symlink_to(path)
    (job / "job.json").write_text(json.dumps({"job_id": path.stem, "nodes": [], "world_size": 0}))
    return job


def native_available() -> bool:
    """The native scanner's hook: the column is filled when its module (ncdoc_fast) can be imported."""
    return importlib.util.find_spec("ncdoc_fast") is not None


def commands(path: Path, peer: Path | None, work: Path, native: bool) -> dict[str, tuple[list[str], Path | None, dict]]:
    """Each column's command, folder and environment changes: the pure-Python columns run with NCDOC_NATIVE=0
    (the native scanner is used by default wherever it is installed), the native one without it."""
    ncdoc = [sys.executable, "-m", "ncdoc", "triage", str(path), "--json"]
    python = {"NCDOC_NATIVE": "0"}
    out = {"jobs 1": (ncdoc + ["--jobs", "1"], ROOT, python), "jobs 2": (ncdoc + ["--jobs", "2"], ROOT, python)}
    if native:
        out["native"] = (ncdoc + ["--jobs", "1"], ROOT, {"NCDOC_NATIVE": None})
        out["native j2"] = (ncdoc + ["--jobs", "2"], ROOT, {"NCDOC_NATIVE": None})
    if peer is not None:
        out["peer"] = ([sys.executable, "-m", "nccl_doctor.cli", "analyze", str(peer_job(path, work)), "--no-store",
                        "--json"], peer, {})
    return out


def _env(env: dict, changes: dict) -> dict:
    out = dict(env)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


# A fixed piece of pure-Python work (dicts, strings, bytes searches), timed just before each ncdoc run of a ranks
# log: the time per rank is compared across inputs measured minutes apart, while other processes on the machine
# come and go and change what a CPU second buys; each run's CPU over its reference's is that run in units of
# the machine's speed at that moment.
REFERENCE = ("d = {}\nb = b'h200-00001:2345:2345 [3] NCCL INFO Channel 00/0 : 1[3] -> 9[3] [send] via NET/IB/0\\n' * 64\n"
             "for i in range(60000):\n"
             "    k = str(i % 4096)\n"
             "    d[k] = d.get(k, 0) + b.count(b'NCCL', i % 64)\n")


def run_input(name: str, path: Path, ranks: int | None, rounds: int, peer: Path | None, work: Path,
              env: dict, native: bool) -> dict:
    """Every command over one input, interleaved round by round; medians of walls, CPUs and per-round ratios."""
    mb = path.stat().st_size / 1e6
    with path.open("rb") as fh:                      # warm the page cache for every reader
        while fh.read(16 << 20):
            pass
    cmds = commands(path, peer, work, native)
    if mb < 64:                                      # a first run writes the bytecode caches
        for cmd, cwd, changes in cmds.values():
            measure(cmd, _env(env, changes), cwd)
    runs: dict[str, list[Run]] = {k: [] for k in ["grep", *cmds]}
    refs: dict[str, list[Run]] = {k: [] for k in cmds}
    for _ in range(rounds):
        runs["grep"].append(grep_run(path, env))
        for key, (cmd, cwd, changes) in cmds.items():
            if ranks:
                refs[key].append(measure([sys.executable, "-c", REFERENCE], env))
            runs[key].append(measure(cmd, _env(env, changes), cwd))
    med = {k: (statistics.median(r.wall for r in v), statistics.median(r.cpu for r in v), max(r.rss_mb for r in v),
               max(r.rc for r in v)) for k, v in runs.items()}
    ratios = {}
    for key in cmds:
        ratios[f"{key}/grep wall"] = statistics.median(g.wall / r.wall for g, r in zip(runs["grep"], runs[key]))
        if "peer" in cmds and key != "peer":
            ratios[f"{key} vs peer wall"] = statistics.median(p.wall / r.wall for p, r in zip(runs["peer"], runs[key]))
            ratios[f"{key} vs peer cpu"] = statistics.median(p.cpu / r.cpu for p, r in zip(runs["peer"], runs[key]))
    # CPU in reference units (see REFERENCE), the median of the runs each over the reference run just before it
    in_ref = {k: statistics.median(r.cpu / max(q.cpu, 1e-6) for q, r in zip(refs[k], runs[k])) for k in cmds if refs[k]}
    return {"name": name, "mb": mb, "ranks": ranks, "med": med, "ratios": ratios, "in_ref": in_ref}


def print_row(res: dict) -> None:
    mb = res["mb"]
    print(f"\n{res['name']}: {mb:,.1f} MB" + (f", {res['ranks']:,} ranks" if res["ranks"] else ""))
    print(f"  {'':8s} {'wall s':>8s} {'cpu s':>8s} {'MB/s':>8s} {'peak RSS MB':>12s}   ratios (median of rounds)")
    for key, (wall, cpu, rss, rc) in res["med"].items():
        rat = [f"{k.split(' ', 2)[-1] if k.startswith(key) else k}={v:.3f}" for k, v in res["ratios"].items()
               if k.startswith(key + "/") or k.startswith(key + " vs")]
        note = "" if rc in (0, 1) else f"  (exit {rc})"
        print(f"  {key:8s} {wall:8.2f} {cpu:8.2f} {mb / wall:8.1f} {rss:12.0f}   {'  '.join(rat)}{note}")


def verdicts(results: list[dict], small: dict | None) -> list[tuple[str, bool | None, str]]:
    out: list[tuple[str, bool | None, str]] = []
    mixed = next((r for r in results if r["name"].startswith("mixed")), None)
    if mixed:
        v = mixed["ratios"].get("jobs 2/grep wall")
        out.append(("pure Python --jobs 2 >= 0.1x grep -c on the mixed log (wall)", v >= 0.1, f"{v:.3f}x"))
        v = mixed["ratios"].get("native/grep wall")
        if v is not None:
            out.append(("native scanner --jobs 1 >= 0.5x grep -c on the mixed log (wall, triage end to end)", v >= 0.5,
                        f"{v:.3f}x"))
    for r in results:
        if r["mb"] >= 1 and "jobs 1 vs peer cpu" in r["ratios"]:
            for key in ("jobs 1", "jobs 2"):
                wall, cpu = r["ratios"][f"{key} vs peer wall"], r["ratios"][f"{key} vs peer cpu"]
                out.append((f">= 3x faster than the peer, {r['name']}, --{key.replace(' ', ' ')} (wall / cpu)",
                            wall >= 3, f"{wall:.2f}x / {cpu:.2f}x"))
    if small and "peer" in small["med"]:
        mine, theirs = small["med"]["jobs 1"], small["med"]["peer"]
        v = small["ratios"].get("jobs 1 vs peer cpu")
        out.append(("small artifact's triage no slower than the peer (CPU; wall)", v >= 1.0,
                    f"{mine[1] * 1000:.0f} vs {theirs[1] * 1000:.0f} ms CPU ({v:.2f}x); "
                    f"{mine[0] * 1000:.0f} vs {theirs[0] * 1000:.0f} ms wall"))
    for r in results + ([small] if small else []):
        for key in ("jobs 1", "jobs 2"):
            if key in r["med"]:
                rss = r["med"][key][2]
                out.append((f"peak RSS < 200 MB, {r['name']}, --{key}", rss < 200, f"{rss:.0f} MB"))
    ranked = [r for r in results if r["ranks"] and r["ranks"] >= 1024]
    if len(ranked) >= 2:
        for key in ("jobs 1", "jobs 2"):
            for what, i in (("wall", 0), ("cpu", 1)):
                per = {r["ranks"]: r["med"][key][i] / r["ranks"] * 1000 for r in ranked}
                spread = max(per.values()) / min(per.values()) - 1
                shown = ", ".join(f"{n // 1024}k: {v * 1000:.0f} ms" for n, v in per.items())
                out.append((f"time per 1k ranks within 20 % from 1k to {max(per) // 1024}k, --{key} ({what})",
                            spread <= 0.2, f"{shown} (spread {spread * 100:.0f} %)"))
            # the same with the start-up taken out (the small artifact's triage, timed in this run): a fixed cost
            # is no cliff, yet at 1k ranks it is a fifth of the run and alone decides the spread above
            if small and key in small["med"]:
                base = small["med"][key][1]
                per = {r["ranks"]: (r["med"][key][1] - base) / r["ranks"] * 1000 for r in ranked}
                spread = max(per.values()) / min(per.values()) - 1
                shown = ", ".join(f"{n // 1024}k: {v * 1000:.0f} ms" for n, v in per.items())
                out.append((f"time per 1k ranks net of start-up ({base * 1000:.0f} ms, the small artifact's) within "
                            f"20 % from 1k to {max(per) // 1024}k, --{key} (cpu)", spread <= 0.2,
                            f"{shown} (spread {spread * 100:.0f} %)"))
            # the same in reference units: CPU each run over a fixed Python workload timed just before it
            per = {r["ranks"]: r["in_ref"][key] / r["ranks"] * 1000 for r in ranked if key in r.get("in_ref", {})}
            if len(per) >= 2:
                spread = max(per.values()) / min(per.values()) - 1
                shown = ", ".join(f"{n // 1024}k: {v:.2f}" for n, v in per.items())
                out.append((f"time per 1k ranks within 20 % from 1k to {max(per) // 1024}k, --{key} "
                            "(cpu in reference units)", spread <= 0.2, f"{shown} (spread {spread * 100:.0f} %)"))
    return out


def triage_main(args) -> int:
    peer = Path(args.peer).resolve() if args.peer else None
    if peer is not None and not (peer / "nccl_doctor" / "cli.py").is_file():
        print(f"no nccl-doctor checkout at {peer}: the peer column is left out", file=sys.stderr)
        peer = None
    native = native_available()
    work = Path(args.work or tempfile.mkdtemp(prefix="ncdoc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "pycache"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
    sys.path.insert(0, str(ROOT / "tests"))
    from scaled_logs import write_ranks_log
    inputs: list[tuple[str, Path, int | None]] = []
    for n in [int(x) for x in args.ranks.split(",") if x]:
        path = work / f"ranks{n}.log"
        if not path.exists():
            t = time.perf_counter()
            size = write_ranks_log(path, n)
            print(f"built {path.name}: {size / 1e6:,.1f} MB in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        inputs.append((f"{n:,} ranks", path, n))
    if args.mixed_mb:
        path = work / f"mixed{args.mixed_mb}.log"
        if not path.exists():
            t = time.perf_counter()
            info = build_log(path, args.mixed_mb, args.noise)
            print(f"built {path.name}: {info['bytes'] / 1e6:,.0f} MB, {info['jobs']} jobs in "
                  f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
        inputs.append((f"mixed {args.mixed_mb} MB", path, None))
    print(f"ncdoc triage end to end; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; peer: "
          f"{peer or 'absent'}; native scanner: {'ncdoc_fast' if native else 'not importable (column left out)'}")
    small = None
    try:
        if not args.no_small:
            small = run_input("small artifact", SMALL, None, args.small_rounds, peer, work, env, native)
            print_row(small)
        results = []
        for name, path, ranks in inputs:
            rounds = args.rounds if path.stat().st_size < (256 << 20) else max(1, args.rounds // 3)
            res = run_input(name, path, ranks, rounds, peer if path.stat().st_size <= args.peer_max_mb << 20 else None,
                            work, env, native)
            results.append(res)
            print_row(res)
        print(f"\ntargets (load now {os.getloadavg()[0]:.1f}):")
        for what, ok, figure in verdicts(results, small):
            print(f"  [{'met' if ok else 'MISSED'}] {what}: {figure}")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parser", action="store_true",
                    help="time the log parser alone over the mixed log (parse_nccl_log_file), not triage")
    ap.add_argument("--size", type=int, default=512, help="--parser: the mixed log's size in MB (default 512)")
    ap.add_argument("--keep", help="--parser: also copy the generated log to this path")
    ap.add_argument("--floors", action="store_true",
                    help="--parser: also time what any pure-Python reader must do (a line loop, the regex passes)")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="chance of an application line after each NCCL line of the mixed log (default 0)")
    ap.add_argument("--ranks", default="64,1024,4096,16384,65536", help="ranks logs to build (comma-separated)")
    ap.add_argument("--mixed-mb", type=int, default=512, help="the mixed log's size in MB (0: none; default 512)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per input (a third above 256 MB); --parser: runs of each scanner")
    ap.add_argument("--small-rounds", type=int, default=15, help="rounds for the small artifact")
    ap.add_argument("--no-small", action="store_true", help="leave the small artifact out")
    ap.add_argument("--peer", default=os.environ.get("NCDOC_PEER"),
                    help="a checkout of nshinde/nccl-doctor to compare with (default $NCDOC_PEER)")
    ap.add_argument("--peer-max-mb", type=int, default=1 << 20, help="leave the peer out above this size")
    ap.add_argument("--work", help="keep the generated logs in this folder (and reuse them next time)")
    args = ap.parse_args(argv)
    if not 0 <= args.noise < 1:
        ap.error("--noise is a probability: 0 <= NOISE < 1")
    return parser_main(args) if args.parser else triage_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
