"""A 1 MB line of spaces, digits, '=' or quotes, among real lines, is read in linear time by every text reader.

Each reader gets one of its own samples with such a line put in the middle (and a line of spaces at the very
start, where detection and header matching look). Quadratic work on a megabyte is hours, so the worker's generous limit
tells linear from super-linear without measuring anything: an input that does not finish within LIMIT_S is a
failure. (benchmarks/fuzz.py feeds 1-10 MB lines of more shapes to every reader.)
"""

from __future__ import annotations

import os

import pytest

import fuzz_targets

LIMIT_S = 120.0
LINE = 1 << 20
UNITS = {"spaces": b" ", "digits": b"9", "equals": b"=", "quotes": b'"'}
TEXT_READERS = ("env_file", "launch_env", "rdma_listing", "topo_matrix", "nccl_log", "nccl_tests", "triage",
                "ras_report", "nccl_diag", "framework_log", "host_output", "hostfile", "policy", "tuner_space")
TARGETS = fuzz_targets.targets()


@pytest.mark.parametrize("reader", TEXT_READERS)
def test_a_megabyte_line_is_read_in_linear_time(worker, reader, tmp_path):
    target = TARGETS[reader]
    name, sample = target.seed_samples()[0]
    lines = sample.split(b"\n")
    bad = []
    for what, unit in UNITS.items():
        for at in ((0, len(lines) // 2) if what == "spaces" else (len(lines) // 2,)):
            data = b"\n".join(lines[:at] + [unit * LINE] + lines[at:])
            path = tmp_path / fuzz_targets.input_name(target, name)
            path.write_bytes(data)
            status, detail, _, _ = worker.run(reader, str(path), str(tmp_path), 1, LIMIT_S)
            if status != "ok":
                bad.append(f"{what} at line {at + 1}: {status}: {detail}")
            os.unlink(path)
    assert not bad, f"{reader} ({name}): " + "; ".join(bad)
