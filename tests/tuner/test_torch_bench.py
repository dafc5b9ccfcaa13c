"""The torch backend's program speaks nccl-tests: its flags, its table (what ncdoc's nccl-tests parser and
the trust checks read), and the values each rank must hold after each collective (its own #wrong).
torch itself is not needed for any of this; the runs are checked where torch and GPUs are."""

import pytest

from ncdoc.evidence.nccl_tests import parse_nccl_tests
from ncdoc.tuner.backends import torch_bench as tb
from ncdoc.tuner.backends.torch import TorchBackend
from ncdoc.tuner.space import Hardware


def test_it_takes_nccl_tests_flags():
    coll, opts = tb.parse_args(["all_gather", "-b", "1M", "-e", "4M", "-f", "2", "-g", "1", "-n", "5", "-c", "2",
                                "--master", "node01:29517"])
    assert coll == "all_gather" and tb.sizes_of(opts) == [1 << 20, 1 << 21, 1 << 22]
    assert opts["-n"] == "5" and opts["-c"] == "2" and opts["--master"] == "node01:29517"
    with pytest.raises(SystemExit, match="first argument is the collective"):
        tb.parse_args(["-b", "1M"])
    with pytest.raises(SystemExit, match="unknown or incomplete flag"):
        tb.parse_args(["all_reduce", "-z", "1"])


def test_its_output_is_read_as_nccl_tests_output():
    devices = [(f"node0{r // 2 + 1}", r % 2, f"0000:{0x18 + r:02x}:00", "NVIDIA H100") for r in range(4)]
    _, opts = tb.parse_args(["all_reduce", "-b", "1M", "-e", "2M"])
    lines = tb.header("all_reduce", opts, [1 << 20, 1 << 21], devices, 1)
    busbws = []
    for size, t, wrong in ((1 << 20, 20.0, 0), (1 << 21, 30.0, 3)):
        n_in, _ = tb.counts("all_reduce", size, 4)
        text, bb = tb.row("all_reduce", n_in * tb.ELEMENT, n_in, t, 4, wrong)
        lines.append(text)
        busbws.append(bb)
    facts = parse_nccl_tests(lines + tb.footer("all_reduce", busbws), "torch")
    assert facts.nranks == 4 and [r.size for r in facts.rows] == [1 << 20, 1 << 21]
    assert facts.rows[0].oop.busbw == pytest.approx(1048576 / 20e3 * 1.5, abs=0.01)
    assert facts.wrong_total == 6 and facts.runs == 1             # #wrong of both columns


@pytest.mark.parametrize("coll", tb.COLLECTIVES)
def test_what_each_rank_must_hold_after_each_collective(coll):
    world = 4
    n_in, n_out = tb.counts(coll, 1 << 12, world)
    inputs = {r: ([float(r * world + j + 1) for j in range(world) for _ in range(n_in // world)] if coll == "alltoall"
                  else [float(r + 1)] * n_in) for r in range(world)}
    # the collectives' meaning, on lists
    if coll in ("all_reduce", "reduce"):
        out = {r: [sum(inputs[k][i] for k in range(world)) for i in range(n_in)] for r in range(world)}
    elif coll == "reduce_scatter":
        out = {r: [sum(inputs[k][r * n_out + i] for k in range(world)) for i in range(n_out)] for r in range(world)}
    elif coll == "all_gather":
        out = {r: [x for k in range(world) for x in inputs[k]] for r in range(world)}
    elif coll == "broadcast":
        out = {r: list(inputs[0]) for r in range(world)}
    elif coll == "alltoall":
        c = n_in // world
        out = {r: [x for k in range(world) for x in inputs[k][r * c:(r + 1) * c]] for r in range(world)}
    else:
        out = {r: list(inputs[(r - 1) % world]) for r in range(world)}
    for r in range(world):
        runs = tb.expected(coll, r, world, len(out[r]))
        flat = [v for n, v in runs for _ in range(n)]
        assert flat == (out[r] if runs else []), (coll, r)


def test_each_run_meets_at_the_groups_first_node():
    be = TorchBackend(hardware=Hardware(fabric="ib", nodes=2, gpus_per_node=8), python="/opt/py/bin/python3")
    prog = be.program("all_reduce", ("node07", "node08"), "trial-3/00-trial-r0/all_reduce")
    assert prog[:4] == ("/opt/py/bin/python3", "-m", "ncdoc.tuner.backends.torch_bench", "all_reduce")
    assert prog[4] == "--master" and prog[5].startswith("node07:")
    assert be.program("all_reduce", ("node07",), "k") == prog[:4]          # one machine: it starts its own ranks
