"""`ncdoc env generate`: only what NCCL cannot get right by itself, each line with its reason."""

import json
import subprocess

import pytest

from ncdoc.cli.main import main
from ncdoc.envfiles.generate import generate, render
from ncdoc.examples.machines import load_example

TUNABLES = {"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_NCHANNELS", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL"}


@pytest.fixture(scope="module")
def gen():
    return {name: generate(load_example(name)) for name in
            ("dgx-h100", "h100-roce", "dgx-h100-port-down", "azure-ndv5", "workstation-2gpu")}


def test_dgx_rails_in_gpu_order_without_storage_nics(gen):
    v = gen["dgx-h100"].values()
    assert v["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"
    assert v["NCCL_SOCKET_IFNAME"] == "=eno1"
    assert "NCCL_IB_GID_INDEX" not in v          # InfiniBand: NCCL ignores it
    assert not TUNABLES & set(v)                  # tunables stay at NCCL's defaults
    assert "storage or management" in gen["dgx-h100"].comments()["NCCL_IB_HCA"]


def test_roce_on_old_nccl_pins_the_ipv4_rocev2_gid_and_a_management_interface(gen):
    v = gen["h100-roce"].values()
    assert v["NCCL_IB_GID_INDEX"] == "3"
    assert v["NCCL_SOCKET_IFNAME"] == "=bond0"    # not a rail netdev, not docker0
    assert "2.21" in gen["h100-roce"].comments()["NCCL_IB_GID_INDEX"]


def test_roce_on_new_nccl_leaves_the_gid_to_auto_selection():
    assert "NCCL_IB_GID_INDEX" not in generate(load_example("h100-roce"), nccl_version="2.23.4").values()


def test_a_down_port_is_left_out_and_said_so(gen):
    g = gen["dgx-h100-port-down"]
    assert "mlx5_4" not in g.values()["NCCL_IB_HCA"]
    assert "mlx5_4: no ACTIVE port" in g.comments()["NCCL_IB_HCA"]


def test_vm_gets_topology_file_guidance(gen):
    assert any("NCCL_TOPO_FILE" in n for n in gen["azure-ndv5"].notes)


def test_no_rdma_means_no_hca_line_and_a_note(gen):
    g = gen["workstation-2gpu"]
    assert "NCCL_IB_HCA" not in g.values()
    assert any("TCP sockets" in n for n in g.notes)


def test_formats_and_cli(tmp_path, capsys):
    out = tmp_path / "nccl.env"
    assert main(["env", "generate", "--example", "h100-roce", "-o", str(out)]) == 0
    shown = subprocess.run(["bash", "-c", f"set -a; . '{out}'; env"], capture_output=True, text=True).stdout
    assert "NCCL_IB_GID_INDEX=3" in shown and "NCCL_SOCKET_IFNAME==bond0" in shown
    data = json.loads(render(generate(load_example("azure-ndv5")), "json"))
    assert data["env"]["NCCL_IB_HCA"].startswith("=mlx5_ib0:1") and data["notes"]
    conf = render(generate(load_example("dgx-h100")), "nccl.conf")
    assert "NCCL_IB_HCA==mlx5_0:1" in conf and "export" not in conf
