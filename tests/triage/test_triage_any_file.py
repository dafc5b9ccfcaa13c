"""Whatever a file holds, triage either answers or says in one line why it cannot use it (exit 2)."""

from __future__ import annotations

import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncdoc.cli.main import main
from ncdoc.errors import InputError
from ncdoc.triage.run import triage

# Fragments of every kind triage reads, so random files reach deep into each parser.
FRAGMENTS = [
    "node01:4012:4050 [0] NCCL INFO NET/IB : No device found.",
    "node01:4012:4050 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.11<0>",
    "node01:4012:4050 [0] NCCL INFO Using network Socket",
    "node01:4012:4050 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; "
    "OOB ib0:10.0.0.11<0>",
    "node01:4012:4050 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
    "node01:4012:4050 [0] NCCL INFO comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    "node01:4012:4050 [0] transport/net_ib.cc:840 NCCL WARN NET/IB : Got completion with error 12, "
    "opcode 1, len 1, vendor err 129",
    "node01:4012:4050 [0] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error",
    "NCCL version 2.21.5+cuda12.4",
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0",
    "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3",
    "  1073741824     268435456     float     sum      -1   191953    5.59    5.59      0   190953    5.62    5.62      3",
    "       65536          2048     float    52.01    1.26    1.10  0e+00    50.09    1.31    1.14  0e+00",
    "# Out of bounds values : 2 FAILED",
    "# Avg bus bandwidth    : 5.80752 ",
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity",
    "GPU0\t X \tNV18\tPIX\t0-55\t0",
    "NIC0\tPIX\tSYS\t X ",
    "hca_id: mlx5_0",
    "\t\tstate:\t\t\tPORT_DOWN (1)",
    "Infiniband device 'mlx5_3' port 1 status:",
    "CA 'mlx5_0'",
    "\t\tRate: 400",
    "mlx5_0  1       4       0000:0000:0000:0000:0000:ffff:0a0c:0015 10.12.0.21      v1      net1",
    "export NCCL_IB_HCA=mlx5_0,mlx5_1",
    "export NCCL_IB_GID_INDEX=4",
    "mpirun -x NCCL_SOCKET_IFNAME=lo -np 16 ./all_reduce_perf",
    "{\"NCCL_ALGO\": \"Ring\"}",
    "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:18:00.0\" class=\"0x030000\"/></cpu></system>",
]

lines = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=80))
contents = st.one_of(
    st.lists(lines, max_size=25).map("\n".join).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.binary(max_size=400),
)


def _write(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="ncdoc-fuzz-", suffix=".txt")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents)
def test_triage_only_ever_raises_input_error(data):
    path = _write(data)
    try:
        result = triage([path])
    except InputError as exc:
        assert str(exc).strip()
        return
    finally:
        os.unlink(path)
    doc = result.to_dict()
    json.dumps(doc)                                   # the JSON contract always serialises
    assert doc["schema_version"] == 1 and isinstance(doc["facts"], dict)
    assert result.exit_code() in (0, 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents)
def test_cli_exit_code_is_0_1_or_2_and_never_a_traceback(data):
    import contextlib
    import io
    path = _write(data)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["triage", path, "--json"])
    finally:
        os.unlink(path)
    assert rc in (0, 1, 2)
    assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue()
    if rc == 2:
        assert out.getvalue() == "" and err.getvalue().startswith("ncdoc: error:")
    else:
        json.loads(out.getvalue())
