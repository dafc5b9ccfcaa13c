"""The optional native scanner (ncdoc_fast, native/) against the Python scanner, its reference.

Both read the same inputs and must give identical facts (every field of LogFacts, evidence lines
included): the fixture logs, the corpus (../shared), generated logs of thousands of ranks and
hundreds of communicators (past every bound the state keeps), hypothesis-built logs, random and
mutated text, each at several block sizes. Its two seams are held apart too: the log passes of the
pure classification give the Python values block by block (counts in order, event tuples), and whole
run files read by RunScanner, serially and in byte ranges classified by the other scanner (events
made by one, applied by the other), give the serial Python RunFacts. The block patterns the native
scanner matches by hand are also compared with Python's `re` on them, match by match.

Skipped when ncdoc_fast is not installed, except under NCDOC_REQUIRE_NATIVE=1 (CI's venv that has
it), where a missing or unused native scanner fails.
"""

from __future__ import annotations

import json
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncdoc.evidence import block_scan, nccl_log_native, nccl_log_scan
from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.nccl_log_scan import LogScanner
from ncdoc.evidence.textfile import BLOCK_BYTES, iter_file_blocks, iter_line_blocks
from paths import SHARED, TESTS

try:
    import ncdoc_fast
except ImportError:
    ncdoc_fast = None

REQUIRED = os.environ.get("NCDOC_REQUIRE_NATIVE") == "1"
if ncdoc_fast is None and not REQUIRED:
    pytestmark = pytest.mark.skip(reason="ncdoc_fast (native/, the optional native scanner) is not installed")

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
FIXTURES = TESTS / "fixtures" / "logs"
CORPUS = SHARED / "corpus"


def _native():
    """ncdoc_fast, configured (also when NCDOC_NATIVE=0 keeps the scanner off by default)."""
    assert ncdoc_fast is not None, "NCDOC_REQUIRE_NATIVE=1 but ncdoc_fast is not importable"
    if nccl_log_native.NATIVE is not None:
        return nccl_log_native.NATIVE
    saved = os.environ.pop("NCDOC_NATIVE", None)
    try:
        scan = nccl_log_native._load()
    finally:
        if saved is not None:
            os.environ["NCDOC_NATIVE"] = saved
    assert scan is not None, nccl_log_native.describe()
    return scan


class scanners:
    """Within the block, the native scanner at both seams (classify=True, apply=True: the log passes,
    the event loop) or the Python one (False), whatever this process runs by default."""

    def __init__(self, classify: bool, apply: bool | None = None) -> None:
        self.classify, self.apply = classify, classify if apply is None else apply

    def __enter__(self):
        self.saved = block_scan._LOG_PASSES, block_scan._LINE_PASSES, nccl_log_scan._NATIVE
        if self.classify or self.apply:
            block_scan._NATIVE = _native()
        block_scan._LOG_PASSES = block_scan._native_passes if self.classify else block_scan.log_passes
        block_scan._LINE_PASSES = block_scan._native_lines if self.classify else block_scan.line_passes
        nccl_log_scan._NATIVE = _native() if self.apply else None
        return self

    def __exit__(self, *exc):
        block_scan._LOG_PASSES, block_scan._LINE_PASSES, nccl_log_scan._NATIVE = self.saved
        block_scan._NATIVE = nccl_log_native.NATIVE


def _read(blocks: list[bytes], native: bool) -> LogScanner:
    with scanners(native):
        scanner = LogScanner()
        for block in blocks:
            scanner.feed(block)
        return scanner


def assert_same(blocks: list[bytes], source: str = "x") -> None:
    """Both scanners over the same blocks: identical facts, line counts and counters."""
    for block in blocks:                # the pure seam: the same counts (in order) and event tuples
        want = block_scan.log_passes(block)
        got = _native().classify_block(block, P.MAX_MESSAGE)
        assert list(got[0].items()) == list(want[0].items()) and list(got[1].items()) == list(want[1].items())
        assert type(got[2]).__name__ == "Events" and len(got[2]) == len(want[2])
        assert got[2] == want[2] and list(got[2]) == want[2] and pickle.loads(pickle.dumps(got[2])) == want[2]
        assert got[3] == want[3] and got[4] == want[4]
        assert _native().line_passes(block, block_scan._TEST, block_scan._RAS_INFO) == block_scan.line_passes(block)
    py, nat = _read(blocks, False), _read(blocks, True)
    a, b = py.result(source), nat.result(source)
    assert json.dumps(b.to_facts(), sort_keys=True) == json.dumps(a.to_facts(), sort_keys=True)
    assert b == a
    for name in ("lines", "recognised", "warns", "no_device", "extra_hosts", "relaxed"):
        assert getattr(nat.state, name) == getattr(py.state, name), name
    assert (nat.follow, nat.follow_last_error, nat.tail) == (py.follow, py.follow_last_error, py.tail)


def _blocks(data: bytes, size: int) -> list[bytes]:
    """`data` cut into blocks of whole lines about `size` bytes long, as iter_file_blocks cuts a file."""
    if not data.endswith(b"\n"):
        data += b"\n"
    out, start = [], 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + size)
        end = data.find(b"\n", start + size) if end < 0 else end
        out.append(data[start:end + 1])
        start = end + 1
    return out


def assert_same_at_sizes(data: bytes, sizes=(BLOCK_BYTES, 4096, 97, 1)) -> None:
    for size in sizes:
        assert_same(_blocks(data, size))


# ---------------------------------------------------------------- the glue

def test_native_scanner_runs_when_required():
    assert _native() is not None
    if REQUIRED:                        # CI's venv with ncdoc_fast: the scanner really in use, at both seams
        assert nccl_log_scan._NATIVE is not None, nccl_log_native.describe()
        assert block_scan._LOG_PASSES is block_scan._native_passes
        assert block_scan._LINE_PASSES is block_scan._native_lines
        assert nccl_log_native.describe().startswith("native (ncdoc_fast ")


def test_the_garbage_collector_is_left_as_it_was_found():
    # the native apply holds the collector off for a block and must hand it back as it was, on or off
    import gc
    blocks = _blocks((FIXTURES / "ib_errors_2_30.log").read_bytes(), 4096)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            _read(blocks, True)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_caches_behave_as_the_dicts_they_replace():
    scanner = _read(_blocks((FIXTURES / "ib_errors_2_30.log").read_bytes(), 4096), True)
    for cache in (scanner.pre_cache, scanner.msg_cache):
        assert type(cache).__name__ == "BytesCache" and len(cache) > 0
        key = next(iter(cache))
        assert key in cache and cache.get(key) is cache[key] and cache.get(b"\0absent") is None
        assert len(cache.items()) == len(cache) and type(cache.__reduce__()[1][0]) is dict
        with pytest.raises(KeyError):
            cache[b"\0absent"]
        with pytest.raises(TypeError):
            cache["str key"] = 1
    before = len(scanner.msg_cache)
    scanner.msg_cache.clear()
    assert len(scanner.msg_cache) == 0 < before


# ---------------------------------------------------------------- the block patterns, match by match

PIECES = [b"NCCL INFO ", b"NCCL WARN ", b"L INFO ", b" via ", b"NET/", b"IB", b"/0", b"/GDRDMA", b"P2P/IPC", b"SHM/",
          b"COLLNET/", b"direct shared memory", b"NET/IB : ", b"NET/IB:", b"NET/Plugin : ", b"NET/Plugin: F",
          b"NET/Plugin :  x", b"NET/OFI ", b"NET/IBext_v8 : GPU Direct", b"NET/AWS Libfabric/0/GDRDMA", b"GPU Direct",
          b"NCCL_IB_HCA set ", b"NCCL_ set ", b"cudaDriverVersion", b"Channel 00/32 : ", b"Channel 0/3 : ",
          b"Channel 12/08 :", b"Pattern 4, crossNic", b"AllReduce: 1048 Bytes", b"ReduceScatter: 1 Bytes",
          b"Reduce: x", b"16 coll channels", b"8 Bytes -> Algo", b"Last error:", b"NCCL version 2", b"L version 3",
          b"NCCL error", b"L communicator", b"ProcessGroupNCCL.cpp:123]", b"(SeqNum", b"Bootstrap : Using",
          b"Bootstrap: Using", b"comm 0x7f", b"comm (nil)", b"Using network", b"Unrecognized", b"Invalid",
          b"Assigned NET plugin", b"All entries", b"P2P is disabled", b"Error", b"Could not find a path",
          b"CUDA Dev 3, IP", b"Cuda failure", b"Call to ", b"HINT", b"Failed to ", b"[Rank 12] nccl",
          b"ncclCommInitRank comm ", b"nccl comm ", b"transport/net.cc:12 ", b"a.c:1 ", b"x.hpp:", b"NET/Socket : Using [",
          b"NET/Socket: no ", b"NET : Using interface", b"NET/IB : No ", b"[0]", b"[1", b"mlx5_0", b":", b"<0>", b"\r",
          b"\n", b" ", b"\t", b"/", b"L", b"N", b"\xff", b"0", b"99999999999999999999"]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=6)), max_size=30).map(b"".join)


@SETTINGS
@given(TEXT)
def test_via_and_agg_find_what_the_regexes_find(text):
    assert ncdoc_fast.via_findall(text) == P.VIA.findall(text)
    assert ncdoc_fast.agg_findall(text) == P.AGG.findall(text)


@SETTINGS
@given(TEXT)
def test_scan_finds_what_the_regex_finds_from_every_position(text):
    for pos in range(len(text) + 1):
        m = P.SCAN.search(text, pos)
        assert ncdoc_fast.scan_search(text, pos) == (m.start() if m else None), pos


ASCII = st.lists(st.one_of(st.sampled_from([b"[0]", b"[12]", b"[x]", b"mlx5_0", b"ib0", b"eth-1.2@x", b":", b"1",
                                            b"/IB", b"/RoCE", b"<0>", b"<12>", b"<", b">", b"fe80::1%ib0", b"10.0.0.1",
                                            b" ", b"\t", b"\x1c", b"-", b":-", b"/", b"_", b"; OOB "]),
                           st.binary(max_size=3).map(lambda b: bytes(c & 0x7f for c in b))), max_size=25).map(b"".join)


@SETTINGS
@given(ASCII)
def test_interface_and_device_lists_read_as_the_regexes_read_them(text):
    s = text.decode("ascii")
    assert [(n.decode(), a.decode()) for n, a in ncdoc_fast.iface_findall(text)] == \
        [(n, a) for n, a, _ in P.IFACE.findall(s)]
    assert [tuple(x.decode() for x in m) for m in ncdoc_fast.ib_dev_findall(text)] == P.IB_DEV.findall(s)


PREFIX_PIECES = st.sampled_from([
    "node01", ":", "4012", "-", "_", ".", "[", "]", "[0]", "[12]", "[99999999999999999999]", " ", "  ", "\t", "\x1c",
    "(", ")", " (ncclIbCompletionEventProcess)", " ()", "transport/net_ib/p2p.cc:688", "misc/socket.cc:617 ",
    "ofi_process_cq:1039", "x.py:1", "a.cxx:2", ".c:3", "[1,0]<stdout>:", "[default0]:", ">:", "]:", "0: ",
    "[2026-06-11 10:22:33] ", "ip-172-31-1-2", "h\u00e9", "12"])


@SETTINGS
@given(st.lists(PREFIX_PIECES, max_size=14).map("".join))
def test_prefixes_read_as_parse_prefix_reads_them(pre):
    got = ncdoc_fast.prefix_fields(pre.encode())
    if got is not None:                   # None: left to Python (not ASCII, a device number past an i64)
        p = P.parse_prefix(pre)
        assert got == (p.host, p.pid, p.tid, p.dev, p.file, p.func)
    else:
        assert not pre.isascii() or "99999999999999999999" in pre


# ---------------------------------------------------------------- real logs

LOGS = sorted(p for p in FIXTURES.iterdir() if p.is_file() and not p.name.endswith(".json"))


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_fixture_logs_give_the_same_facts(path):
    assert_same_at_sizes(path.read_bytes())


def _corpus() -> list:
    return sorted(p for p in CORPUS.glob("*/artifact.txt")) if CORPUS.is_dir() else []


@pytest.mark.skipif(not _corpus(), reason="../shared/corpus not present")
def test_corpus_logs_give_the_same_facts():
    for path in _corpus():
        for size in (BLOCK_BYTES, 997):
            assert_same([b for b in iter_file_blocks(path, block_bytes=size)], str(path))


# ---------------------------------------------------------------- generated logs

def big_log(nranks: int, seed: int, comms_per_rank: int = 1, per_host: int = 8, comm_size: int = 16) -> bytes:
    """A job of `nranks` processes (`per_host` a host) writing interleaved: the per-rank init sequence
    in NCCL's formats, communicators of `comm_size` ranks (a process is another rank in each), channels,
    traces, warnings and a framework's error lines."""
    rnd = random.Random(seed)
    per_rank = []
    for rank0 in range(nranks):
        r = rank0
        host, dev = f"j{seed}-node{r // per_host:04d}", r % 8
        pid = 1000 + r
        pre = f"{host}:{pid}:{pid + rnd.randint(0, 2)} [{dev}] "
        if rnd.random() < 0.1:
            pre = f"[1,{r}]<stdout>:" + pre
        ip = f"10.{seed % 256}.{r // 8 % 256}.{dev}"
        lines = [f"NCCL INFO Bootstrap : Using ib0:{ip}<0>", "NCCL INFO cudaDriverVersion 12040",
                 "NCCL INFO NCCL version 2.21.5+cuda12.4",
                 f"NCCL INFO NET/IB : Using [0]mlx5_{dev}:1/IB [1]mlx5_{dev + 8}:1/RoCE [RO]; OOB ib0:{ip}<0>",
                 "NCCL INFO Using network IB", "NCCL INFO Assigned NET plugin IB to comm",
                 "NCCL INFO NCCL_IB_HCA set by environment to mlx5", f"NCCL INFO DMA-BUF is available on GPU device {dev}",
                 f"NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA {dev} 'mlx5_{dev}'"]
        for c in range(comms_per_rank):
            r = (rank0 + 7 * c) % nranks
            comm = "0x%x" % rnd.getrandbits(40)
            cid = "0x%016x" % (seed * 7919 + c * 1000 + rank0 // comm_size)
            lines += [f"NCCL INFO [Rank {r}] ncclCommInitRank comm {comm} rank {r} nranks {nranks} cudaDev {dev} "
                      f"nvmlDev {dev} busId 18000 commId {cid} - Init START",
                      f"NCCL INFO comm {comm} rank {r} nRanks {nranks} nNodes {max(1, nranks // 8)} localRanks 8 "
                      f"localRank {dev} MNNVL 0",
                      f"NCCL INFO Channel 00/0 : {r}[{dev}] -> {(r + 1) % nranks}[{(dev + 1) % 8}] via P2P/CUMEM/read",
                      f"NCCL INFO Channel 01/0 : {r}[{dev}] -> {(r + 8) % nranks}[{dev}] [send] via NET/IB/0"
                      + ("/GDRDMA" if r % 13 else ""),
                      "NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
                      f"NCCL INFO ncclCommInitRank comm {comm} rank {r} nranks {nranks} cudaDev {dev} nvmlDev {dev} "
                      f"busId 18000 commId {cid} - Init COMPLETE"]
            if rnd.random() < 0.2:
                lines.append(f"NCCL INFO comm {comm} rank {r} nranks {nranks} cudaDev {dev} busId 18000 - Destroy COMPLETE")
        if rnd.random() < 0.05:
            lines += ["transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer 10.0.0.9<1234> with "
                      "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 hca mlx5_0",
                      "NCCL INFO transport/net.cc:1301 -> 6", "NCCL INFO proxy.cc:1513 -> 6",
                      "NCCL INFO bootstrap.cc:99 -> 3"]
        r = rank0
        per_rank.append([pre + x + ("\r" if r % 17 == 0 else "") for x in lines])
    out, cursors, live = [], [0] * nranks, list(range(nranks))
    while live:
        for r in list(live):
            n = rnd.randint(1, 4)
            out += per_rank[r][cursors[r]:cursors[r] + n]
            cursors[r] += n
            if cursors[r] >= len(per_rank[r]):
                live.remove(r)
        if rnd.random() < 0.02:
            out += [f"[rank{rnd.randrange(nranks)}]:RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:3135, "
                    "unhandled system error, NCCL version 2.21.5", "ncclSystemError: System call failed.",
                    "Last error:", "socketStartConnect: Connect to 10.0.0.9<1234> failed : Connection refused"]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("nranks,comms,per_host", [(4200, 1, 1), (512, 40, 8)])
def test_thousands_of_ranks_and_hundreds_of_communicators_give_the_same_facts(nranks, comms, per_host):
    # 4200 ranks on as many hosts: past MAX_RANKS and MAX_HOSTS (4096) and the 64-host lists;
    # 512 ranks in 40 communicators: past 16 ranks per process
    assert_same_at_sizes(big_log(nranks, seed=nranks, comms_per_rank=comms, per_host=per_host, comm_size=nranks),
                         sizes=(BLOCK_BYTES, 65536))


def test_many_jobs_past_every_cache_bound_give_the_same_facts():
    # > 8192 prefixes and > 16384 messages: the caches are dropped and refilled mid-log, in both scanners;
    # 640 communicators of 16 ranks: past the 256 kept
    data = b"".join(big_log(640, seed=s) for s in range(16))
    assert_same(_blocks(data, BLOCK_BYTES))


# ---------------------------------------------------------------- hypothesis, random and mutated text

PREFIXES = ["node01:4012:4012 [0] ", "[1,0]<stdout>:n2:5:6 [3] ", "0: h:1:2 [1] ", "a:1:1 [007] ", "h:1:1 [0]\t",
            "[2026-06-11 10:22:33] node01:4012:4090 [0] transport/net_ib/p2p.cc:688 (f) ", "x.cc:12 ", "", " ",
            "ip-172-31-1-2:9:9 [7] ", "h\u00e9:1:1 [0] ", "h:1:1 [99999999999999999999] "]
LEVELS = ["NCCL INFO ", "NCCL WARN ", "NCCL version 2.", "NCCL error in: ", "NCCL ", "L INFO ", ""]
MESSAGES = [
    "NCCL version 2.27.5+cuda12.9", "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "NET/IB : Using [0]mlx5_0:1/IB", "NET/IB: Using [99999999999999999999]mlx5_0:1/IB; OOB a:b<1> c:d<2>",
    "NET/IB : No device found.", "NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth1:fe80::1%eth1<0>",
    "Bootstrap: Using docker0:172.17.0.1<0>", "Bootstrap : Using", "Bootstrap : Using x y", "Using network IB",
    "Using network ", "Assigned NET plugin X to comm", "NCCL_IB_HCA set by environment to mlx5",
    "GPU Direct RDMA Disabled for GPU 1 / HCA 0 (distance 8 > 5)", "NET/IB : GPU Direct RDMA Enabled for HCA 0 'x'",
    "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "Channel 01/0 : 1[1] -> 9[1] [receive] via NET/IB/1",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "Channel 00/08 : 0 1 2 3",
    "ncclCommInitRank comm 0x55 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 5d000 commId 0xab - Init START",
    "ncclCommInitRank comm 0x55 rank 3 nranks 16 cudaDev 3 busId 5d000 commId 0xab - Init COMPLETE",
    "[Rank 3] ncclCommInitRank comm 0x56 rank 99999999999999999999 nranks 16 commId 0xac - Init START",
    "comm 0x55 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0", "comm 0x rank x nranks",
    "comm (nil) rank 0 nranks 1 - Destroy COMPLETE", "comm 0x55 rank 3 nranks 16 - Init COMPLETE [repeated 3x across cluster]",
    "NET/IB: Got completion from peer 1.2.3.4<5> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0",
    "Call to ibv_modify_qp failed with 110 ", "Cuda failure 999 'unknown error", "init.cc:123 -> 2",
    "bootstrap.cc:1 -> 99", "transport/net.cc:1301 -> 6", "HINT: x", "AllReduce: 1048576 Bytes -> Algo 9 proto 7",
    "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels", "NET/Plugin: Loaded net plugin X (v6)",
    "NET/OFI Selected Provider is efa (found 4 nics)", "Connected all rings, use ring PXN 0 GDR 1", "Last error:",
    "Last error: x", "ncclSystemError: x", "ncclInternalError: y", "DMA-BUF is available", "CUDA Dev 0, IP Interfaces : lo(SOC)",
    "NET : Using interface lo:127.0.0.1<0>", "qp_num 12 mtu 4096 GID 3", "ProcessGroupNCCL.cpp:1234] [Rank 0] Watchdog",
]
FRAGMENT = st.one_of(st.sampled_from(MESSAGES), st.text(max_size=10), st.integers(-5, 1 << 70).map(str),
                     st.sampled_from(["\t", "  ", "[", "]", ":", "<0>", "\r", " -> ", "\u00e9", "\x1c"]))
LINE = st.builds(lambda p, lv, parts: p + lv + "".join(parts), st.sampled_from(PREFIXES), st.sampled_from(LEVELS),
                 st.lists(FRAGMENT, max_size=4))


@SETTINGS
@given(st.lists(LINE, max_size=60), st.sampled_from([1, 97, 4096, BLOCK_BYTES]))
def test_hypothesis_logs_give_the_same_facts(lines, size):
    assert_same(list(iter_line_blocks(lines, block_bytes=size)))


@SETTINGS
@given(st.binary(max_size=4000), st.sampled_from([1, 300, BLOCK_BYTES]))
def test_random_bytes_give_the_same_facts(data, size):
    assert_same(_blocks(data, size))


def _mutate(data: bytes, rnd: random.Random) -> bytes:
    """Real lines, damaged the ways logs are: bytes dropped, doubled, replaced, lines cut, swapped, merged."""
    b = bytearray(data)
    for _ in range(rnd.randint(1, 40)):
        i = rnd.randrange(len(b)) if b else 0
        op = rnd.randrange(6)
        if op == 0 and b:
            del b[i:i + rnd.randint(1, 8)]
        elif op == 1:
            b[i:i] = b[i:i + rnd.randint(1, 30)]
        elif op == 2 and b:
            b[i] = rnd.choice(b"\n\r :[]<>/0L\xc3\xff") if rnd.random() < 0.7 else rnd.randrange(256)
        elif op == 3:
            j = b.find(b"\n", i)
            if j > 0:
                del b[j]                                  # two lines merged, as two writers do
        elif op == 4:
            k = rnd.randrange(len(b)) if b else 0
            b[i:i] = b[k:k + rnd.randint(5, 200)]         # a piece of another line pasted in
        else:
            b[i:i] = rnd.choice(PIECES)
    return bytes(b)


@pytest.mark.parametrize("path", LOGS[::3], ids=lambda p: p.name)
def test_mutated_logs_give_the_same_facts(path):
    data = path.read_bytes()
    rnd = random.Random(path.name)
    for _ in range(8):
        assert_same_at_sizes(_mutate(data, rnd), sizes=(BLOCK_BYTES, 211))


def test_a_mutated_big_log_gives_the_same_facts():
    rnd = random.Random(5)
    assert_same_at_sizes(_mutate(big_log(300, seed=3), rnd), sizes=(BLOCK_BYTES, 8191))


# ---------------------------------------------------------------- whole run files (triage's reading)

def _run_digest(path, block_bytes: int, native: bool, range_bytes: int | None = None, apply: bool | None = None) -> str:
    """RunFacts of one file read serially (range_bytes None) or in byte ranges classified apart, with the native
    or the Python scanner (`apply`: the apply's seam alone switched, the classification being the other one's)."""
    from test_scan_ranges import digest, ranges_apart

    from ncdoc.evidence.run_scan import ScanPlan, scan_file
    with scanners(native, apply):
        if range_bytes is None:
            return digest(scan_file(str(path), ScanPlan(jobs=1, block_bytes=block_bytes)))
        return ranges_apart(path, block_bytes, range_bytes)


RUN_FILES = LOGS[::2] + sorted(CORPUS.glob("*/artifact.txt"))[::3] if CORPUS.is_dir() else LOGS[::2]


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_run_files_give_the_python_run_facts_serially_and_in_ranges(path):
    want = _run_digest(path, 4096, native=False)
    assert _run_digest(path, 4096, native=True) == want
    assert _run_digest(path, 512, native=True, range_bytes=2048) == _run_digest(path, 512, native=False)
    # events classified by one scanner and applied by the other (workers may run without ncdoc_fast)
    assert _run_digest(path, 4096, native=False, apply=True, range_bytes=8192) == want
    assert _run_digest(path, 4096, native=True, apply=False, range_bytes=8192) == want


def test_thousands_of_ranks_give_the_python_run_facts(tmp_path):
    from scaled_logs import write_ranks_log
    path = tmp_path / "ranks.log"
    write_ranks_log(path, 4500, keep=0.1)
    with path.open("a") as fh:
        fh.write("[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
                 "system error, NCCL version 2.28.9\nncclSystemError: System call failed.\nLast error:\n"
                 "socketStartConnect: Connect to 10.0.0.9<4> failed\nINFO NET/IB : No device found.\n")
    for block_bytes in (65536, 1 << 20):
        want = _run_digest(path, block_bytes, native=False)
        assert _run_digest(path, block_bytes, native=True) == want
        assert _run_digest(path, block_bytes, native=True, range_bytes=3 * block_bytes) == want
