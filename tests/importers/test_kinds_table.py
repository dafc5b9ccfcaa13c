"""The contract of the table of input kinds (ncdoc/importers/kinds.py), over every row: each kind is
detected on a sample of its own (real formats), read without raising into a Reading of its role,
refused by import_text unless it is node evidence; a binary file is one clear line. A kind added to
the table without a sample here fails the first test."""

from __future__ import annotations

import builtins

import pytest

from ncdoc.errors import InputError
from ncdoc.importers import import_text
from ncdoc.importers.kinds import ENV, KINDS, NODE, NODE_KINDS, RUN, UNKNOWN_KIND, detect_kind, read_input
from ncdoc.readers.textfile import read_user_text
from paths import FIXTURES

SAMPLES = {
    "snapshot_json": ["nodes/h200-vm/snapshot.json"],
    "nccl_topo_xml": ["nodes/xml/nccl_topo_2gpu_1nic.xml"],
    "hwloc_xml": ["nodes/xml/hwloc_1gpu_1hca.xml"],
    "ras_report": ["triage/ncclras_incomplete.txt", "triage/ncclras.json"],
    "nccl_log": ["triage/healthy-ib.log", "triage/socket-fallback.log", "logs/legacy_2_4.log"],
    "nccl_tests": ["triage/all_reduce_2x8.txt", "logs/nccl_tests_alltoall.json",
                   "logs/h200_nccl_tests_all_reduce_1rank_info.txt"],
    "framework_log": ["triage/watchdog_timeout.log"],
    "topo_matrix": ["nodes/h200-vm/nvidia-smi-topo-m.txt"],
    "ibv_devinfo": ["triage/ibstat.txt"],
    "host_output": ["triage/host_limits_driver.txt"],
    "env": ["triage/launch.sh"],
}
CASES = [(kind, path) for kind, paths in SAMPLES.items() for path in paths]


def test_every_kind_has_a_sample_and_one_row():
    names = [k.name for k in KINDS]
    assert len(names) == len(set(names))
    assert set(SAMPLES) == set(names), "a kind in the table needs a sample of its own here"
    assert {k.role for k in KINDS} <= {NODE, RUN, ENV}
    assert NODE_KINDS == tuple(k.name for k in KINDS if k.role == NODE)
    for k in KINDS:                           # every kind is named in the message for an unknown file
        assert k.what in UNKNOWN_KIND


@pytest.mark.parametrize("kind,path", CASES, ids=[p for _, p in CASES])
def test_detected_and_read(kind, path):
    full = str(FIXTURES / path)
    assert detect_kind(read_user_text(full)) == kind
    found, reading, source = read_input(full)
    assert found.name == kind and reading.kind == kind and reading.read_as, reading
    if found.role == NODE:
        (imp,) = reading.nodes
        assert imp.kind == kind and imp.snapshot.origin in ("import", "live", "example", "sysfs")
    elif found.role == RUN:
        assert reading.run_evidence
    else:
        assert reading.launch and reading.launch[0].values


@pytest.mark.parametrize("kind,path", CASES, ids=[p for _, p in CASES])
def test_import_text_takes_node_evidence_only(kind, path):
    text = read_user_text(FIXTURES / path)
    if kind in NODE_KINDS:
        assert import_text(text, source=path).kind == kind
    else:
        with pytest.raises(InputError, match="not node evidence"):
            import_text(text, source=path)


def test_a_binary_file_is_one_clear_line(tmp_path):
    core = tmp_path / "core"
    core.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    with pytest.raises(InputError) as exc:
        read_input(str(core))
    assert str(exc.value) == f"{core}: cannot be read as evidence: it is binary (it contains NUL bytes), not text"


@pytest.mark.parametrize("kind,path", [c for c in CASES if c[0] in ("nccl_log", "nccl_tests", "ras_report",
                                                                   "framework_log", "host_output")
                                       and not c[1].endswith(".json")], ids=lambda c: str(c))
def test_a_large_run_file_is_read_once(monkeypatch, tmp_path, kind, path):
    import ncdoc.importers.inputs as inputs
    big = tmp_path / "big.log"
    big.write_bytes((FIXTURES / path).read_bytes())
    small = read_input(str(big))[1]
    monkeypatch.setattr(inputs, "STREAM_BYTES", 100)
    opened = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        if str(file) == str(big):
            opened.append(args[0] if args else kwargs.get("mode", "r"))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    found, reading, source = read_input(str(big))
    assert source.streamed and "large file: read as a stream" in reading.notes
    assert len(opened) == 2, opened            # its head (to tell its kind), then one pass for every parser
    # streamed or held whole, the parsers find the same
    assert [x.to_facts() for x in reading.logs] == [x.to_facts() for x in small.logs]
    assert [x.to_facts() for x in reading.tests] == [x.to_facts() for x in small.tests]
    for part in ("ras", "diag", "host"):
        assert [x.to_facts() for x in getattr(reading, part)] == [x.to_facts() for x in getattr(small, part)]
