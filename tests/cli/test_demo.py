"""`ncdoc demo`, README's first command: the three jobs on the bundled cluster, no GPU."""

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_every_job_and_writes_the_files(tmp_path):
    out = tmp_path / "demo"
    p = subprocess.run([sys.executable, "-m", "ncdoc", "demo", "--out", str(out), "--trials", "20"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    text = p.stdout
    # each job ran, in order, and said what it found
    for step in ("$ ncdoc check", "$ ncdoc doctor", "$ ncdoc triage", "$ ncdoc env generate", "$ ncdoc tune"):
        assert step in text
    assert text.index("$ ncdoc check") < text.index("$ ncdoc triage") < text.index("$ ncdoc tune")
    assert "roce-gid-link-local" in text            # the launch script's GID 0 on RoCE
    assert "socket-ifname-virtual" in text          # NCCL_SOCKET_IFNAME=docker0
    for name in ("nccl.env", "EXPLAIN.md", "generated.env", "report.html"):
        assert (out / name).is_file(), name
    # the tune was given its cluster explicitly, and says that it simulated it
    assert "$ ncdoc tune --backend sim --snapshot" in text and "--leaf-nodes 1" in text
    assert "SIMULATED: not measured on hardware" in text
    assert (out / "nccl.env").read_text().startswith("# SIMULATED")
    assert f"wrote {out / 'report.html'} (" in text and "tuning" in text   # the report, and where it is
    generated = (out / "generated.env").read_text()
    assert "NCCL_IB_HCA" in generated and "docker0" not in generated
    # the env file is what bash reads back
    env = subprocess.run(["bash", "-c", f"set -a; . '{out / 'nccl.env'}'; env"], capture_output=True,
                         text=True, timeout=30).stdout
    assert "NCCL_IB_HCA==mlx5_0:1" in env
