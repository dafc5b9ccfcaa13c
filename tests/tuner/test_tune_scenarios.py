"""Every scenario of the tuner issue, end to end on the simulator: what the tune writes is safe to
deploy. No forced protocol, no bare algorithm, no deprecated or default-valued variable; `ncdoc lint`
passes every env file it writes for the NCCL version in use; every file says SIMULATED; a tuner table
covers every size of every collective and slows no measured size."""

import json
import statistics

import pytest

from ncdoc.cli.main import main
from ncdoc.snapshot import EnvValue, NcclEnv, Status
from ncdoc.tuner.run import TuneOptions, create_backend, run_tune
from ncdoc.tuner.table import COLLECTIVES, MAX_BYTES, parse_conf

pytest.importorskip("optuna")

FORBIDDEN = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NTHREADS",
             "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_PXN_DISABLE")


def _bad_habits_snapshot(tmp_path):
    """A dgx-h100 node whose job env carries copied-from-a-wiki debugging knobs."""
    from ncdoc.examples.machines import load_example
    node = load_example("dgx-h100")
    env = NcclEnv(Status.ok("file:job.env"), tuple(EnvValue(k, v, "file:job.env") for k, v in
                                                   (("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "LL128"),
                                                    ("NCCL_MIN_NCHANNELS", "4"))))
    path = tmp_path / "node.json"
    path.write_text(node.replace(env=env).to_json())
    return str(path)


SCENARIOS = {
    "socket-ll128": dict(preset="h100-socket-2node"),
    "ib-8node-fsdp": dict(preset="h100-ib-8node", profile="fsdp"),
    "dgx-roce-4node-moe": dict(example="dgx-h100", nodes=4, fabric={"fabric": "roce", "ecmp_paths": 8,
                                                                     "leaf_nodes": 2}, profile="moe-alltoall"),
    "roce-8node-table": dict(preset="h100-roce-8node"),
    "roce-lossless-class": dict(preset="h100-roce-8node-lossless-tc"),
    "vm-relaxed-ordering": dict(preset="h100-vm-2node"),
    "bad-habits-in-todays-env": dict(snapshot=None, nodes=2),
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def tuned(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    kw = dict(SCENARIOS[request.param])
    if "snapshot" in kw:
        kw["snapshot"] = _bad_habits_snapshot(tmp)
    opts = TuneOptions(backend="sim", trials=20, storage="memory", out=str(tmp / "out"), formats=("json",), **kw)
    return request.param, opts, run_tune(opts), tmp / "out"


def test_no_forced_protocol_no_bare_algorithm_no_debug_knob(tuned):
    name, opts, res, out = tuned
    assert not set(res.env) & set(FORBIDDEN), res.env
    from ncdoc.tuner.knowledge import load_knowledge
    know = load_knowledge()
    assert not [k for k, v in res.env.items() if know.is_default(k, v, res.nccl_version)]
    if name == "bad-habits-in-todays-env":
        assert set(res.unset) == {"NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS"}
        assert "# Remove from the environment jobs run with today: unset NCCL_ALGO" in (out / "nccl.env").read_text()


def test_ncdoc_lint_passes_every_env_file_the_tune_wrote(tuned, capsys):
    name, opts, res, out = tuned
    assert res.refused == "" and (out / "nccl.env").is_file(), res.refused
    for env_file in ("nccl.env",):
        rc = main(["lint", "--env-file", str(out / env_file), "--nccl-version", res.nccl_version, "--fail-on",
                   "warning", "--format", "lines"])
        assert rc == 0, capsys.readouterr().out
    capsys.readouterr()


def test_every_output_says_simulated(tuned):
    name, opts, res, out = tuned
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "sim" and summary["simulated"] is True
    assert (out / "nccl.env").read_text().startswith("# SIMULATED: not measured on hardware")
    assert json.loads((out / "nccl.env.json").read_text())["simulated"] is True
    assert "> SIMULATED: not measured on hardware" in (out / "EXPLAIN.md").read_text().split("\n## ")[0]
    if (out / "nccl_tuner.conf").exists():
        assert "# SIMULATED: not measured on hardware" in (out / "nccl_tuner.conf").read_text()


def test_the_guard_sweep_covered_small_sizes_and_every_collective_of_the_job(tuned):
    name, opts, res, out = tuned
    guard = json.loads((out / "summary.json").read_text())["guard_sweep"]
    if res.final is None:
        assert guard is None and not res.recommended       # nothing was recommended, nothing swept
        return
    rows = guard["rows"]
    swept = {r["collective"] for r in rows}
    assert set(res.profile.collectives) | set(res.profile.guard) <= swept, swept
    assert min(r["size"] for r in rows) <= 8 and any(r["size"] == 1 << 20 for r in rows)   # 8 B to 1 MB
    assert [r for r in rows if r["regression"]] == [] and guard["regressions"] == []       # nothing slower


def test_a_tuner_table_covers_every_size_and_slows_no_measured_one(tuned):
    name, opts, res, out = tuned
    conf = out / "nccl_tuner.conf"
    if not conf.exists():
        assert not res.table.rules and res.table.notes
        pytest.skip(f"{name}: no table written ({res.table.notes[0]})")
    rules = parse_conf(conf.read_text())
    for coll in COLLECTIVES:
        mine = [r for r in rules if r.collective == coll]
        assert mine and mine[0].min_bytes == 0 and mine[-1].max_bytes == MAX_BYTES
        assert all(b.min_bytes == a.max_bytes + 1 for a, b in zip(mine, mine[1:]))
        assert all(r.channels >= 1 for r in mine)
    backend = create_backend(opts, print)
    merged = {}
    for c, sizes in tuple(res.profile.workload()) + tuple(res.profile.guard_workload()):
        merged.setdefault(c, set()).update(sizes)
    workload = [(c, tuple(sorted(s))) for c, s in merged.items()]

    def mean_busbw(table):
        runs = [backend.measure(res.env, workload, 30000 + r, table=table).busbw() for r in range(8)]
        return {(c, s): statistics.fmean(run[c][s] for run in runs) for c, sizes in workload for s in sizes}

    plain, tabled = mean_busbw(()), mean_busbw(tuple(rules))
    slower = {k: tabled[k] / plain[k] for k in plain if plain[k] > 0 and tabled[k] < 0.97 * plain[k]}
    assert not slower, slower


def test_roce_across_racks_gets_queue_pairs_and_a_lossy_class_gets_the_lossless_one(tuned):
    name, opts, res, out = tuned
    if name == "roce-8node-table":
        assert int(res.env.get("NCCL_IB_QPS_PER_CONNECTION", 1)) >= 2
    elif name == "roce-lossless-class":
        assert res.env.get("NCCL_IB_TC") == "106"
    elif name == "vm-relaxed-ordering":
        assert res.env.get("NCCL_IB_PCI_RELAXED_ORDERING") == "1"
    else:
        pytest.skip("no specific expectation")
    assert res.final is not None and res.final.lcb > 0.05 and not res.final.regressions
