"""`ncdoc tune --backend nccl-tests` end to end through the stand-ins (tests/fixtures/bin): the tuner
table built on NCCL's own TUNING lines, a trial whose env did not reach NCCL rejected with that
reason, and tuning at scale through srun (health gate, node groups with their own baselines, the
full-scale A/B)."""

import json
import os
import sys
from pathlib import Path

import pytest

from ncdoc.cluster import tuning_log
from ncdoc.tuner.table import parse_conf
from paths import ROOT, TESTS

sys.path.insert(0, str(TESTS / "cluster"))
from cluster_helpers import BIN, ncdoc, standin_calls, standin_env  # noqa: E402

pytest.importorskip("optuna")
SNAPSHOTS = ROOT / "ncdoc" / "examples" / "snapshots"
pytestmark = pytest.mark.slow


def _env(tmp_path, **kw):
    env = standin_env(tmp_path, **kw)
    env["NCDOC_STANDIN_RUNS"] = str(tmp_path / "runs")       # every run its own noise
    return env


def test_the_tuner_table_comes_from_nccls_own_tuning_lines(tmp_path):
    """One DGX H100 node (this machine, the local launcher); NCCL's model misjudges Tree/LL on it
    (the stand-in runs it 1.3x faster than the simulator says): the table probes find it, and every
    rule at a measured size carries what NCCL's TUNING lines said it ran there."""
    env = _env(tmp_path, nodes="localhost", allocation=False)
    env["NCDOC_STANDIN_SNAPSHOT"] = str(SNAPSHOTS / "dgx-h100.json")
    env["NCDOC_STANDIN_FAST"] = "Tree/LL=1.3"
    plugin = tmp_path / "libnccl-tuner-example.so"         # the stand-in loads rules when this file exists
    plugin.write_bytes(b"")
    out = tmp_path / "out"
    p = ncdoc(["tune", "--backend", "nccl-tests", "--example", "dgx-h100", "--nodes", "1", "--nccl-tests-dir", str(BIN),
               "--profile", "latency", "--trials", "4", "--repeats", "1", "--top-k", "1", "--confirm-pairs", "5",
               "--tuner-plugin", str(plugin), "--iters", "20", "--out", str(out), "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["tuner_table"]["rules"] > 0 and summary["files"].get("tuner_conf")
    (ov,) = summary["tuner_table"]["overrides"]
    assert (ov["collective"], ov["algo"], ov["proto"]) == ("all_reduce", "Tree", "LL")
    assert any("TUNING lines" in n for n in summary["tuner_table"]["notes"])
    rules = parse_conf((out / "nccl_tuner.conf").read_text())
    text = (out / "nccl_tuner.conf").read_text()
    assert "# NCCL's own choice (its TUNING lines)" in text
    # what NCCL printed when the probe job ran the env alone, at each measured size
    (log,) = (out / "trials" / "probe").glob("*-env-*/all_reduce.b0.log")
    said = {p.nbytes: p for p in tuning_log.read(log.read_text().splitlines()).picks}
    for size in (1 << 20, 4 << 20):                     # measured sizes outside the measured override
        rule = next(r for r in rules if r.collective == "all_reduce" and r.min_bytes <= size <= r.max_bytes)
        assert (rule.algo, rule.proto, rule.channels) == (said[size].algo, said[size].proto, said[size].channels)
    for size in (4096, 16384):                          # inside it: the measured choice
        rule = next(r for r in rules if r.collective == "all_reduce" and r.min_bytes <= size <= r.max_bytes)
        assert (rule.algo, rule.proto) == ("Tree", "LL")


SPACE = """\
schema_version: 1
name: buffers
variables:
  NCCL_BUFFSIZE: {values: [unset, 8388608]}
"""


def test_a_trial_whose_env_did_not_reach_nccl_is_rejected_with_that_reason(tmp_path):
    env = _env(tmp_path, nodes="localhost", allocation=False,
               faults={"nodes": ["localhost"], "faults": {"localhost": {"ignore_env": ["NCCL_BUFFSIZE"]}}})
    env["NCDOC_STANDIN_SNAPSHOT"] = str(SNAPSHOTS / "dgx-h100.json")
    (tmp_path / "s.yaml").write_text(SPACE)
    out = tmp_path / "out"
    p = ncdoc(["tune", "--backend", "nccl-tests", "--example", "dgx-h100", "--nodes", "1", "--nccl-tests-dir", str(BIN),
               "--space", str(tmp_path / "s.yaml"), "--sampler", "grid", "--profile", "latency", "--trials", "2",
               "--repeats", "1", "--iters", "20", "--health-gate", "off", "--out", str(out), "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["trials_failed"] == 1 and summary["changes"] == {}
    (reason,) = summary["failures"]
    assert reason.startswith("invalid: NCCL_BUFFSIZE=8388608 did not reach NCCL on localhost")
    assert "the run measured NCCL's default there" in reason
    assert reason in (out / "EXPLAIN.md").read_text()
    import optuna
    from ncdoc.tuner.storage import storage_for
    study = optuna.load_study(study_name="ncdoc-tune", storage=storage_for(None, out))
    (bad,) = [t for t in study.trials if t.params.get("NCCL_BUFFSIZE") == "8388608"]
    assert bad.state.name == "FAIL" and bad.user_attrs["ncdoc.fail_kind"] == "invalid"
    assert bad.user_attrs["ncdoc.failed"] == reason


def test_tuning_at_scale_through_srun(tmp_path):
    """Six nodes in a Slurm allocation, trials on groups of two: node05 is slow on the network (the
    isolation finds it), node06's NCCL never sees NCCL_SOCKET_NTHREADS (the env check finds it), so
    their group is not used; the two others each measure their own baseline, and the result is
    checked once on the four healthy nodes."""
    faults = {"nodes": 6, "faults": {"node05": {"net": 0.4}, "node06": {"ignore_env": ["NCCL_SOCKET_NTHREADS"]}}}
    env = _env(tmp_path, nodes="node[01-06]", faults=faults)
    env["NCDOC_STANDIN_SNAPSHOT"] = str(SNAPSHOTS / "workstation-2gpu.json")
    (tmp_path / "s.yaml").write_text("schema_version: 1\nname: sockets\nvariables:\n"
                                     "  NCCL_SOCKET_NTHREADS: {values: [unset, 4]}\n")
    out = tmp_path / "out"
    p = ncdoc(["tune", "--backend", "nccl-tests", "--example", "workstation-2gpu", "--nodes", "2", "--gpus-per-node",
               "1", "--nccl-tests-dir", str(BIN), "--space", str(tmp_path / "s.yaml"), "--sampler", "grid",
               "--trials", "2", "--repeats", "1", "--top-k", "1", "--confirm-pairs", "5", "--iters", "20",
               "--launcher-args=--mpi=pmix", "--out", str(out), "--json"], env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    sc = summary["scale"]
    assert sc["per_group"] == 2 and sc["placement"] == "the launcher's node order"
    groups = {g["name"]: g for g in sc["groups"]}
    assert [groups[g]["used"] for g in ("g0", "g1", "g2")] == [True, True, False]
    assert "node05" in groups["g2"]["why"] and "node06" in groups["g2"]["why"]
    bad = sc["health_gate"]["bad_nodes"]
    assert set(bad) == {"node05", "node06"}
    assert bad["node05"].startswith("bad-node") and "NCCL_SOCKET_NTHREADS" in bad["node06"]
    for g in ("g0", "g1"):                                  # a baseline each, scaled to the groups' mean
        assert groups[g]["baseline"]["all_reduce"] and 0.9 < groups[g]["relative"] < 1.1
    assert summary["changes"] == {"NCCL_SOCKET_NTHREADS": "4"}
    full = sc["full_scale"]
    assert full["nodes"] == 4 and full["accepted"] and full["sides"]["B"]["gain_pct"] > 10
    explain = (out / "EXPLAIN.md").read_text()
    assert "## Tuning at scale" in explain and "| g2 | node05, node06 | no: the health gate found" in explain
    # every job went through srun with the pass-through flag; trials ran on both groups
    runs = [c for c in standin_calls(tmp_path) if isinstance(c, list) and c[0] == "srun"]
    assert runs and all("--mpi=pmix" in c for c in runs)
    lists = {a for c in runs for a in c if a.startswith("--nodelist=")}
    assert {"--nodelist=node[01-02]", "--nodelist=node[03-04]", "--nodelist=node[01-04]"} <= lists
    assert any((out / "trials" / "health").rglob("*.log"))
    assert os.path.isdir(out / "trials" / "full-scale")


@pytest.mark.ray
def test_a_tune_through_the_ray_launcher(ray_runtime, tmp_path):
    """The same backend on the Ray launcher (the suite's runtime: this machine as one Ray node): each
    run a Ray task pinned to the node, its log kept, the env check passed."""
    from ncdoc.tuner.run import TuneOptions, run_tune
    (tmp_path / "s.yaml").write_text(SPACE)
    res = run_tune(TuneOptions(backend="nccl-tests", launcher="ray", example="dgx-h100", nodes=1,
                               nccl_tests_dir=str(BIN), space=str(tmp_path / "s.yaml"), sampler="grid",
                               profile="latency", trials=2, repeats=1, top_k=0, iters=20, timeout_s=60,
                               out=str(tmp_path / "out")))
    assert res.backend["launcher"] == "ray" and res.trials_complete == 2 and res.trials_failed == 0
    assert res.scale["health_gate"]["bad_nodes"] == {}
    assert list((tmp_path / "out" / "trials").glob("trial-*/*/all_reduce.b0.log"))
    assert ray_runtime.is_initialized()                  # joined the running instance, left it running


def test_ctrl_c_ends_the_remote_ranks_and_the_tune(tmp_path):
    """Ctrl-C while a node's ranks hang (inside the health gate's round): srun's step is ended on every
    node, the tune exits 130 saying how to resume, and no benchmark process is left."""
    import signal
    import subprocess
    import time

    env = _env(tmp_path, nodes="node[01-02]", faults={"nodes": 2, "faults": {"node02": {"perf": "hang"}}})
    env["NCDOC_STANDIN_SNAPSHOT"] = str(SNAPSHOTS / "workstation-2gpu.json")
    proc = subprocess.Popen([sys.executable, "-m", "ncdoc", "tune", "--backend", "nccl-tests", "--example",
                             "workstation-2gpu", "--nodes", "1", "--gpus-per-node", "1", "--nccl-tests-dir", str(BIN),
                             "--timeout", "300", "--iters", "20", "--out", str(tmp_path / "out")],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            # Ctrl-C's own disposition, also where the suite itself was started with SIGINT
                            # ignored (a background job of a script): a child inherits that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                isinstance(c, str) and c.startswith("all_reduce_perf") for c in standin_calls(tmp_path)):
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.1)
        time.sleep(0.5)                               # the ranks are up; node02's hang
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert "--resume" in err and "Traceback" not in err
    assert any(isinstance(c, str) and c.startswith("abort SIGINT twice") for c in standin_calls(tmp_path))
    left = [p for p in Path("/proc").glob("[0-9]*") if str(BIN) in _cmdline(p)]
    assert not left, [_cmdline(p) for p in left]


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""
