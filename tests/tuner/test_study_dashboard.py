"""What optuna-dashboard shows of a tune's study: the objective under its name."""

import pytest

optuna = pytest.importorskip("optuna")


def test_the_objective_has_a_name_the_dashboard_shows(tmp_path):
    from ncdoc.tuner.run import TuneOptions, run_tune
    from ncdoc.tuner.storage import storage_for
    from ncdoc.tuner.study import METRIC_NAME

    run_tune(TuneOptions(backend="sim", preset="h100-ib-2node", trials=3, repeats=1, top_k=0, out=str(tmp_path)))
    study = optuna.load_study(study_name="ncdoc-tune", storage=storage_for(None, tmp_path))
    assert study.metric_names == [METRIC_NAME] == ["busbw_vs_baseline"]
