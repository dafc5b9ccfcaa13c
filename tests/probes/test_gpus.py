"""The NVML probe against recorded answers replayed through the real pynvml error classes."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from ncdoc.examples.nvml_replay import RecordedNvml
from ncdoc.probes.gpus import normalise_bus_id, probe_gpus
from ncdoc.probes.live import capture
from ncdoc.probes.sysfs import SysfsReader
from ncdoc.snapshot import PciDevice, PciSection, Status

H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "numa_node": None,
        "pci": {"busId": "00000000:1B:00.0", "domain": 0, "bus": 0x1B, "device": 0, "pciDeviceId": 0x233010DE},
        "cuda_compute_capability": [9, 0], "memory_total": 81559 * 1024 * 1024,
        "nvlinks": [{"state": 1, "remote_type": 2, "remote_pci": {"error": "NotSupported"}}] * 18,
        "fabric": {"state": 3, "status": 0, "clique_id": 7}}


def _answers(**extra):
    second = dict(H100, uuid="GPU-2", pci=dict(H100["pci"], busId="00000000:43:00.0", bus=0x43))
    return {"driver_version": "535.161.08", "cuda_driver_version": 12020, "devices": [H100, second],
            "p2p": {"0-1": {"0": 0, "1": 0}}, **extra}


PCI_WITH_GPU = PciSection(status=Status.ok(), devices=(
    PciDevice(address="0000:1b:00.0", parent="0000:17:03.0", class_code="0x030200", vendor="0x10de",
              device="0x2330", kind="gpu", numa_node=0),))


def test_replay_raises_the_real_pynvml_error_classes():
    nvml = RecordedNvml({"init_error": "LibraryNotFound"})
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        nvml.nvmlInit()
    nvml = RecordedNvml(_answers())
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = nvml.nvmlDeviceGetPciInfo(handle)
    assert isinstance(info, pynvml.nvmlPciInfo_t) and info.busId in ("00000000:1B:00.0", b"00000000:1B:00.0")
    assert (info.domain, info.bus, info.device) == (0, 0x1B, 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetNumaNodeId(handle)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):      # past the last link
        nvml.nvmlDeviceGetNvLinkState(handle, 18)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):     # not in the recording
        nvml.nvmlDeviceGetPowerUsage(handle)
    info = pynvml.c_nvmlGpuFabricInfo_t()
    nvml.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))
    assert (info.state, info.status, info.cliqueId) == (3, 0, 7)
    assert nvml.NVML_P2P_STATUS_OK == 0               # constants come from pynvml itself


def test_no_driver_makes_gpus_unknown_or_absent_with_the_reason(tmp_path):
    fs = SysfsReader(str(tmp_path))
    nvml = RecordedNvml({"init_error": "LibraryNotFound"})
    probe = probe_gpus(fs, nvml, PciSection(status=Status.ok(), devices=(
        PciDevice(address="0000:00:1f.0", parent="pci0000:00", class_code="0x060100", kind="other"),)))
    assert probe.section.status.state == "absent"
    assert "NVML library not found" in probe.section.status.reason
    assert probe.notes == ["no NVIDIA GPU found on the PCI bus (NVML library not found (no NVIDIA driver installed))"]
    # the PCI bus could not be read either: then nobody knows
    probe = probe_gpus(fs, nvml, PciSection(status=Status.unknown("no /sys/bus/pci")))
    assert probe.section.status.state == "unknown" and not probe.section.gpus


def test_gpus_on_the_bus_without_nvml_are_listed_but_unknown(tmp_path):
    probe = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml({"init_error": "DriverNotLoaded"}), PCI_WITH_GPU)
    assert probe.section.status.state == "unknown"
    assert "NVIDIA driver not loaded" in probe.section.status.reason
    (gpu,) = probe.section.gpus
    assert (gpu.pci_bus_id, gpu.numa_node, gpu.name) == ("0000:1b:00.0", 0, "NVIDIA GPU [10de:2330]")


def test_full_answers(tmp_path):
    (tmp_path / "sys/bus/pci/devices/0000:1b:00.0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices/0000:1b:00.0/numa_node").write_text("0\n")
    probe = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(_answers()), PCI_WITH_GPU)
    sec = probe.section
    assert sec.status.state == "ok" and probe.driver == "535.161.08" and probe.cuda_driver == "12.2"
    g0, g1 = sec.gpus
    assert (g0.pci_bus_id, g0.compute_capability, g0.memory_mib, g0.uuid) == ("0000:1b:00.0", "9.0", 81559, "GPU-1")
    assert g0.numa_node == 0 and g1.numa_node is None          # NVML says not supported: sysfs decides
    assert len(g0.nvlinks) == 18 and all(l.active and l.remote_type == "switch" and l.remote_pci is None
                                         for l in g0.nvlinks)
    assert [(p.a, p.b, p.status) for p in sec.p2p] == [(0, 1, "OK")]
    assert sec.fabric_manager == "completed" and "2 of 2" in sec.fabric_manager_detail


def test_partial_failures(tmp_path):
    ans = _answers(p2p={"0-1": {"0": 0, "1": 4}})
    ans["devices"][1] = dict(ans["devices"][1], nvlinks={"error": "NotSupported"},
                             fabric={"state": 1, "status": 0, "clique_id": 0})
    sec = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(ans), PCI_WITH_GPU).section
    assert sec.gpus[1].nvlinks == ()
    assert sec.p2p[0].status == "disabled_by_regkey"
    assert sec.fabric_manager == "not_started"
    ans = _answers()
    for dev in ans["devices"]:
        dev["fabric"] = {"error": "NotSupported"}
    assert probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(ans), PCI_WITH_GPU).section.fabric_manager == "not_supported"


def test_registration_failure_and_zero_gpus(tmp_path):
    ans = _answers()
    ans["devices"][0] = dict(ans["devices"][0], fabric={"state": 3, "status": 999, "clique_id": 0})
    assert probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(ans), PCI_WITH_GPU).section.fabric_manager == "failed"
    probe = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml({"devices": [], "driver_version": "550.1"}),
                       PCI_WITH_GPU)
    assert probe.section.status.state == "absent" and probe.driver == "550.1"


def test_a_bug_inside_the_probe_makes_only_that_section_unknown(tmp_path):
    class Broken(RecordedNvml):
        def nvmlDeviceGetCount(self):
            raise RuntimeError("boom")
    snap = capture(sysfs_root=str(tmp_path), nvml=Broken(_answers()), environ={}, home=None, use_verbs=False)
    assert snap.gpus.status.state == "unknown" and "RuntimeError: boom" in snap.gpus.status.reason
    assert snap.env.status.state == "ok" and snap.host.status.state == "ok"
    assert any("GPU probe failed" in n for n in snap.notes)


def test_normalise_bus_id():
    assert normalise_bus_id(b"00000000:1B:00.0") == "0000:1b:00.0"
    assert normalise_bus_id("00000001:00:00.0") == "0001:00:00.0"


def test_health_states_and_lost_gpus(tmp_path):
    lost = dict(H100, uuid="GPU-2", handle_error="GpuIsLost",
                pci=dict(H100["pci"], busId="00000000:43:00.0", bus=0x43))
    sick = dict(H100, retired_pages_pending=1, remapped_rows={"corrected": 0, "uncorrected": 3, "pending": True,
                                                              "failure": True})
    ans = {"driver_version": "570.86.15", "cuda_driver_version": 12080, "devices": [sick, lost], "p2p": {}}
    sec = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(ans), PCI_WITH_GPU).section
    assert sec.status.state == "ok" and len(sec.gpus) == 1
    g = sec.gpus[0]
    assert (g.retired_pages_pending, g.remapped_rows_pending, g.remapped_rows_failure) == (True, True, True)
    assert [(f.index, f.kind, f.error) for f in sec.failed] == [(1, "GpuIsLost", "GPU is lost")]
    # a GPU without HBM answers NotSupported: unknown, not healthy
    healthy = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml(_answers()), PCI_WITH_GPU).section.gpus[0]
    assert (healthy.retired_pages_pending, healthy.remapped_rows_pending, healthy.remapped_rows_failure) == \
        (None, None, None)


def test_nvml_errors_are_kept_with_their_text(tmp_path):
    sec = probe_gpus(SysfsReader(str(tmp_path)), RecordedNvml({"init_error": "LibRmVersionMismatch"}),
                     PCI_WITH_GPU).section
    assert sec.nvml_error_kind == "LibRmVersionMismatch" and "version mismatch" in sec.nvml_error
    assert sec.status.state == "unknown" and [g.pci_bus_id for g in sec.gpus] == ["0000:1b:00.0"]
