"""sysfs and pyverbs give the same HCA facts on every fixture machine: each bundled example (built
with its verbs answers recorded) and the real node captured in tests/fixtures/nodes/.

What only pyverbs knows is the port MTU (sysfs has no MTU file for an IB port, and none for the
largest MTU a port supports): that, and nothing else, may differ, and only from unknown to known.
Every fact both sources hold must agree, whichever path the probe takes to it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tarfile

import pytest

from ncdoc.examples.machines import build_machine, list_examples, load_spec
from ncdoc.examples.verbs_replay import RecordedVerbs
from ncdoc.probes.hcas import probe_hcas, verbs_facts
from ncdoc.probes.sysfs import SysfsReader
from paths import TESTS

EXAMPLES = [name for name, _ in list_examples()]
NODES = TESTS / "fixtures" / "nodes"
VERBS_ONLY = ("active_mtu", "max_mtu")


@pytest.fixture(params=["stand-in", "stand-in IntFlag", "real pyverbs"])
def replay_kind(request):
    """How the recorded answers are replayed: on the replay's own types or on the installed pyverbs'."""
    real = request.getfixturevalue("real_verbs") if request.param == "real pyverbs" else None
    return lambda answers: RecordedVerbs(answers, pyverbs=real, enum_types=request.param == "stand-in IntFlag")


@pytest.fixture(scope="module", params=EXAMPLES)
def machine(request, tmp_path_factory):
    spec = load_spec(request.param)
    spec["verbs"] = True               # record pyverbs' answers for every example, not only those that ship them
    return build_machine(spec, tmp_path_factory.mktemp(request.param))


def _without(port, fields):
    return dataclasses.replace(port, **{f: None for f in fields})


def test_both_paths_give_the_same_facts_but_the_mtus(machine, replay_kind):
    fs = SysfsReader(machine.root)
    sysfs, _ = probe_hcas(fs, verbs=None)
    verbs, notes = probe_hcas(fs, verbs=replay_kind(machine.verbs_answers))
    if sysfs.status.state != "ok":                     # no RDMA device: the same absent section either way
        assert verbs == sysfs
        return
    assert not notes and verbs.status.source == sysfs.status.source + "+pyverbs"
    assert [h.name for h in verbs.hcas] == [h.name for h in sysfs.hcas]
    for hs, hv in zip(sysfs.hcas, verbs.hcas):
        assert dataclasses.replace(hv, ports=()) == dataclasses.replace(hs, ports=())
        for ps, pv in zip(hs.ports, hv.ports, strict=True):
            assert _without(pv, VERBS_ONLY) == _without(ps, VERBS_ONLY), (hs.name, ps.num)
            for field in VERBS_ONLY:            # verbs may fill an unknown MTU, never change a known one
                assert getattr(ps, field) in (None, getattr(pv, field)), (hs.name, ps.num, field)
            assert pv.active_mtu is not None and pv.max_mtu is not None
            if ps.link_layer == "Ethernet":     # RoCE: the kernel's rule over the netdev MTU gives what verbs says
                assert ps.active_mtu == pv.active_mtu


def test_what_verbs_reports_is_what_sysfs_shows(machine, replay_kind):
    fs = SysfsReader(machine.root)
    sysfs, _ = probe_hcas(fs, verbs=None)
    replay = replay_kind(machine.verbs_answers)
    for hca in sysfs.hcas:
        facts = verbs_facts(replay, hca.name)
        assert (facts["fw_ver"], facts["vendor_part_id"]) == (hca.fw_ver, hca.vendor_part_id), hca.name
        assert sorted(facts["ports"]) == [p.num for p in hca.ports]
        for port in hca.ports:
            told = facts["ports"][port.num]
            assert (told["state"], told["link_layer"], told["lid"], told["sm_lid"]) == \
                (port.state, port.link_layer, port.lid, port.sm_lid), (hca.name, port.num)


@pytest.mark.parametrize("name", ["dgx-h100", "h100-roce"])
def test_verbs_fills_what_sysfs_lacks_with_the_same_values(name, tmp_path):
    # a sysfs without the files pyverbs also answers for (an older kernel, a trimmed capture)
    spec = load_spec(name)
    spec["verbs"] = True
    machine = build_machine(spec, tmp_path / "full")
    full, _ = probe_hcas(SysfsReader(machine.root), verbs=RecordedVerbs(machine.verbs_answers))
    trimmed = tmp_path / "trimmed"
    shutil.copytree(machine.root, trimmed, symlinks=True)
    fs = SysfsReader(str(trimmed))
    for hca in full.hcas:
        dev_dir = fs.path(fs.realpath(f"/sys/class/infiniband/{hca.name}"))
        os.remove(os.path.join(dev_dir, "fw_ver"))
        os.remove(os.path.join(fs.path(fs.realpath(f"/sys/bus/pci/devices/{hca.pci_address}")), "device"))
        for port in hca.ports:
            for leaf in ("state", "link_layer", "lid", "sm_lid"):
                os.remove(os.path.join(dev_dir, "ports", str(port.num), leaf))
    assert probe_hcas(fs, verbs=RecordedVerbs(machine.verbs_answers))[0] == full
    assert probe_hcas(fs, verbs=None)[0] != full          # the files were what sysfs had


@pytest.mark.parametrize("node", sorted(p.name for p in NODES.iterdir() if (p / "root.tar.gz").is_file()))
@pytest.mark.parametrize("answers", [{"devices": {}}, {"devices": {}, "uverbs": True}],
                         ids=["pyverbs raises", "pyverbs lists none"])
def test_a_captured_node_reads_the_same_on_both_paths(node, answers, replay_kind, tmp_path):
    # the capture's rdma-core had no device: pyverbs there raises or lists nothing, as recorded here
    with tarfile.open(NODES / node / "root.tar.gz") as tar:
        tar.extractall(tmp_path, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    fs = SysfsReader(str(tmp_path / "root"))
    sysfs, sysfs_notes = probe_hcas(fs, verbs=None)
    verbs, verbs_notes = probe_hcas(fs, verbs=replay_kind(answers))
    assert verbs == sysfs and verbs_notes == sysfs_notes
