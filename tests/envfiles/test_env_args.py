"""--env is one option with one parser and one layering in every command: the same odd values give
the same answer from lint, check, doctor, env show and triage."""

from __future__ import annotations

import json

import pytest

from ncdoc.cli.main import main
from ncdoc.envfiles.layers import job_env, layer, parse_env_args
from ncdoc.errors import UsageError
from ncdoc.snapshot import EnvValue, NcclEnv, Status
from paths import FIXTURES

LOG = str(FIXTURES / "triage" / "healthy-ib.log")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    import os
    for k in list(os.environ):
        if k.startswith(("NCCL_", "NCDOC_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def _command(name: str, env_args: list[str]) -> list[str]:
    env = [x for a in env_args for x in ("--env", a)]
    return {
        "lint": ["lint", "--no-config", "--example", "dgx-h100", *env, "--json"],
        "check": ["check", "--no-config", "--example", "dgx-h100", *env, "--json"],
        "doctor": ["doctor", "--no-config", "--example", "dgx-h100", *env, "--json"],
        "env show": ["env", "show", "--example", "dgx-h100", *env, "--json"],
        "triage": ["triage", LOG, "--example", "dgx-h100", *env, "--json"],
    }[name]


COMMANDS = ["lint", "check", "doctor", "env show", "triage"]


def _run(capsys, name, env_args):
    rc = main(_command(name, env_args))
    out, err = capsys.readouterr()
    return rc, out, err


# the name must be exactly a variable name: NCCL reads names exactly, so " NCCL_IB_DISABLE" is not NCCL's
REFUSED = [
    (" NCCL_IB_DISABLE=1", "the name ' NCCL_IB_DISABLE' has spaces around it"),
    ("NCCL_IB_DISABLE =1", "the name 'NCCL_IB_DISABLE ' has spaces around it"),
    ("NCCL_IB_DISABLE", "expected NAME=VALUE"),
    ("=1", "no variable name"),
    (" =1", "no variable name"),
    ("1NCCL=2", "'1NCCL' is not a variable name"),
    ("NCCL-IB=1", "'NCCL-IB' is not a variable name"),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("arg,why", REFUSED, ids=[a for a, _ in REFUSED])
def test_odd_names_are_one_clear_usage_error_everywhere(capsys, command, arg, why):
    rc, out, err = _run(capsys, command, [arg])
    assert rc == 2 and out == ""
    assert err.startswith(f"ncdoc: error: --env {arg!r}: ")           # names the argument as given
    assert why in err and len(err.strip().splitlines()) == 1


def _effective(capsys, command, env_args) -> dict[str, str]:
    """What the command took each --env variable to be: env show's table, triage's facts, or the
    findings lint/check/doctor made about NCCL_IB_DISABLE."""
    rc, out, err = _run(capsys, command, env_args)
    assert rc in (0, 1), err
    doc = json.loads(out)
    if command == "env show":
        return {v["name"]: v["value"] for v in doc["values"] if v["source"] == "cli:--env"}
    if command == "triage":
        return {k: v for k, v in doc["facts"]["env"].items() if k.startswith("NCCL_IB")}
    disabled = [f for f in doc["findings"] if f["name"] == "ib-disabled-by-env"]
    return {"NCCL_IB_DISABLE": "1"} if disabled else {}


@pytest.mark.parametrize("command", COMMANDS)
def test_the_later_of_two_wins_everywhere(capsys, command):
    assert _effective(capsys, command, ["NCCL_IB_DISABLE=0", "NCCL_IB_DISABLE=1"]).get("NCCL_IB_DISABLE") == "1"
    assert _effective(capsys, command, ["NCCL_IB_DISABLE=1", "NCCL_IB_DISABLE=0"]).get("NCCL_IB_DISABLE") != "1"


@pytest.mark.parametrize("command", ["env show", "triage"])
def test_values_are_kept_exactly(capsys, command):
    got = _effective(capsys, command, ["NCCL_IB_HCA= mlx5_0", "NCCL_IB_GID_INDEX=", "NCCL_IB_SL==3"])
    assert got["NCCL_IB_HCA"] == " mlx5_0" and got["NCCL_IB_GID_INDEX"] == "" and got["NCCL_IB_SL"] == "=3"


def test_the_parser():
    values = parse_env_args(["NCCL_IB_HCA==mlx5_0", "NCCL_DEBUG=", "NCCL_IB_HCA=mlx5_1", "_X9=a=b"])
    assert [(v.name, v.value, v.source) for v in values] == [
        ("NCCL_DEBUG", "", "cli:--env"), ("NCCL_IB_HCA", "mlx5_1", "cli:--env"), ("_X9", "a=b", "cli:--env")]
    for bad, _ in REFUSED:
        with pytest.raises(UsageError):
            parse_env_args([bad])


def _env(*values, shadowed=()):
    return NcclEnv(Status.ok("t"), tuple(EnvValue(n, v, s) for n, v, s in values),
                   tuple(EnvValue(n, v, s) for n, v, s in shadowed))


def test_one_layering():
    base = _env(("NCCL_A", "base", "env"), ("NCCL_B", "base", "env"), shadowed=[("NCCL_B", "old", "file:x")])
    first = [EnvValue("NCCL_A", "first", "file:a"), EnvValue("NCCL_C", "first", "file:a")]
    second = [EnvValue("NCCL_C", "second", "file:b")]
    reported = [[EnvValue("NCCL_D", "log", "job.log", 4), EnvValue("NCCL_A", "log", "job.log", 5)]]
    env = job_env(base, env=["NCCL_B=cli"], files=[first, second], reported=reported)
    assert env.as_dict() == {"NCCL_A": "first", "NCCL_B": "cli", "NCCL_C": "second", "NCCL_D": "log"}
    lost = {(v.name, v.value) for v in env.shadowed}
    assert lost == {("NCCL_C", "first"), ("NCCL_A", "log"), ("NCCL_A", "base"), ("NCCL_B", "base"),
                    ("NCCL_B", "old")}     # every value that lost, the base's own losers too
    assert job_env(base) is base and job_env(None) is None
    assert layer([EnvValue("NCCL_A", "1", "x")], removed=["NCCL_A"]).values == ()


def test_a_later_env_file_beats_an_earlier_one_in_every_command(capsys, tmp_path):
    a, b = tmp_path / "a.env", tmp_path / "b.env"
    a.write_text("export NCCL_IB_HCA=mlx5_0\n")
    b.write_text("export NCCL_IB_HCA=mlx5_1\n")
    rc = main(["env", "show", "--env-file", str(a), "--env-file", str(b), "--json"])
    values = {v["name"]: v["value"] for v in json.loads(capsys.readouterr().out)["values"]}
    assert rc == 0 and values["NCCL_IB_HCA"] == "mlx5_1"
    rc = main(["triage", str(a), str(b), "--json"])
    assert json.loads(capsys.readouterr().out)["facts"]["env"]["NCCL_IB_HCA"] == "mlx5_1"
