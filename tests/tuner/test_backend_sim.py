"""The sim backend: measures and fails as NCCL would, builds clusters from presets and snapshots, never
makes one up, and a tune on it says SIMULATED."""

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import TrialFailed
from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
from ncdoc.tuner.backends import RunContext
from ncdoc.tuner.run import TuneOptions, create_backend, run_tune

pytest.importorskip("optuna")
sim = pytest.importorskip("ncdoc.tuner.sim")


def test_sim_backend_measures_and_fails_like_nccl():
    be = SimBackend(sim_cluster(preset="h100-ib-2node"))
    m = be.measure({}, [("all_reduce", (1 << 20, 1 << 30))], 0)
    rows = m.results("all_reduce")
    assert [r.size for r in rows] == [1 << 20, 1 << 30] and rows[1].busbw > rows[0].busbw > 0
    assert rows[1].algo and rows[1].proto and rows[1].nchannels
    with pytest.raises(TrialFailed, match="Unrecognized element token") as err:
        be.measure({"NCCL_ALGO": "Bogus"}, [("all_reduce", (1 << 20,))], 0)
    assert err.value.kind == "init"
    with pytest.raises(TrialFailed, match="wrong results") as err:       # LL128 over sockets
        SimBackend(sim_cluster(preset="h100-socket-2node")).measure({"NCCL_PROTO": "LL128"},
                                                                    [("all_reduce", (8 << 20,))], 0)
    hw = be.hardware()
    assert (hw.fabric, hw.nodes, hw.gpus_per_node) == ("ib", 2, 8)
    assert be.expectation("all_reduce").expected_busbw == pytest.approx(0.92 * 8 * 50.0)


def test_another_node_group_is_other_nodes():
    be = SimBackend(sim_cluster(preset="h100-ib-2node"))
    wl = [("all_reduce", (1 << 26,))]
    home = be.measure({}, wl, 0, context=RunContext(group="ncdoc_nodegroup_0")).busbw()
    assert home == be.measure({}, wl, 0).busbw()
    assert home != be.measure({}, wl, 0, context=RunContext(group="replica")).busbw()


def test_sim_cluster_from_example_and_fabric_flags():
    from ncdoc.examples.machines import load_example

    snap = load_example("h100-roce")
    c = sim_cluster(snapshot=snap, nodes=4, ecmp_paths=4, leaf_nodes=2)
    assert c.nodes == 4 and c.fabric == "roce" and c.ecmp_paths == 4 and c.leaf_nodes == 2
    assert sim_cluster(preset="h100-ib-2node", nodes=8).nodes == 8


def test_no_made_up_cluster():
    with pytest.raises(UsageError, match=r"--preset NAME \(one of: h100-ib-2node, .*h100-roce-8node"):
        create_backend(TuneOptions(backend="sim"), print)
    with pytest.raises(UsageError, match="give one"):
        create_backend(TuneOptions(backend="sim", preset="h100-ib-2node", example="dgx-h100"), print)


def test_no_recommendation_with_a_nonempty_baseline_still_explains_itself(tmp_path):
    # A gain bar nothing can clear: the study ends with "no change", keeps the baseline env as it
    # is, and still writes nccl.env (lint-clean) and EXPLAIN.md; no table is written.
    base = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eth0"}
    backend = SimBackend(sim.preset("h100-ib-2node"), seed=1, base_env=base)
    (tmp_path / "nccl_tuner.conf").write_text("allreduce,0,1,ring,ll,1,-1,-1\n")      # from an older run
    opts = TuneOptions(trials=3, repeats=1, out=str(tmp_path), min_gain=0.5, top_k=1, seed=1, storage="memory")
    result = run_tune(opts, backend=backend)
    assert result.final is None and result.env == base and not result.recommended
    explain = (tmp_path / "EXPLAIN.md").read_text()
    assert "No change recommended" in explain and "SIMULATED" in explain
    env_text = (tmp_path / "nccl.env").read_text()
    assert "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1" in env_text or "NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'" in env_text
    assert not (tmp_path / "nccl_tuner.conf").exists()                  # an old table this run does not back
    assert any("nccl_tuner.conf from an earlier run removed" in n for n in result.notes)


def test_a_todays_env_that_lints_with_warnings_is_not_written_again_when_removing_it_costs(tmp_path):
    # NCCL_NET=Socket on an IB cluster: lint flags it (ib-disabled-by-env) and removing it is a big gain.
    backend = SimBackend(sim.preset("h100-ib-2node"), base_env={"NCCL_NET": "Socket"})
    res = run_tune(TuneOptions(trials=4, out=str(tmp_path), storage="memory"), backend=backend)
    assert "NCCL_NET" in res.unset and res.final is not None and res.final.gain > 1.0
    assert "NCCL_NET" not in (tmp_path / "nccl.env").read_text().split("# ncdoc lint passes")[1]
