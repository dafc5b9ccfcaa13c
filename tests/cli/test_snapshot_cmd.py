"""`ncdoc snapshot`: exit codes, stdout and stderr checked separately."""

from __future__ import annotations

import json

import pytest
import subprocess
import sys

from ncdoc.cli.main import main
from ncdoc.snapshot import Snapshot


def run(capsys, *argv):
    rc = main(["snapshot", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_live_snapshot_on_this_machine(capsys):
    rc, out, err = run(capsys)
    assert rc == 0
    snap = Snapshot.from_dict(json.loads(out))
    assert snap.origin == "live" and snap.created
    assert err.startswith("ncdoc: snapshot of ")
    # this machine has no GPU and no RDMA device: the summary says so honestly
    if snap.gpus.status.state != "ok":
        assert "GPUs: none" in err or "GPUs: unknown" in err
    if snap.hcas.status.state != "ok":
        assert "RDMA: none" in err or "RDMA: unknown" in err


def test_example_to_file_is_written_whole(capsys, tmp_path):
    target = tmp_path / "node.json"
    target.write_text("old")
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "-o", target)
    assert rc == 0 and out == ""
    snap = Snapshot.load(target)
    assert snap.origin == "example:dgx-h100-port-down"
    assert "11 of 12 ports ACTIVE" in err and f"wrote {target}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["node.json"]          # no temporary file left behind


def test_json_summary_with_output(capsys, tmp_path):
    rc, out, err = run(capsys, "--example", "workstation-2gpu", "-o", tmp_path / "ws.json", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["schema_version"] == 1 and doc["origin"] == "example:workstation-2gpu"
    assert any("no RDMA devices" in n for n in doc["notes"])


def test_the_summary_says_where_the_hca_facts_came_from(capsys, tmp_path):
    rc, out, err = run(capsys, "--example", "dgx-h100")        # an example that records pyverbs' answers
    assert rc == 0 and "RDMA: 12 devices, 12 of 12 ports ACTIVE (from sysfs:/sys/class/infiniband+pyverbs)" in err
    rc, out, err = run(capsys, "--example", "azure-ndv5", "-o", tmp_path / "az.json")    # one without pyverbs
    assert "ports ACTIVE (from sysfs:/sys/class/infiniband)\n" in err
    note = "HCA facts from sysfs only, InfiniBand port MTUs unknown: pyverbs is not installed (the 'verbs' extra)"
    assert f"note: {note}" in err
    snap = Snapshot.load(tmp_path / "az.json")
    assert snap.hcas.status.source == "sysfs:/sys/class/infiniband" and note in snap.notes


def test_list_examples(capsys):
    rc, out, _ = run(capsys, "--list-examples")
    assert rc == 0 and out.splitlines()[0].split()[0] == "azure-ndv5" and "dgx-h100" in out
    rc, out, _ = run(capsys, "--list-examples", "--json")
    assert rc == 0 and {"name": "l40s-pcie"}.items() <= json.loads(out)["examples"][-2].items()


def test_usage_errors(capsys, tmp_path):
    rc, out, err = run(capsys, "--example", "nope")
    assert rc == 2 and out == "" and "unknown example 'nope'" in err
    rc, out, err = run(capsys, "--sysfs-root", tmp_path / "missing")
    assert rc == 2 and "is not a folder" in err
    rc, out, err = run(capsys, "--example", "dgx-h100", "-o", tmp_path / "no" / "dir" / "x.json")
    assert rc == 2 and "no such folder" in err


def test_sysfs_root_snapshot(capsys, tmp_path):
    (tmp_path / "sys/class/net").mkdir(parents=True)
    rc, out, err = run(capsys, "--sysfs-root", tmp_path)
    snap = Snapshot.from_dict(json.loads(out))
    assert rc == 0 and snap.origin == f"sysfs:{tmp_path}" and "NVML" in snap.gpus.status.reason


def test_devices_are_written_through_and_symlinks_refused(capsys, tmp_path, monkeypatch):
    """A symlink planted at the output's name is refused (it would overwrite what it points at), unless the
    caller asks to follow it; a device or pipe is streamed into, never renamed over."""
    import os

    from ncdoc.errors import InputError
    from ncdoc.readers.textfile import write_user_file

    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(InputError, match="symbolic link"):
        write_user_file(str(link), "{}\n")
    assert link.is_symlink() and real.read_text() == "old"
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(InputError, match="symbolic link"):
        write_user_file(str(tmp_path / "dangling.json"), "{}\n")
    assert not (tmp_path / "nowhere.json").exists()
    rc = main(["snapshot", "--example", "dgx-h100", "-o", str(link)])
    assert rc == 2 and "symbolic link" in capsys.readouterr().err and real.read_text() == "old"
    write_user_file(str(link), "{}\n", follow_symlinks=True)
    assert link.is_symlink() and real.read_text() == "{}\n"
    with pytest.raises(InputError, match="cannot encode"):
        write_user_file(str(real), "a\udcff")
    assert real.read_text() == "{}\n" and sorted(p.name for p in tmp_path.iterdir()) == \
        ["dangling.json", "link.json", "real.json"]

    def no_rename(*_args):
        raise AssertionError("renamed over a device")
    monkeypatch.setattr(os, "replace", no_rename)
    write_user_file("/dev/null", "{}\n")                  # streamed into the device, never renamed over it


def test_snapshot_never_imports_ray_or_optuna(tmp_path):
    code = ("import sys; from ncdoc.cli.main import main; rc = main(['snapshot', '--example', 'dgx-h100', "
            "'-o', %r]); rc2 = main(['snapshot']); " % str(tmp_path / "s.json") +
            "heavy = [m for m in ('ray', 'optuna') if m in sys.modules]; print(heavy); "
            "sys.exit(0 if rc == rc2 == 0 and not heavy else 3)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]
