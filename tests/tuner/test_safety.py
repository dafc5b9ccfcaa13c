"""What the tuner may recommend: only what `ncdoc lint` passes for the NCCL version in use, never a
value equal to that release's default, deprecated names searched as their successors."""

import textwrap

from ncdoc.tuner.knowledge import load_knowledge
from ncdoc.tuner.safety import blocking, excluded, flagged, safe_space, successor, without_defaults
from ncdoc.tuner.space import Hardware
from ncdoc.tuner.space_file import load_space

H100 = dict(nodes=8, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90)

USER_SPACE = """\
schema_version: 1
name: old-habits
variables:
  NCCL_ALGO: {values: [Ring, Tree, NVLSTree]}
  NCCL_PROTO: {values: [LL128, Simple, "^LL128"]}
  NCCL_MIN_NCHANNELS: {values: [8, 16]}
  NCCL_NTHREADS: {values: [256, 512]}
  NCCL_IB_SPLIT_DATA_ON_QPS: {values: [0, 1]}
  NCCL_IB_QPS_PER_CONNECTION: {values: [1, 4]}
"""


def _hw(version, fabric="ib"):
    return Hardware(fabric=fabric, nccl_version=version, **H100)


def test_a_users_space_loses_every_value_lint_warns_about_or_that_is_the_default(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(USER_SPACE))
    space = safe_space(load_space(str(path)), _hw("2.30.7"), ["all_reduce"])
    kept = {v.name: v.values for v in space.variables}
    assert kept == {"NCCL_IB_SPLIT_DATA_ON_QPS": ("unset", "1"), "NCCL_IB_QPS_PER_CONNECTION": ("unset", "4")}
    notes = " | ".join(space.notes)
    assert "NCCL_ALGO=Ring not searched: ncdoc lint: NC1005" in notes
    assert "NCCL_PROTO=LL128 not searched: ncdoc lint: NC1005" in notes
    assert "NCCL_MIN_NCHANNELS searched as NCCL_MIN_CTAS: deprecated since NCCL 2.17" in notes
    assert "NCCL_IB_SPLIT_DATA_ON_QPS=0 not searched: it is NCCL's default in 2.30.7" in notes
    assert "NCCL_IB_QPS_PER_CONNECTION=1 not searched: it is NCCL's default" in notes
    old = safe_space(load_space(str(path)), _hw("2.19.3"), ["all_reduce"])
    assert old.variable("NCCL_IB_SPLIT_DATA_ON_QPS").values == ("unset", "0")      # 1 was the default then
    assert successor("NCCL_MIN_NCHANNELS", "2.16.5") is None                       # not deprecated yet


def test_shipped_spaces_hold_nothing_lint_warns_about_on_any_release():
    for fabric in ("ib", "roce", "socket"):
        for version in ("2.18.5", "2.21.5", "2.30.7"):
            space = safe_space(load_space(fabric), _hw(version, fabric), ["all_reduce", "alltoall", "sendrecv"])
            for var in space.variables:
                for value in var.values:
                    if value != "unset":
                        assert not blocking({var.name: value}, version), (fabric, version, var.name, value)
                        assert excluded(var.name, value, version) is None


def test_flagged_variables_of_todays_env_and_defaults_left_out():
    env = {"NCCL_ALGO": "Ring", "NCCL_IB_HCA": "=mlx5_0", "NCCL_NTHREADS": "128"}
    assert set(flagged(env, "2.30.7")) == {"NCCL_ALGO", "NCCL_NTHREADS"}
    kept, notes = without_defaults({"NCCL_BUFFSIZE": "0x400000", "NCCL_IB_QPS_PER_CONNECTION": "4"}, "2.30.7")
    assert kept == {"NCCL_IB_QPS_PER_CONNECTION": "4"} and "NCCL_BUFFSIZE=0x400000 left out" in notes[0]
    know = load_knowledge()
    assert know.nccl_default("NCCL_NVLS_ENABLE", "2.17.1") == "1" and know.nccl_default("NCCL_NVLS_ENABLE",
                                                                                       "2.21.5") == "2"
