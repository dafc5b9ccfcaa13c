"""The HCA probe against the real pyverbs module (the 'verbs' extra: skipped without it; CI's
default venv has it and requires these to run).

This machine has no RDMA device, so the real module is seen three ways: what it does with no
device (raises, or lists nothing), the names, signatures, enums and exceptions the probe and the
replay rely on, and the recorded answers replayed on the real module's own types.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

from ncdoc.examples import verbs_replay
from ncdoc.examples.machines import build_machine
from ncdoc.examples.verbs_replay import RecordedVerbs
from ncdoc.probes import hcas
from ncdoc.probes.hcas import probe_hcas, verbs_device_names
from ncdoc.probes.sysfs import SysfsReader
from paths import TESTS

ROOT = TESTS.parent


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    return build_machine("dgx-h100", tmp_path_factory.mktemp("dgx"))


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    """Python code in a fresh interpreter: libibverbs reads its sysfs path and device list once."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, **env})


# ---------------------------------------------------------------- no device

def test_no_device_means_no_devices_not_a_failure(real_verbs, no_rdma_here, dgx):
    names, why = verbs_device_names(real_verbs)
    assert names == set()
    assert why in (hcas._NO_UVERBS.format(error="Failed to get devices list"), hcas._NO_PROVIDER)
    # the probe on a fixture tree, asking the real (empty) pyverbs: sysfs facts, ok, a note why
    with_real, notes = probe_hcas(SysfsReader(dgx.root), verbs=real_verbs)
    without, _ = probe_hcas(SysfsReader(dgx.root), verbs=None)
    assert with_real == without and with_real.status.state == "ok" and len(with_real.hcas) == 12
    assert notes == [f"HCA facts from sysfs only, InfiniBand port MTUs unknown: {why}"]


def test_real_failures_read_as_the_replay_says(real_verbs, no_rdma_here):
    from pyverbs.pyverbs_error import PyverbsRDMAError

    replay = RecordedVerbs({"devices": {}}, pyverbs=real_verbs)
    for call in (real_verbs.get_device_list, lambda: real_verbs.Context(name="mlx5_0")):
        with pytest.raises(PyverbsRDMAError) as real:
            call()
        assert str(real.value) == "Failed to get devices list" and real.value.error_code == -1
    with pytest.raises(PyverbsRDMAError, match="^Failed to get devices list$"):
        replay.get_device_list()


def test_an_empty_device_list_is_no_devices_too(real_verbs, no_rdma_here, dgx, tmp_path):
    # libibverbs finds the uverbs ABI (SYSFS_PATH: its sysfs root) and no device: pyverbs returns []
    (tmp_path / "sys/class/infiniband_verbs").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband_verbs/abi_version").write_text("6\n")
    code = ("import json, pyverbs.device as d; from ncdoc.probes.hcas import probe_hcas, verbs_device_names; "
            "from ncdoc.probes.sysfs import SysfsReader; "
            f"s, notes = probe_hcas(SysfsReader({dgx.root!r}), verbs=d); names, why = verbs_device_names(d); "
            "print(json.dumps([d.get_device_list(), sorted(names), why, s.status.state, len(s.hcas), notes]))")
    p = _run(code, SYSFS_PATH=str(tmp_path / "sys"))
    assert p.returncode == 0, p.stderr[-2000:]
    listed, names, why, state, count, notes = json.loads(p.stdout)
    assert (listed, names, why, state, count) == ([], [], hcas._NO_PROVIDER, "ok", 12)
    assert notes == [f"HCA facts from sysfs only, InfiniBand port MTUs unknown: {hcas._NO_PROVIDER}"]


# ---------------------------------------------------------------- what the probe relies on

def test_the_enums_the_probe_maps_are_pyverbs_own(real_verbs):
    import pyverbs.enums as e

    assert {int(getattr(e, f"IBV_PORT_{s}")): s for s in hcas._VERBS_STATES.values()} == hcas._VERBS_STATES
    assert {int(getattr(e, f"IBV_MTU_{m}")): m for m in hcas.IB_MTU.values()} == hcas.IB_MTU
    assert (int(e.IBV_LINK_LAYER_INFINIBAND), int(e.IBV_LINK_LAYER_ETHERNET), int(e.IBV_LINK_LAYER_UNSPECIFIED)) \
        == (1, 2, 0) and hcas._VERBS_LINK_LAYERS == {1: "InfiniBand", 2: "Ethernet"}
    for stand_in in (verbs_replay.ibv_port_state, verbs_replay.ibv_mtu):        # the replay's IntFlag stand-ins
        assert {m.name: int(m) for m in stand_in} == {m.name: int(getattr(e, m.name)) for m in stand_in}


def test_the_calls_the_replay_answers_exist_on_pyverbs(real_verbs):
    replay = RecordedVerbs({"devices": {"mlx5_0": {"ports": {}}}})
    ctx = replay.Context(name="mlx5_0")
    for method in ("query_device", "query_port", "close"):
        real = getattr(real_verbs.Context, method)
        try:                    # Cython 3 builds keep signatures; Cython 0.29 builds (Debian's) do not
            want = list(inspect.signature(real).parameters)[1:]
        except (TypeError, ValueError):
            continue
        assert list(inspect.signature(getattr(ctx, method)).parameters) == want, method
    assert callable(real_verbs.get_device_list) and isinstance(real_verbs.Context, type)
    # the Device fields get_device_list() fills, by the constructor get_device_list() calls
    dev = real_verbs.Device(b"mlx5_0", 0x0c42a10300b3cd20, 1, 0, 0)
    stand_in = verbs_replay.Device(b"mlx5_0", 0x0c42a10300b3cd20, 1, 0, 0)
    for name in ("name", "guid", "node_type", "transport_type", "index"):
        assert getattr(dev, name) == getattr(stand_in, name), name


def test_the_replay_exceptions_are_pyverbs_own_shape(real_verbs):
    from pyverbs import pyverbs_error as real

    for name in ("PyverbsError", "PyverbsRDMAError", "PyverbsUserError"):
        mine, theirs = getattr(verbs_replay, name), getattr(real, name)
        assert [k.__name__ for k in mine.__mro__] == [k.__name__ for k in theirs.__mro__]
    for args in (("Failed to query port 2", 22), ("Failed to get devices list",), ("Failed to open device x", 2)):
        mine, theirs = verbs_replay.PyverbsRDMAError(*args), real.PyverbsRDMAError(*args)
        assert (str(mine), mine.error_code) == (str(theirs), theirs.error_code)
    assert str(verbs_replay.PyverbsUserError("Device name must be provided")) == \
        str(real.PyverbsUserError("Device name must be provided"))


def test_the_stand_in_attributes_are_pyverbs_own(real_verbs):
    for stand_in, cls in ((verbs_replay._STAND_IN_DEVICE_ATTR, real_verbs.DeviceAttr),
                          (verbs_replay._STAND_IN_PORT_ATTR, real_verbs.PortAttr)):
        real = verbs_replay._Kind.of_real(cls).getters
        assert set(stand_in) <= set(real), sorted(set(stand_in) - set(real))
        for name, kind in stand_in.items():
            assert issubclass(real[name], kind), (cls.__name__, name, real[name])


# ---------------------------------------------------------------- the replay on the real types

def test_recorded_answers_on_the_real_types_give_the_same_section(real_verbs, dgx):
    fs = SysfsReader(dgx.root)
    on_real = RecordedVerbs(dgx.verbs_answers, pyverbs=real_verbs)
    assert all(type(d) is real_verbs.Device for d in on_real.get_device_list())
    section, notes = probe_hcas(fs, verbs=on_real)       # an attribute pyverbs lacks would be a note here
    assert not notes and section.status.source.endswith("+pyverbs")
    assert section == probe_hcas(fs, verbs=dgx.verbs())[0]
    assert all(p.active_mtu == 4096 and p.max_mtu == 4096 for h in section.hcas for p in h.ports)


# ---------------------------------------------------------------- the live import

def test_the_live_capture_imports_the_real_module_without_touching_logging(real_verbs):
    # pyverbs calls logging.basicConfig(level=INFO) on import; ncdoc keeps other libraries' INFO quiet
    code = ("from ncdoc.probes.live import _import_verbs; "
            "import logging; m, why = _import_verbs(); "
            "logging.getLogger('some.library').info('hello from a library'); "
            "print(m.__name__ if m else None, repr(why), logging.getLogger().handlers)")
    p = _run(code)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["pyverbs.device", "''", "[]"] and "hello from a library" not in p.stderr
