"""NVML in a child process stopped at its deadline: a stand-in pynvml that hangs in nvmlInit (as some
H200 / 570-series combinations do) must not hang the check, and the timeout is a fact, never
silently absent. Each case runs in a subprocess with the stand-in first on sys.path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from paths import ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="NVML runs in a forked child only where fork exists")

# Stand-ins for pynvml: the names the probe uses, NVMLError classes named as pynvml names them.
HANGS = '''
import os, time
class NVMLError(Exception):
    pass
def nvmlInit():
    with open(os.environ["NVML_PID_FILE"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(3600)
'''
MISMATCH = '''
class NVMLError(Exception):
    pass
class NVMLError_LibRmVersionMismatch(NVMLError):
    def __str__(self):
        return "RM has detected an NVML/RM version mismatch."
def nvmlInit():
    raise NVMLError_LibRmVersionMismatch()
'''
CRASHES = '''
import os
class NVMLError(Exception):
    pass
def nvmlInit():
    os.kill(os.getpid(), 9)         # as a driver bug that takes the process down would
'''
ONE_GPU = '''
class NVMLError(Exception):
    pass
class NVMLError_GpuIsLost(NVMLError):
    def __str__(self):
        return "GPU is lost"
class _Mem:
    total = 80 * 1024 ** 3
class _Pci:
    busId = b"00000000:1B:00.0"
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "570.86.15"
def nvmlSystemGetCudaDriverVersion(): return 12080
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i):
    if i == 1:
        raise NVMLError_GpuIsLost()
    return object()
def nvmlDeviceGetName(h): return "NVIDIA H200"
def nvmlDeviceGetUUID(h): return "GPU-1111"
def nvmlDeviceGetPciInfo(h): return _Pci()
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlDeviceGetRetiredPagesPendingStatus(h): return 1
def nvmlDeviceGetRemappedRows(h): return (0, 2, 1, 0)
'''

CAPTURE = '''
import json, sys
from ncdoc.probes.live import capture
snap = capture(sysfs_root=sys.argv[1], nvml="pynvml", timeout_s=float(sys.argv[2]), use_verbs=False, environ={})
print(json.dumps(snap.to_dict()))
'''


def _tree(tmp_path: Path) -> Path:
    """A node root with NVIDIA device nodes and the driver's /proc entry, and one GPU on the PCI bus."""
    root = tmp_path / "root"
    for rel in ("dev/nvidia0", "dev/nvidiactl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "proc/driver/nvidia").mkdir(parents=True)
    dev = root / "sys/devices/pci0000:00/0000:00:06.0"
    dev.mkdir(parents=True)
    for name, value in (("class", "0x030200"), ("vendor", "0x10de"), ("device", "0x2335"), ("numa_node", "-1")):
        (dev / name).write_text(value + "\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:06.0", root / "sys/bus/pci/devices/0000:00:06.0")
    return root


def _capture(tmp_path: Path, module: str, timeout_s: float = 30.0) -> dict:
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / "pynvml.py").write_text(textwrap.dedent(module))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), str(ROOT)]),
               NVML_PID_FILE=str(tmp_path / "nvml.pid"))
    # the subprocess timeout is a guard against a hung test, not a measurement
    p = subprocess.run([sys.executable, "-c", CAPTURE, str(_tree(tmp_path)), str(timeout_s)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for init to reap it counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_hanging_nvmlinit_is_stopped_at_the_deadline_and_named(tmp_path):
    snap = _capture(tmp_path, HANGS, timeout_s=1.0)
    gpus = snap["gpus"]
    assert gpus["nvml_error_kind"] == "Timeout" and gpus["status"]["state"] == "unknown"
    assert "NVML did not answer within 1.0 s" in gpus["nvml_error"]
    assert snap["probes"]["timed_out"] == [gpus["nvml_error"]]
    nvml = next(t for t in snap["probes"]["timings"] if t["name"] == "NVML")
    assert nvml["timed_out"] is True
    # the GPU on the PCI bus is still listed, so the topology can place it
    assert [g["pci_bus_id"] for g in gpus["gpus"]] == ["0000:00:06.0"]
    # the child that hung was killed, not left behind
    pid = int((tmp_path / "nvml.pid").read_text())
    for _ in range(200):
        if _gone(pid):
            break
        subprocess.run(["sleep", "0.05"])
    assert _gone(pid), f"the hung NVML child {pid} is still running"


def test_nvmls_own_error_text_and_kind_come_back_from_the_child(tmp_path):
    gpus = _capture(tmp_path, MISMATCH)["gpus"]
    assert gpus["nvml_error_kind"] == "LibRmVersionMismatch"
    assert gpus["nvml_error"] == "RM has detected an NVML/RM version mismatch."
    assert "versions differ" in gpus["status"]["reason"]


def test_a_crashing_nvml_is_an_answer_too(tmp_path):
    gpus = _capture(tmp_path, CRASHES)["gpus"]
    assert gpus["nvml_error_kind"] == "Crashed" and "killed by signal 9" in gpus["nvml_error"]


def test_answers_health_and_lost_gpus_cross_the_process_boundary(tmp_path):
    snap = _capture(tmp_path, ONE_GPU)
    gpus = snap["gpus"]
    assert gpus["status"]["state"] == "ok" and snap["versions"]["driver"] == "570.86.15"
    (gpu,) = gpus["gpus"]
    assert (gpu["name"], gpu["retired_pages_pending"], gpu["remapped_rows_pending"], gpu["remapped_rows_failure"]) \
        == ("NVIDIA H200", True, True, False)
    assert gpus["failed"] == [{"index": 1, "error": "GPU is lost", "kind": "GpuIsLost"}]
    assert snap["probes"]["timed_out"] == []


def test_no_nvidia_device_no_pynvml(tmp_path):
    """On a node without /dev/nvidia* or /proc/driver/nvidia the live capture never imports pynvml."""
    code = ("import sys; from ncdoc.probes.live import capture; from ncdoc.snapshot import Host, Status\n"
            "import ncdoc.probes.live as live\n"
            "host = Host(status=Status.ok(), dev_nvidia=(), proc_driver_nvidia=False)\n"
            "assert not live.nvidia_present(host)\n"
            "s = capture(use_verbs=False)\n"
            "print('pynvml' in sys.modules, s.host.dev_nvidia, s.gpus.status.reason)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-1500:]
    imported, dev, reason = p.stdout.strip().split(" ", 2)
    assert imported == "False"
    if dev == "()":                 # this machine has no NVIDIA device: NVML was not even asked
        assert "NVML not queried" in reason
