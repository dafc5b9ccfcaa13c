"""Env files built from other people's nodes cannot run anything: hostile HCA, interface and hypervisor names
reach every format's values and comments, and each file is loaded the way its users load it.

A snapshot comes from someone else's machine, so every name in it is untrusted. For each hostile name
(newlines, carriage returns, `$(...)`, backticks, `;`, quotes, NUL, escape sequences, Unicode line
separators) the names of every HCA, every interface and the hypervisor are replaced in a real example,
`ncdoc env generate` renders each format, and then: sh and slurm files are sourced with
`set -a; . ./nccl.env` by bash and by dash, dotenv too (its quoting is the shell's), nccl.conf is read
by NCCL's rules, k8s by a YAML parser, json by json. Nothing may run (a command would create a file),
each value must arrive exactly as generated or the format must refuse it with an InputError, and no
comment line may hold a line break or control character.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from ncdoc.envfiles.formats import FORMATS, FILE_NAMES
from ncdoc.envfiles.generate import generate, render
from ncdoc.envfiles.layers import parse_conf
from ncdoc.errors import InputError
from ncdoc.examples.machines import load_example
from ncdoc.snapshot import Snapshot

PWNED = "PWNED"
HOSTILE = [
    "\ntouch PWNED\n", "x\rtouch PWNED", "$(touch PWNED)", "`touch PWNED`", "; touch PWNED;", "' ; touch PWNED ; '",
    "\" ; touch PWNED ; \"", "\\\ntouch PWNED", "\u2028touch PWNED", "\u2029touch PWNED", "\x85touch PWNED",
    "\x0btouch PWNED", "\x0ctouch PWNED", "\x1b[2J\x1b]0;touch PWNED\x07", "\x00touch PWNED", "#\ntouch PWNED",
    "${IFS}touch${IFS}PWNED", "&& touch PWNED", "| touch PWNED", "=\ntouch PWNED=1",
]
# what must not survive in any line of a written file (the line end itself is "\n")
BREAKERS = ("\r", "\x00", "\x0b", "\x0c", "\x1b", "\x85", "\u2028", "\u2029", "\x07")


def _hostile(example: str, evil: str, *, down: bool) -> Snapshot:
    """`example` with every HCA and interface name and the hypervisor made hostile (consistently, wherever the
    snapshot names them); with `down`, no port ACTIVE and no interface up, so the names reach only comments."""
    data = load_example(example).to_dict()
    text = json.dumps(data)
    names = [h["name"] for h in data["hcas"]["hcas"]] + [i["name"] for i in data["net"]["interfaces"]]
    for k, name in enumerate(sorted(set(names), key=len, reverse=True)):
        text = text.replace(json.dumps(name), json.dumps(f"{name}{evil}{k}"))
    data = json.loads(text)
    data["host"]["hypervisor"] = f"KVM{evil}"
    if down:
        for h in data["hcas"]["hcas"]:
            for p in h["ports"]:
                p["state"] = "DOWN"
        for i in data["net"]["interfaces"]:
            i["operstate"] = "down"
    return Snapshot.from_dict(data)


def _clean_lines(text: str) -> None:
    for line in text.split("\n"):
        assert not any(b in line for b in BREAKERS), repr(line)


def _source(tmp: Path, name: str, shell: str) -> dict[str, str]:
    """The environment after `set -a; . ./name` in a fresh `shell` (cwd tmp, nothing inherited but PATH)."""
    p = subprocess.run([shell, "-c", f"set -a; . ./{name}; env -0"], cwd=tmp, capture_output=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"})
    assert not (tmp / PWNED).exists(), f"{shell} ran a command from {name}"
    assert p.returncode == 0, p.stderr
    return dict(kv.split("=", 1) for kv in p.stdout.decode("utf-8", "surrogateescape").split("\0") if "=" in kv)


SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]


def _check_loaded(fmt: str, text: str, values: dict[str, str], tmp: Path, notes=()) -> None:
    _clean_lines(text)
    path = tmp / FILE_NAMES[fmt]
    path.write_text(text, encoding="utf-8")
    if fmt in ("sh", "slurm", "dotenv"):
        assert SHELLS, "no POSIX shell here"
        for shell in SHELLS:
            env = _source(tmp, path.name, shell)
            assert {k: env.get(k) for k in values} == values, shell
    elif fmt == "nccl.conf":
        got = parse_conf(text, str(path))
        assert {v.name: v.value for v in got} == values and len(got) == len(values)
        assert all("=" not in line for line in text.splitlines() if line.startswith("#"))
    elif fmt == "k8s":
        doc = yaml.safe_load(text)
        assert set(doc) == {"env"}
        assert {e["name"]: e["value"] for e in doc["env"]} == values
    else:
        doc = json.loads(text)
        assert doc["env"] == values
        assert doc.get("notes", []) == list(notes)
    assert not (tmp / PWNED).exists()


@pytest.mark.parametrize("example,down", [("dgx-h100", False), ("dgx-h100", True), ("h100-roce", False),
                                          ("azure-ndv5", False)])
@pytest.mark.parametrize("evil", HOSTILE, ids=[repr(h)[:24] for h in HOSTILE])
def test_hostile_names_cannot_run_or_change_values_in_any_format(example, down, evil, tmp_path):
    gen = generate(_hostile(example, evil, down=down))
    assert evil in "".join(gen.notes) + "".join(gen.comments().values()) + "".join(gen.values().values()), \
        "the hostile name reaches no output: the test would prove nothing"
    written = 0
    for fmt in FORMATS:
        try:
            text = render(gen, fmt)
        except InputError as exc:             # refused: the value cannot be carried unchanged
            assert "\n" not in str(exc).split("\n  Cause:")[0]
            continue
        written += 1
        _check_loaded(fmt, text, gen.values(), tmp_path, gen.notes)
    # a value holding a line break or control character is refused by every format; a printable one is written
    assert written >= 2 or not evil.isprintable(), "nearly every format refused a printable name"


def test_names_only_in_comments_are_always_written(tmp_path):
    """Names that reach no value (every port down, no interface up) never make a format refuse: the comments
    are escaped, so each of the six formats is written and loads."""
    for evil in HOSTILE:
        gen = generate(_hostile("dgx-h100", evil, down=True))
        assert gen.notes and not gen.values()
        for fmt in FORMATS:
            _check_loaded(fmt, render(gen, fmt), {}, tmp_path, gen.notes)


def test_env_generate_cli_writes_a_file_that_sources_safely(tmp_path):
    from ncdoc.cli.main import main
    snap = tmp_path / "node.json"
    snap.write_text(_hostile("dgx-h100", "$(touch PWNED)`touch PWNED`", down=False).to_json(), encoding="utf-8")
    out = tmp_path / "nccl.env"
    assert main(["env", "generate", "--snapshot", str(snap), "--format", "sh", "-o", str(out)]) == 0
    env = _source(tmp_path, out.name, SHELLS[0])
    assert env["NCCL_IB_HCA"].startswith("=mlx5_0$(touch PWNED)`touch PWNED`")


@pytest.mark.parametrize("evil", HOSTILE, ids=[repr(h)[:24] for h in HOSTILE])
def test_tuner_env_outputs_escape_the_study_name(evil, tmp_path):
    """The tuner's env files and nccl_tuner.conf header quote the study's name; whatever it holds, they load."""
    from ncdoc.tuner.outputs import env_file_text
    from ncdoc.tuner.table import render as render_table
    values = {"NCCL_IB_QPS_PER_CONNECTION": "2", "NCCL_IB_HCA": "=mlx5_0:1"}
    result = SimpleNamespace(env=values, effects=(), recommended=set(values), final=None, unset=("NCCL_ALGO",),
                             study_name=f"study{evil}", profile=SimpleNamespace(name=f"p{evil}"),
                             nccl_version="2.23.4", simulated=True)
    for fmt in FORMATS:
        _check_loaded(fmt, env_file_text(result, fmt), values, tmp_path)
    conf = render_table([], header=[f"study {evil}; NCCL 2.23.4"])
    _clean_lines(conf)
    assert all(line.startswith("#") for line in conf.splitlines())
