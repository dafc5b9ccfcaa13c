"""The Snapshot model: JSON round-trip, strict loading, frozen records, clear input errors."""

import json

import pytest

from ncdoc.startup import record
from ncdoc.errors import InputError
from ncdoc.snapshot import (Gid, Hca, HcaSection, NcclEnv, EnvValue, Port, Snapshot, Status,
                            SCHEMA_VERSION)


def _sample() -> Snapshot:
    port = Port(1, state="ACTIVE", rate_gbps=400.0, link_layer="Ethernet",
                gids=(Gid(3, "0000:0000:0000:0000:0000:ffff:0a0c:0015", "RoCE v2", "eth2"),
                      Gid(0, "fe80:0000:0000:0000:9cbb:b7ff:feb3:937a", "IB/RoCE v1", "eth2")),
                counters={"symbol_error": 0, "link_downed": 2})
    return Snapshot(
        hcas=HcaSection(Status.ok("sysfs"), (Hca("mlx5_0", pci_address="0000:18:00.0", ports=(port,)),)),
        env=NcclEnv(Status.ok("env"), (EnvValue("NCCL_IB_HCA", "=mlx5_0:1", "env"),)),
    )


def test_round_trip_is_identical():
    snap = _sample()
    again = Snapshot.from_dict(json.loads(snap.to_json()))
    assert again == snap
    assert again.hcas.hcas[0].ports[0].gids[0].ipv4 == "10.12.0.21"
    assert again.hcas.hcas[0].ports[0].gids[1].link_local
    assert again.env.get("NCCL_IB_HCA") == "=mlx5_0:1"


def test_unknown_is_not_absent():
    snap = Snapshot()
    assert not snap.gpus.status.known
    assert Status.absent("no GPUs").known


def test_records_are_frozen_and_replaceable():
    snap = _sample()
    with pytest.raises(AttributeError):
        snap.origin = "x"
    changed = snap.replace(origin="file:x")
    assert changed.origin == "file:x" and snap.origin == "live"
    assert record.replace(Status.ok(), reason="r").reason == "r"


def test_a_record_deriving_from_record_base_behaves_as_a_decorated_plain_class():
    # Record gives by inheritance the methods @record sets on a plain class (the check path's records)
    import dataclasses
    import pickle

    def make(base):
        ns = {"__annotations__": {"a": "int", "b": "tuple[str, ...]"}, "b": record.field(default_factory=tuple)}
        return record.record(frozen=True)(type("R", base, ns))

    for cls in (make(()), make((record.Record,))):
        x = cls(1, ("p",))
        assert x == cls(a=1, b=("p",)) and x != cls(2) and hash(x) == hash(cls(1, ("p",)))
        assert repr(x) == "R(a=1, b=('p',))" and cls(1).b == () and cls.__match_args__ == ("a", "b")
        with pytest.raises(AttributeError):
            x.a = 2
        with pytest.raises(AttributeError):
            del x.a
        with pytest.raises(TypeError):
            cls()
        globals()["R"] = cls             # pickle finds the class by its module and name
        cls.__module__, cls.__qualname__ = __name__, "R"
        assert pickle.loads(pickle.dumps(x)) == x
        assert [f.name for f in dataclasses.fields(x)] == ["a", "b"] and record.asdict(x) == {"a": 1, "b": ["p"]}
    with pytest.raises(TypeError, match="frozen"):
        record.record(frozen=False)(type("M", (record.Record,), {"__annotations__": {"a": "int"}}))


@pytest.mark.parametrize("payload, needle", [
    ({"hello": 1}, "not an ncdoc snapshot"),
    ({"schema_version": SCHEMA_VERSION + 1}, "newer ncdoc"),
    ({"schema_version": "1"}, "not supported"),
    ({"schema_version": SCHEMA_VERSION, "host": {"bogus": 1}}, "bogus"),
    ({"schema_version": SCHEMA_VERSION, "hcas": {"hcas": [{"name": 3}]}}, "expected a string"),
])
def test_bad_snapshots_raise_input_error(payload, needle):
    with pytest.raises(InputError) as err:
        Snapshot.from_dict(payload, path="x.json")
    assert needle in str(err.value)


def test_load_reports_missing_and_malformed_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Snapshot.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        Snapshot.load(bad)
