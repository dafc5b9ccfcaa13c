"""The live `ncdoc check` (what prologs run) and `--example` stay as lean as `--snapshot`: no regex
machinery, no json package, no dataclasses, typing or inspect, no child `ip`, and pynvml only in
NVML's own child process where NVIDIA devices exist. (Speed itself: benchmarks/check_latency.py.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# What each of these costs is a share of the check's whole start-up budget; none is needed on a
# node's live path (the probes read files by hand, NVML answers through marshal from its child).
LIVE_ABSENT = ("re", "json", "json.decoder", "dataclasses", "typing", "inspect", "pynvml", "subprocess",
               "argparse", "enum", "functools", "collections", "importlib", "pathlib", "shutil", "ipaddress",
               "platform", "socket", "datetime", "glob", "fnmatch", "yaml", "signal")


def _loaded(argv: list[str], cwd, env=None) -> tuple[int, list[str], str]:
    """(exit status, modules the command imported, its output)."""
    code = ("import sys; base = set(sys.modules); from ncdoc.cli.main import main; rc = main(%r); "
            "print('LOADED', sorted(set(sys.modules) - base)); print('RC', rc)" % (argv,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    loaded = next(line for line in p.stdout.splitlines() if line.startswith("LOADED"))
    rc = int(next(line for line in p.stdout.splitlines() if line.startswith("RC")).split()[1])
    return rc, eval(loaded[len("LOADED "):]), p.stdout + p.stderr


def _clean_env(tmp_path) -> dict[str, str]:
    """A job environment with no NCCL or launcher variables (a clean node as a prolog sees it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "NCDOC_", "SLURM_"))}
    env["HOME"] = str(tmp_path)
    return env


def test_live_check_imports_no_heavy_module(tmp_path):
    rc, loaded, err = _loaded(["check", "--no-config"], tmp_path, _clean_env(tmp_path))
    assert rc in (0, 1), err
    bad = [m for m in LIVE_ABSENT if m in loaded]
    assert bad == [], f"the live check imported {bad}"


def test_live_check_with_findings_stays_lean(tmp_path):
    env = dict(_clean_env(tmp_path), SLURM_GPUS_ON_NODE="64")        # more GPUs than any node has
    rc, loaded, out = _loaded(["check", "--no-config"], tmp_path, env)
    assert rc == 1 and "NC5101 fewer-gpus-than-allocated" in out, out
    bad = [m for m in LIVE_ABSENT if m in loaded]
    assert bad == [], f"the live check with findings imported {bad}"


@pytest.mark.parametrize("example", ["dgx-h100", "dgx-h100-port-down"])
def test_example_check_reads_a_stored_snapshot_without_yaml_or_a_tree(tmp_path, example):
    rc, loaded, err = _loaded(["check", "--example", example, "--no-config"], tmp_path)
    assert rc == (1 if example.endswith("port-down") else 0), err
    bad = [m for m in LIVE_ABSENT if m in loaded]
    assert bad == [] and "ncdoc.examples.machines" not in loaded and "ncdoc.probes.live" not in loaded, bad
