"""Multi-rank jobs through the launchers, as the tuner runs them: this machine alone (the local
launcher), a job's own whole NCCL env (inherited NCCL_* dropped), a cancel from another thread
ending what srun runs, iteration bands merged into at most a few runs."""

import threading
import time

import pytest

from cluster_helpers import BIN, standin_calls, standin_env
from ncdoc.cluster import bench
from ncdoc.cluster.launch import Job
from ncdoc.cluster.local import LocalLauncher, this_host
from ncdoc.cluster.slurm import SlurmLauncher
from ncdoc.errors import UsageError

SPEC = bench.BenchSpec(sizes=(1 << 20, 1 << 26), iters=5, timeout_s=30, tests_dir=str(BIN))


def test_the_local_launcher_runs_one_process_driving_every_gpu(tmp_path):
    env = standin_env(tmp_path, nodes="x", allocation=False)
    launcher = LocalLauncher(environ=env)
    assert launcher.nodes() == [this_host()]
    g = bench.group(launcher, launcher.nodes(), env={"NCCL_BUFFSIZE": "4194304"}, gpus_per_node=8)
    assert (g.ranks_per_node, g.gpus_per_rank, g.ranks) == (1, 8, 8)
    (r,) = bench.run(launcher, [g], SPEC, log_dir=str(tmp_path / "runs"))
    assert r.ok, r.reason
    assert r.verdict.nranks == 8 and {row.algo for row in r.rows} <= {"Ring", "Tree", "NVLS", "NVLSTree"}
    (call,) = [c for c in (tmp_path / "standin.log").read_text().splitlines() if c.startswith("all_reduce_perf")]
    assert " -g 8 " in call and " -T 30" in call
    with pytest.raises(UsageError, match="this machine"):
        LocalLauncher(nodes="gpu[01-02]")
    with pytest.raises(UsageError, match="wants 1 node\\(s\\) x 8 rank"):
        launcher.job_command(Job("k", ("n",), ("true",), ranks_per_node=8))


def test_a_job_with_its_whole_env_drops_the_inherited_nccl_variables(tmp_path):
    env = standin_env(tmp_path, nodes="node[01-02]", faults={"nodes": 2})
    env["NCCL_IB_HCA"] = "mlx5_9"                   # the driver's own, exported by srun --export=ALL
    launcher = SlurmLauncher(environ=env)
    kept = bench.group(launcher, ("node01", "node02"), env={"NCCL_ALGO": "Ring"}, gpus_per_node=1, key="kept")
    clean = bench.group(launcher, ("node01", "node02"), env={"NCCL_ALGO": "Ring"}, gpus_per_node=1, key="clean",
                        clear_env=("NCCL_",), tuned={"NCCL_ALGO": "Ring"})
    a, b = bench.run(launcher, [kept, clean], bench.BenchSpec(sizes=(1 << 20,), iters=5, timeout_s=30,
                                                              tests_dir=str(BIN)), log_dir=str(tmp_path / "runs"))
    assert "NCCL_IB_HCA set to mlx5_9" in a.runs[0].output
    assert b.ok and "NCCL_IB_HCA" not in b.runs[0].output


def test_a_cancel_from_another_thread_ends_the_srun_step(tmp_path):
    env = standin_env(tmp_path, nodes="node[01-02]", faults={"nodes": 2, "faults": {"node02": {"perf": "hang"}}})
    launcher = SlurmLauncher(environ=env)
    g = bench.group(launcher, ("node01", "node02"), gpus_per_node=1)
    spec = bench.BenchSpec(sizes=(1 << 20,), iters=5, timeout_s=600, tests_dir=str(BIN))
    seen = {}

    def measure():
        try:
            bench.run(launcher, [g], spec, log_dir=str(tmp_path / "runs"))
        except KeyboardInterrupt:
            seen["interrupted"] = True

    t = threading.Thread(target=measure)
    t.start()
    while sum(1 for c in standin_calls(tmp_path) if isinstance(c, str) and c.startswith("all_reduce_perf")) < 2:
        time.sleep(0.05)                          # both ranks are running (one of them hangs)
    launcher.cancel.set()
    t.join(60)
    assert not t.is_alive() and seen.get("interrupted")
    assert any(isinstance(c, str) and c.startswith("abort SIGINT twice") for c in standin_calls(tmp_path))


def test_bands_merge_to_at_most_max_bands_runs():
    spec = bench.BenchSpec(sizes=tuple(1 << k for k in range(23, 32)))
    assert len(bench.bands(spec)) > 2
    merged = bench.bands(bench.BenchSpec(sizes=spec.sizes, max_bands=2))
    assert len(merged) == 2 and merged[0][0] == 1 << 23 and merged[-1][1] == 1 << 31
    assert merged[0][1] + 1 <= merged[1][0] and merged[0][2] > merged[1][2]
    job = bench.jobs_for(bench.BenchSpec(sizes=(1 << 20,), timeout_s=5, job_timeout_s=9, program=("python3", "-m", "x")),
                         bench.Group("k", ("n",)))[0]
    assert job.timeout_s == 9 and job.argv[:3] == ("python3", "-m", "x") and job.argv[3] == "-b"
