"""The tuning story from a tune output folder: what is there is drawn, what is missing is said, and
the study is read (never created) through Optuna, with its metric name and the dashboard command."""

from __future__ import annotations

import json

import optuna
import pytest

from test_report_cmd import Dom
from ncdoc.cli.main import main
from ncdoc.report.tune_input import parse_size, read_tune_dir

# The shape ncdoc tune writes today (ncdoc/tuner/run.py TuneResult.to_json, outputs.render_explain).
SUMMARY = {
    "schema_version": 1, "study_name": "ncdoc-tune", "storage": None, "sampler": "tpe", "repeats": 2,
    "backend": {"backend": "sim", "cluster": "h100-roce-2node", "nodes": 2, "gpus_per_node": 8},
    "profile": "dp-allreduce", "baseline_env": {"NCCL_IB_GID_INDEX": "3"}, "trials_complete": 3,
    "trials_failed": 1, "best_trial": {"number": 2, "score": 1.41, "changes": {"NCCL_IB_QPS_PER_CONNECTION": "8"}},
    "recommended_env": {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_QPS_PER_CONNECTION": "8"}, "unset": ["NCCL_ALGO"],
    "gain": {"pct": 38.5, "lower_bound_pct": 20.1, "pairs": 8}, "noise_floor_pct": 1.0,
    "candidates": [{"changes": {"NCCL_IB_QPS_PER_CONNECTION": "8"}, "recommended": True,
                    "why": "gain +38.5 % (98.3 % lower bound +20.1 %, 8 rounds) clears the floor 1.0 %"},
                   {"changes": {"NCCL_PROTO": "LL128"}, "recommended": False,
                    "why": "gain +0.4 % does not clear the floor 1.0 %"}],
    "minimal_env": [{"name": "NCCL_IB_QPS_PER_CONNECTION", "value": "8", "kept": True,
                     "why": "kept: without it the score drops 27.0 % (at least 12.6 % at 99.2 % confidence)"},
                    {"name": "NCCL_BUFFSIZE", "value": "16777216", "kept": False,
                     "why": "dropped: without it the score changes +1.0 %, within noise"}],
    "failures": {"NCCL would fail the call: NCCL_PROTO was set to LL.": 1}, "files": {}, "notes": [],
}
EXPLAIN = """\
# ncdoc tune: what was changed and why

## Recommended environment

| variable | value | what it does | without it (mean, ± sd, rounds) | helps (gain with it) |
|---|---|---|---|---|
| `NCCL_IB_QPS_PER_CONNECTION` | `8` | queue pairs per connection | -27.0 % ± 9.5 %, n=8 | all_reduce:large (+30.3 %) |

## Bus bandwidth by size

Median busbw per size; "% of expected" is against the line-rate expectation (all_reduce: 368 GB/s).

| collective | size | baseline busbw (GB/s) | tuned busbw (GB/s) | change | tuned, % of expected |
|---|---:|---:|---:|---:|---:|
| all_reduce | 8M | 113.1 | 151.2 | +33.7 % | 41 % |
| all_reduce | 64M | 179.3 | 288.0 | +60.6 % | 78 % |
| all_reduce | 1G | 193.9 | 327.6 | +69.0 % | 89 % |
"""


def make_study(path, *, metric_names=None):
    study = optuna.create_study(study_name="ncdoc-tune", storage=f"sqlite:///{path}", direction="maximize")
    if metric_names:
        study.set_metric_names(metric_names)
    for v in (1.0, 1.2, 1.41):
        t = study.ask()
        study.tell(t, v)
    t = study.ask()
    t.set_user_attr("ncdoc.failed", "NCCL would fail the call")
    t.set_user_attr("ncdoc.fail_kind", "call")
    study.tell(t, state=optuna.trial.TrialState.PRUNED)
    t = study.ask()
    t.set_user_attr("ncdoc.failed", "constraint: NCCL_MIN_NCHANNELS > NCCL_MAX_NCHANNELS")
    study.tell(t, state=optuna.trial.TrialState.PRUNED)


@pytest.fixture
def tune_dir(tmp_path):
    d = tmp_path / "tune"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(SUMMARY))
    (d / "EXPLAIN.md").write_text(EXPLAIN)
    make_study(d / "study.db", metric_names=["busbw_gain"])
    return d


def page(capsys, tmp_path, tune) -> Dom:
    out = tmp_path / "t.html"
    assert main(["report", "--tune", str(tune), "-o", str(out)]) == 0
    capsys.readouterr()
    return Dom(out.read_text())


def test_sizes_read_back_as_the_tuner_writes_them():
    assert [parse_size(s) for s in ("8", "512", "8K", "8M", "1G", "x")] == [8, 512, 8192, 8 << 20, 1 << 30, None]


def test_everything_the_folder_holds_is_read(tune_dir):
    d = read_tune_dir(str(tune_dir))
    assert d.missing == () and d.simulated is True and d.study_name == "ncdoc-tune"
    assert d.metric_names == ("busbw_gain",) and d.storage_url == f"sqlite:///{tune_dir / 'study.db'}"
    assert [t.state for t in d.trials] == ["complete"] * 3 + ["failed", "not run"]   # NCCL failed / a constraint
    assert d.sizes["tuned"]["all_reduce"][-1] == [1 << 30, 327.6] and d.expected == {"all_reduce": 368.0}
    kept = next(e for e in d.effects if e.kept)
    assert (kept.change_pct, kept.sd_pct) == (-27.0, 9.5)
    dropped = next(e for e in d.effects if not e.kept)
    assert (dropped.change_pct, dropped.sd_pct) == (1.0, None)


def test_the_page_tells_the_story(capsys, tmp_path, tune_dir):
    dom = page(capsys, tmp_path, tune_dir)
    text = " ".join(dom.text)
    assert "SIMULATED" in text and "+38.5 %" in text and "busbw_gain" in text
    assert f"optuna-dashboard sqlite:///{tune_dir / 'study.db'}" in text
    assert dom.having("figure", id="tune-history")[0]["data-points"] == "3"       # the complete trials
    assert dom.having("figure", id="tune-effects")[0]["data-points"] == "2"
    assert dom.having("figure", id="tune-busbw-0")[0]["data-points"] == "6"      # 3 sizes x baseline, tuned
    rows = [a for t, a in dom.tags if t == "tr" and a.get("class") in ("accepted", "rejected")]
    assert [r["class"] for r in rows] == ["accepted", "rejected"]
    assert "unset NCCL_ALGO" in text and "no guard sweep" in text


def test_a_study_without_metric_names_says_what_the_dashboard_will_show(capsys, tmp_path):
    d = tmp_path / "tune"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(SUMMARY))
    make_study(d / "study.db")
    text = " ".join(page(capsys, tmp_path, d).text)
    assert 'shows "Objective 0"' in text
    assert "no EXPLAIN.md" in text                               # said, not silently dropped


def test_a_guard_sweep_in_whatever_shape_is_shown(capsys, tmp_path, tune_dir):
    s = dict(SUMMARY, guard_sweep={"verdict": "passed", "rows": [
        {"collective": "all_gather", "size": "64K", "baseline": 12.1, "tuned": 12.0, "regression": False},
        {"collective": "broadcast", "size": "8", "baseline": 0.01, "tuned": 0.01, "regression": False}]})
    (tune_dir / "summary.json").write_text(json.dumps(s))
    dom = page(capsys, tmp_path, tune_dir)
    rows = [a for t, a in dom.tags if t == "table" and a.get("class") == "guard"]
    assert rows and "all_gather" in dom.text and "verdict: passed" in " ".join(dom.text)


@pytest.mark.parametrize("setup, words", [
    (lambda d: None, "no summary.json"),
    (lambda d: (d / "summary.json").write_text("{ not json"), "summary.json could not be read"),
    (lambda d: (d / "summary.json").write_text(json.dumps(dict(SUMMARY, storage=str(d / "gone.db")))),
     "no study storage found"),
])
def test_missing_or_broken_pieces_are_said_and_the_page_still_renders(capsys, tmp_path, setup, words):
    d = tmp_path / "tune"
    d.mkdir()
    setup(d)
    text = " ".join(page(capsys, tmp_path, d).text)
    assert words in text
    assert not (d / "study.db").exists() and not (d / "gone.db").exists()   # reading never creates a study


def test_a_path_that_is_no_folder_is_said(capsys, tmp_path):
    text = " ".join(page(capsys, tmp_path, tmp_path / "nowhere").text)
    assert "is not a folder" in text


def test_the_guard_sweep_as_the_tuner_writes_it_is_drawn_with_the_slower_sizes_marked(capsys, tmp_path, tune_dir):
    rows = [{"collective": c, "size": size, "baseline": 10.0, "tuned": 10.0 * (1 + ch / 100) if ch is not None else 0,
             "change_pct": ch, "regression": slow}
            for c in ("all_reduce", "all_gather") for size, ch, slow in ((8, None, False), (65536, -0.4, False),
                                                                         (1 << 20, -6.0, c == "all_gather"))]
    s = dict(SUMMARY, noise_pct=1.2, guard_sweep={"rounds": 5, "regressions": ["all_gather 1M"], "rows": rows})
    (tune_dir / "summary.json").write_text(json.dumps(s))
    dom = page(capsys, tmp_path, tune_dir)
    fig = dom.having("figure", id="tune-guard")[0]
    assert fig["data-points"] == "4"                       # the sizes with a measurable change
    text = " ".join(dom.text)
    assert "5 rounds" in text and "1 slower beyond noise: all_gather 1M" in text
    assert text.count("slower beyond noise") >= 2 and "not measurable" in text and "1M" in text
    assert any(a.get("id") == "tune-guard-guard-slower" for _, a in dom.tags)   # the slower size, marked


def test_trials_stopped_early_are_drawn_where_their_runs_put_them(tmp_path):
    import math
    d = tmp_path / "tune"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(SUMMARY))
    make_study(d / "study.db", metric_names=["busbw_vs_baseline"])
    study = optuna.load_study(study_name="ncdoc-tune", storage=f"sqlite:///{d / 'study.db'}")
    t = study.ask()
    t.set_user_attr("ncdoc.scores", [math.log(0.9), math.log(0.8)])
    t.set_user_attr("ncdoc.stopped", "stopped after 2 run(s): clearly worse than the best so far")
    t.set_user_attr("ncdoc.stage", "refine")
    study.tell(t, state=optuna.trial.TrialState.PRUNED)
    early = [x for x in read_tune_dir(str(d)).trials if x.state == "stopped early"]
    assert len(early) == 1 and early[0].stage == "refine" and abs(early[0].value - math.sqrt(0.72)) < 1e-9
    assert "clearly worse" in early[0].reason


@pytest.mark.ray
def test_tune_format_html_writes_the_page_into_the_output_folder(ray_runtime, capsys, tmp_path):
    out = tmp_path / "tune"
    assert main(["tune", "--preset", "h100-roce-2node", "--trials", "4", "--repeats", "1", "--confirm-pairs", "5",
                 "--out", str(out), "--format", "html", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["files"]["html"] == str(out / "report.html") and not (out / "nccl.html").exists()
    dom = Dom((out / "report.html").read_text())
    assert dom.having("section", id="tuning") and "busbw_vs_baseline" in " ".join(dom.text)
