"""The recorded-answers replay behaves as pyverbs does: on its stand-in types, and on the installed
pyverbs' own types (skipped without the 'verbs' extra), so what the probe sees in a replay is what
it would see from the real module."""

from __future__ import annotations

import enum

import pytest

from ncdoc.examples.verbs_replay import NotRecorded, RecordedVerbs
from ncdoc.examples import verbs_replay

ANSWERS = {"devices": {
    "mlx5_0": {"phys_port_cnt": 1, "fw_version": "28.39.1002", "vendor_part_id": 4129,
               "ports": {"1": {"state": 4, "active_mtu": 5, "max_mtu": 5, "link_layer": 1, "lid": 16, "sm_lid": 1}}},
    "mlx5_1": {"fw_version": "28.39.1002", "vendor_part_id": 4129, "open_errno": 2,
               "ports": {"1": {"state": 1, "active_mtu": 3, "max_mtu": 5, "link_layer": 2, "lid": 0, "sm_lid": 0}}},
}}


@pytest.fixture(params=["stand-in", "stand-in IntFlag", "real pyverbs"])
def kind(request):
    if request.param == "real pyverbs":
        return "real", request.getfixturevalue("real_verbs")
    return request.param, None


def _replay(kind, answers=ANSWERS):
    name, real = kind
    return RecordedVerbs(answers, pyverbs=real, enum_types=name == "stand-in IntFlag")


def _errors(kind):
    """(PyverbsError, PyverbsRDMAError, PyverbsUserError) the replay raises."""
    if kind[1] is None:
        return verbs_replay.PyverbsError, verbs_replay.PyverbsRDMAError, verbs_replay.PyverbsUserError
    from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError, PyverbsUserError
    return PyverbsError, PyverbsRDMAError, PyverbsUserError


def test_device_list_names_are_bytes_as_pyverbs_gives_them(kind):
    devices = _replay(kind).get_device_list()
    assert [d.name for d in devices] == [b"mlx5_0", b"mlx5_1"] and [d.index for d in devices] == [0, 1]
    assert [d.node_type for d in devices] == [1, 1]                          # IBV_NODE_CA
    if kind[1] is not None:
        assert all(type(d) is kind[1].Device for d in devices)


def test_no_uverbs_raises_and_no_device_lists_nothing(kind):
    base, rdma, _ = _errors(kind)
    with pytest.raises(rdma) as caught:                   # no /sys/class/infiniband_verbs
        _replay(kind, {"devices": {}}).get_device_list()
    assert isinstance(caught.value, base) and caught.value.error_code == -1
    assert str(caught.value) == "Failed to get devices list"
    assert _replay(kind, {"devices": {}, "uverbs": True}).get_device_list() == []


def test_context_failures_carry_pyverbs_messages_and_errnos(kind):
    base, rdma, user = _errors(kind)
    replay = _replay(kind)
    with pytest.raises(rdma, match=r"^Failed to find device mlx5_9$") as caught:
        replay.Context(name="mlx5_9")
    assert caught.value.error_code == -1
    with pytest.raises(rdma, match=r"^Failed to find device b'mlx5_0'$"):      # pyverbs wants a str
        replay.Context(name=b"mlx5_0")
    with pytest.raises(user, match="Device name must be provided"):
        replay.Context()
    with pytest.raises(rdma, match=r"^Failed to open device mlx5_1\. Errno: 2, No such file or directory$") as caught:
        replay.Context(name="mlx5_1")
    assert caught.value.error_code == 2 and isinstance(caught.value, base)
    with pytest.raises(rdma, match=r"^Failed to get devices list$"):
        _replay(kind, {"devices": {}}).Context(name="mlx5_0")
    ctx = replay.Context(name="mlx5_0")
    with pytest.raises(rdma, match=r"^Failed to query port 2\. Errno: 22, Invalid argument$") as caught:
        ctx.query_port(2)
    assert caught.value.error_code == 22
    ctx.close()


def test_answers_have_the_types_pyverbs_returns(kind):
    name, real = kind
    ctx = _replay(kind).Context(name="mlx5_0")
    dev, port = ctx.query_device(), ctx.query_port(1)
    assert (dev.phys_port_cnt, dev.fw_version, dev.vendor_part_id) == (1, "28.39.1002", 4129)
    assert (port.state, port.active_mtu, port.max_mtu, port.link_layer, port.lid, port.sm_lid) == (4, 5, 5, 1, 16, 1)
    assert type(port.link_layer) is int and type(port.lid) is int and type(dev.fw_version) is str
    if real is not None:           # whatever the installed build returns (IntFlag from Cython 3, int from 0.29)
        zero = real.PortAttr()
        assert type(port.state) is type(zero.state) and type(port.active_mtu) is type(zero.active_mtu)
    elif name == "stand-in IntFlag":
        assert isinstance(port.state, enum.IntFlag) and port.state.name == "IBV_PORT_ACTIVE"
        assert port.active_mtu.name == "IBV_MTU_4096"
    else:
        assert type(port.state) is int and type(port.active_mtu) is int


def test_unrecorded_and_unknown_attributes_are_told_apart(kind):
    ctx = _replay(kind).Context(name="mlx5_0")
    port = ctx.query_port(1)
    with pytest.raises(NotRecorded, match="PortAttr.phys_state"):      # pyverbs has it; the recording does not
        port.phys_state
    with pytest.raises(AttributeError, match="mtu"):                  # pyverbs has no such attribute
        port.mtu
    assert getattr(port, "mtu", "absent") == "absent"


def test_a_recording_pyverbs_could_not_give_is_refused(kind):
    with pytest.raises(ValueError, match="PortAttr.speed_gbps"):
        _replay(kind, {"devices": {"mlx5_0": {"ports": {"1": {"state": 4, "speed_gbps": 400}}}}})
    with pytest.raises(ValueError, match="DeviceAttr.firmware"):
        _replay(kind, {"devices": {"mlx5_0": {"firmware": "28.39.1002", "ports": {}}}})
