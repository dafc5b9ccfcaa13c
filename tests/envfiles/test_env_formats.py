"""nccl.env and the other env file formats: values arrive exactly, or are refused with a clear error."""

import json
import os
import shutil
import subprocess

import pytest

from ncdoc.envfiles.formats import FORMATS, render_env, write_atomic
from ncdoc.errors import InputError

HOSTILE = {
    "NCCL_SOCKET_IFNAME": "^docker0,lo",
    "NCCL_ALGO": "allreduce:tree;allgather:ring",
    "NCCL_DEBUG_FILE": "/tmp/nccl log %h.%p",          # a space
    "NCCL_TOPO_FILE": "it's \"quoted\"",               # both quote kinds
    "NCCL_NET_PLUGIN": "$(touch /tmp/ncdoc-pwned)`id`",  # command substitution, backticks
    "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
    "NCCL_CONF_FILE": "back\\slash and $HOME",
    "NCCL_EMPTY_ONE": "",
    "NCCL_UNICODE": "café ✓",
}

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _source(tmp_path, text, names):
    f = tmp_path / "nccl.env"
    f.write_text(text)
    script = "set -a; . ./nccl.env; " + "; ".join(f'printf "%s\\0" "${{{n}-__UNSET__}}"' for n in names)
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, timeout=10,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    return dict(zip(names, out.stdout.decode().split("\0")))


@pytest.mark.parametrize("fmt", ["sh", "slurm"])
def test_sourced_by_bash_reproduces_hostile_values_exactly(tmp_path, fmt):
    text = render_env(HOSTILE, fmt, comments={"NCCL_ALGO": "why: $(not run)\nsecond line"})
    got = _source(tmp_path, text, list(HOSTILE))
    assert got == HOSTILE
    assert not (tmp_path / "ncdoc-pwned").exists() and not os.path.exists("/tmp/ncdoc-pwned")


def test_sh_lines_are_export_with_shell_quoting():
    text = render_env({"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_X": "a b"}, "sh")
    assert "export NCCL_IB_QPS_PER_CONNECTION=4\n" in text
    assert "export NCCL_X='a b'\n" in text


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", ["two\nlines", "carriage\rreturn", "nul\0byte"])
def test_line_breaks_and_nul_are_rejected_in_every_format(fmt, bad):
    with pytest.raises(InputError, match="NCCL_BAD"):
        render_env({"NCCL_OK": "1", "NCCL_BAD": bad}, fmt)


def test_invalid_names_are_rejected():
    with pytest.raises(InputError, match="not a valid environment variable name"):
        render_env({"NCCL X": "1"}, "sh")


def test_nccl_conf_is_name_equals_value_without_quotes():
    text = render_env({"NCCL_SOCKET_IFNAME": "^docker0,lo", "NCCL_ALGO": "allreduce:tree;allgather:ring"},
                      "nccl.conf", comments={"NCCL_ALGO": "a=b"})
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == ["NCCL_SOCKET_IFNAME=^docker0,lo", "NCCL_ALGO=allreduce:tree;allgather:ring"]
    # NCCL's reader (before 2.26) has no comments: a comment line must not hold '=' or it defines a variable.
    assert all("=" not in ln for ln in text.splitlines() if ln.startswith("#"))


@pytest.mark.parametrize("value", ["a b", "'quoted'", '"q"', "$HOME", "back\\slash", "`x`", "trailing "])
def test_nccl_conf_rejects_values_that_need_quoting(value):
    with pytest.raises(InputError, match="needs quoting"):
        render_env({"NCCL_X": value}, "nccl.conf")


def test_dotenv_and_k8s_and_json_carry_values():
    safe = {k: v for k, v in HOSTILE.items() if "'" not in v}
    dot = render_env(safe, "dotenv")
    assert "NCCL_SOCKET_IFNAME=^docker0,lo" in dot and "NCCL_DEBUG_FILE='/tmp/nccl log %h.%p'" in dot
    with pytest.raises(InputError, match="single quote"):
        render_env({"NCCL_X": "it's"}, "dotenv")
    k8s = render_env(HOSTILE, "k8s")
    yaml = pytest.importorskip("yaml")
    env = yaml.safe_load(k8s)["env"]
    assert {e["name"]: e["value"] for e in env} == HOSTILE
    data = json.loads(render_env(HOSTILE, "json", comments={"NCCL_ALGO": "why"}))
    assert data["schema_version"] == 1 and data["env"] == HOSTILE and data["comments"] == {"NCCL_ALGO": "why"}


def test_unknown_format_is_an_input_error():
    with pytest.raises(InputError, match="unknown env file format"):
        render_env({}, "toml")


def test_write_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "nccl.env"
    write_atomic(target, "export A=1\n")
    write_atomic(target, "export A=2\n")
    assert target.read_text() == "export A=2\n"
    assert [p.name for p in target.parent.iterdir()] == ["nccl.env"]


def test_write_atomic_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "nccl.env"
    target.write_text("old\n")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(InputError, match="cannot write the file"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["nccl.env"]
