"""Property tests: no input makes an evidence parser raise, and reading is independent of how the
input is cut (lines, blocks, line ends)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncdoc.errors import InputError
from ncdoc.evidence import parse_nccl_log, parse_nccl_log_file
from ncdoc.evidence.launch_env import parse_launch_env, parse_launch_env_file
from ncdoc.evidence.nccl_log_scan import LogScanner
from ncdoc.evidence.nccl_tests import parse_nccl_tests, parse_nccl_tests_file, parse_nccl_tests_json
from ncdoc.evidence.textfile import iter_line_blocks

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])

# Pieces of real NCCL / nccl-tests / launcher lines, recombined at random so the parsers' deeper
# branches see near-misses as well as the real thing.
PREFIXES = ["node01:4012:4012 [0] ", "[1,0]<stdout>:n2:5:6 [3] ", "0: h:1:2 [1] ", "[default0]:a:1:1 [0] ",
            "[2026-06-11 10:22:33] node01:4012:4090 [0] transport/net_ib/p2p.cc:688 (f) ", "x.cc:12 ", "", " ",
            "ip-172-31-1-2:9:9 [7] "]
LEVELS = ["NCCL INFO ", "NCCL WARN ", "NCCL version 2.", "NCCL error in: ", "NCCL ", "L INFO ", ""]
MESSAGES = [
    "NCCL version 2.27.5+cuda12.9", "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "NET/IB : No device found.", "NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth1:fe80::1%eth1<0>",
    "Bootstrap: Using docker0:172.17.0.1<0>", "Using network IB", "Using network ", "Assigned NET plugin X to comm",
    "NCCL_IB_HCA set by environment to mlx5", "NCCL_IB_TIMEOUT set by environment to 22.",
    "GPU Direct RDMA Disabled for GPU 1 / HCA 0 (distance 8 > 5)", "NET/IB : GPU Direct RDMA Enabled for HCA 0 'x'",
    "GPU Direct RDMA Enabled for GPU/0-1 (rank 0) - NET/0-2 (distance 4 <= 6, read 1, mode Default)",
    "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "Channel 01/0 : 1[1] -> 9[1] [receive] via NET/IB/1",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "Channel 00/08 : 0 1 2 3", "Channel 00 : 0[0] -> 1[1] via SHM/direct",
    "ncclCommInitRank comm 0x55 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 5d000 commId 0xab - Init START",
    "ncclCommInitRank comm 0x55 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 5d000 commId 0xab - Init COMPLETE",
    "comm 0x55 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0", "comm 0x rank x nranks",
    "NET/IB: Got completion from peer 1.2.3.4<5> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0",
    "NET/IB : Got completion with error 99, opcode 1, len 2, vendor err", "Call to ibv_modify_qp failed with 110 ",
    "Cuda failure 999 'unknown error", "Cuda failure ''", "ncclSocketConnect: connect to 1.2.3.4<5> returned ",
    "init.cc:123 -> 2", "bootstrap.cc:1 -> 99", "HINT: x", "AllReduce: 1048576 Bytes -> Algo 9 proto 7 time 1",
    "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer",
    "NET/Plugin: Loaded net plugin AWS Libfabric (v6)", "NET/Plugin: Could not find: libnccl-net.so.",
    "NET/OFI Selected Provider is efa (found 4 nics)", "Connected all rings, use ring PXN 0 GDR 1",
    "NVLS multicast support is not available on dev 0", "Last error:", "ncclSystemError: x", "DMA-BUF is available",
    "CUDA Dev 0, IP Interfaces : lo(SOC) eth0(PXB)", "NET : Using interface lo:127.0.0.1<0>",
    "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3",
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0", "#       size         count      type   redop    root     time   algbw   busbw  #wrong",
    "     1048576        262144     float     sum      -1    98.70   10.62   19.92       0    97.71   10.73   20.12"
    "    N/A",
    "    65536  2048  float  52.01  1.26  1.10  0e+00", "  8  2  float  sum", "# Avg bus bandwidth    : nan ",
    "# Out of bounds values : 3 FAILED", "# error: x", "export NCCL_X='a b", "mpirun -x NCCL_Y -x", "-x",
    "srun --export=ALL,NCCL_Z=a,b,C", "- name: NCCL_K", "  value: \"v\"", "NCCL_A: {", "docker run -e", "\\",
]
FRAGMENT = st.one_of(st.sampled_from(MESSAGES), st.text(max_size=12),
                     st.integers(-5, 1 << 40).map(str), st.sampled_from(["\t", "  ", "[", "]", ":", "<0>", "\r"]))
LINE = st.builds(lambda p, lv, parts: p + lv + "".join(parts), st.sampled_from(PREFIXES), st.sampled_from(LEVELS),
                 st.lists(FRAGMENT, max_size=4))
LOG = st.lists(LINE, max_size=40)


def _facts_json(facts) -> str:
    return json.dumps(facts.to_facts(), sort_keys=True)


@SETTINGS
@given(st.text(max_size=3000))
def test_any_text_is_read_by_every_parser(text):
    _facts_json(parse_nccl_log(text.splitlines()))
    _facts_json(parse_nccl_log([text]))
    _facts_json(parse_nccl_tests(text.splitlines()))
    _facts_json(parse_nccl_tests_json(text))
    json.dumps(parse_launch_env(text).to_facts())


@SETTINGS
@given(st.binary(max_size=3000))
def test_any_bytes_decoded_are_read(data):
    for text in (data.decode("utf-8", "replace"), data.decode("latin-1")):
        _facts_json(parse_nccl_log(text.splitlines(keepends=True)))
        _facts_json(parse_nccl_tests(text.splitlines()))
        parse_launch_env(text)
    _facts_json(parse_nccl_log([data]))                   # bytes items are accepted too


@SETTINGS
@given(LOG)
def test_nccl_like_lines_any_cut_and_line_end(lines):
    text = "\n".join(lines) + "\n"
    split = text.split("\n")[:-1]                         # lines end at "\n" only (not \f, \v, \x1c...)
    whole = _facts_json(parse_nccl_log(split))
    assert _facts_json(parse_nccl_log([text])) == whole
    for size in (1, 23, 1 << 20):                         # blocks of every size give the same facts
        scanner = LogScanner()
        for block in iter_line_blocks(split, block_bytes=size):
            scanner.feed(block)
        assert _facts_json(scanner.result("")) == whole, size
    crlf = parse_nccl_log([text.replace("\n", "\r\n")]).to_facts()
    plain = json.loads(whole)
    assert crlf["nccl_version"] == plain["nccl_version"] and crlf["transport"] == plain["transport"]
    assert crlf["problem_counts"] == plain["problem_counts"] and crlf["env"] == plain["env"]
    _facts_json(parse_nccl_tests(lines))
    parse_launch_env(text)


@SETTINGS
@given(st.sampled_from(MESSAGES), st.integers(1, 50_000))
def test_lines_of_any_length(message, width):
    long_line = "h:1:1 [0] NCCL INFO " + message + "x" * width
    f = parse_nccl_log([long_line, "h:1:1 [0] NCCL INFO " + "[" * width, "# " * width])
    assert f.lines == 3
    parse_nccl_tests([long_line, "  1  " * (width // 5 + 1)])
    parse_launch_env("export NCCL_A=" + "y" * width + "\n" + "-x " * (width // 3 + 1))


@SETTINGS
@given(st.binary(max_size=2000))
def test_file_entry_points_answer_with_facts_or_one_input_error(tmp_path, data):
    path = tmp_path / "input"
    path.write_bytes(data)
    for parse in (parse_nccl_log_file, parse_nccl_tests_file, parse_launch_env_file):
        try:
            result = parse(path)
        except InputError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        else:
            json.dumps(result.to_facts())
