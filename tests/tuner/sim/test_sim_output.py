"""The simulator's results as nccl-tests reports them: busbw factors, byte counts, exact text."""

import re
import statistics

import pytest

from ncdoc.tuner.sim import COLLECTIVES, SimResult, nccl_tests_text, preset, simulate
from ncdoc.tuner.sim.nccl_model import busbw_factor
from ncdoc.tuner.sim.nccl_tests_output import float_str
from ncdoc.tuner.sim.run import counts

# One data row: "%12li  %12li  %8s  %6s  %6s" then twice "  %7s  %6s  %6s  %6g" (nccl-tests src/util.cu).
ROW = re.compile(r"^(?P<size>[ \d]{12})  (?P<count>[ \d]{12})  (?P<type>[ \w]{8})  (?P<redop>[ \w]{6})  "
                 r"(?P<root>[ \-\d]{6})"
                 r"  (?P<t0>[ \d.e+\-]{7})  (?P<a0>[ \d.e+\-]{6})  (?P<b0>[ \d.e+\-]{6})  (?P<w0>[ \d]{6})"
                 r"  (?P<t1>[ \d.e+\-]{7})  (?P<a1>[ \d.e+\-]{6})  (?P<b1>[ \d.e+\-]{6})  (?P<w1>[ \d]{6})$")
SIZES = [8, 1024, 1 << 20, 1 << 26, 1 << 30]


@pytest.mark.parametrize("collective,factor", [
    ("all_reduce", 2 * 15 / 16), ("all_gather", 15 / 16), ("reduce_scatter", 15 / 16), ("alltoall", 15 / 16),
    ("broadcast", 1.0), ("reduce", 1.0), ("sendrecv", 1.0)])
def test_busbw_factors_per_collective(collective, factor):
    assert busbw_factor(collective, 16) == pytest.approx(factor)
    for r in simulate(preset("h100-ib-2node"), {}, collective, [1 << 24, 1 << 28]):
        assert r.busbw == pytest.approx(r.algbw * factor)
        assert r.algbw == pytest.approx(r.size / (r.time_us * 1000))


def test_counts_follow_nccl_tests_byte_arithmetic():
    assert counts("all_reduce", 1000, 16) == counts("broadcast", 1000, 16)
    ag = counts("all_gather", 1000, 16)                 # 250 floats -> 15 per rank -> 12 (16-byte aligned)
    assert (ag.printed_size, ag.count, ag.nccl_bytes) == (768, 12, 768)
    assert counts("reduce_scatter", 8, 16).printed_size == 0
    a2a = counts("alltoall", 1 << 20, 16)
    assert (a2a.printed_size, a2a.count) == (1 << 20, (1 << 18) // 16)
    r = simulate(preset("h100-ib-2node"), {}, "all_gather", [1000])[0]
    assert r.size == 768


def test_every_collective_runs_on_every_preset():
    for name in ("h100-ib-2node", "h100-1node", "h100-socket-2node", "l40s-pcie-2node"):
        for coll in COLLECTIVES:
            rows = simulate(preset(name), {}, coll, SIZES)
            assert [type(r) for r in rows] == [SimResult] * len(SIZES)
            assert all(r.time_us > 0 and r.busbw >= 0 and r.nchannels >= 1 for r in rows)
            assert rows[-1].busbw > rows[1].busbw


def test_float_format_falls_back_like_getfloatstr():
    assert float_str(35.123, 7) == "  35.12"
    assert float_str(71234.51, 7) == "71234.5"
    assert float_str(1234567.0, 7) == "1234567"
    assert float_str(123456789.0, 7) == "1.2e+08"
    assert float_str(0.0, 6) == "  0.00"
    assert float_str(123456.0, 6) == "123456"
    assert float_str(1234567.0, 6) == " 1e+06"


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "broadcast", "sendrecv"])
def test_text_round_trips_through_the_row_format(collective):
    cluster = preset("h100-ib-2node")
    text = nccl_tests_text(cluster, {}, collective, SIZES, seed=5)
    lines = text.splitlines()
    assert lines[0] == "# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=23007"
    assert lines[1] == f"# Collective test starting: {collective}_perf"
    assert lines[2].startswith("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: ")
    devices = [l for l in lines if l.startswith("#  Rank ")]
    assert len(devices) == 16
    assert re.fullmatch(r"#  Rank  0 Group  0 Pid  \d+ on     node01 device  0 \[0000:18:00\] NVIDIA H100 80GB HBM3",
                        devices[0])
    header = lines.index("#       size         count      type   redop    root     time   algbw   busbw  #wrong "
                         "    time   algbw   busbw  #wrong ")
    assert lines[header - 1].strip().endswith("in-place")
    rows = [ROW.match(l) for l in lines[header + 2: header + 2 + len(SIZES)]]
    assert all(rows), lines[header + 2: header + 2 + len(SIZES)]
    expected = simulate(cluster, {}, collective, SIZES, seed=5)
    busbws = []
    for m, r in zip(rows, expected):
        assert int(m["size"]) == r.size
        assert m["type"].strip() == "float" and m["w0"].strip() == "0"
        assert m["redop"].strip() == ("sum" if collective == "all_reduce" else "none")
        assert int(m["root"]) == (0 if collective == "broadcast" else -1)
        assert float(m["t0"]) == pytest.approx(r.time_us, rel=1e-3, abs=0.006)
        assert float(m["b0"]) == pytest.approx(r.busbw, rel=1e-2, abs=0.006)
        busbws += [float(m["b0"]), float(m["b1"])]
    tail = lines[header + 2 + len(SIZES):]
    assert tail[0] == "# Out of bounds values : 0 OK"
    avg = re.fullmatch(r"# Avg bus bandwidth    : (\S+) ", tail[1])
    assert avg and float(avg.group(1)) == pytest.approx(statistics.mean(busbws), rel=1e-2, abs=0.01)
    assert tail[2:] == ["#", f"# Collective test concluded: {collective}_perf", "#", ""]


def test_text_through_the_project_parser_when_present():
    mod = pytest.importorskip("ncdoc.evidence.nccl_tests")
    parse = getattr(mod, "parse_nccl_tests", None)
    if parse is None:
        pytest.skip("ncdoc.evidence.nccl_tests has no parse_nccl_tests")
    text = nccl_tests_text(preset("h100-ib-2node"), {}, "all_reduce", SIZES)
    parsed = parse(text.splitlines())
    rows = getattr(parsed, "rows", parsed)
    assert len(rows) == len(SIZES)
    expected = simulate(preset("h100-ib-2node"), {}, "all_reduce", SIZES)
    for row, r in zip(rows, expected):
        size = row["size"] if isinstance(row, dict) else row.size
        assert size == r.size
