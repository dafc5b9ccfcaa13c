"""Environment from launch material: shell, sbatch, mpirun/srun/docker lines, YAML/JSON, Kubernetes."""

from __future__ import annotations

import json

import pytest

from ncdoc.errors import InputError
from ncdoc.evidence.launch_env import parse_launch_env, parse_launch_env_file
from ncdoc.snapshot import EnvValue
from paths import SHARED

CORPUS = SHARED / "corpus"


def _expect() -> dict:
    path = CORPUS / "EXPECT.json"
    return json.loads(path.read_text()) if path.is_file() else {}


@pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")
@pytest.mark.parametrize("case", sorted(c for c, e in _expect().items() if e.get("kind") == "env"))
def test_corpus_expected_env(case):
    env = parse_launch_env_file(CORPUS / case / "artifact.txt").to_facts()["env"]
    for name, value in _expect()[case].get("facts", {}).get("env", {}).items():
        assert env.get(name) == value, f"{case}: {name} = {env.get(name)!r}"


@pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")
def test_corpus_env_lines_and_kinds():
    e = parse_launch_env_file(CORPUS / "nccl-1510-env-gid-index-4-rocev1" / "artifact.txt")
    first = e.entries[0]
    assert first.value == EnvValue("NCCL_IB_GID_INDEX", "4", str(CORPUS / "nccl-1510-env-gid-index-4-rocev1" /
                                                                  "artifact.txt"), 1)
    assert first.how == "export"
    assert e.get("NCCL_SOCKET_IFNAME") == "net1" and e.get("MASTER_ADDR") == "10.12.0.21"
    assert "FORCE_TORCHRUN" not in e.as_dict()                    # not a variable NCCL cares about
    e = parse_launch_env_file(CORPUS / "nccl-1537-env-roce-gdr-sys" / "artifact.txt")
    assert e.get("NCCL_NET_GDR_LEVEL") == "SYS" and e.get("NCCL_DEBUG_FILE") == "/tmp/debug/nccldebug-%h-%p"
    assert e.get("NCCL_SOCKET_IFNAME") == "bond,primaryip"


SCRIPT = r"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --export=ALL,NCCL_IB_HCA=mlx5_0,mlx5_1,NCCL_DEBUG=WARN
export NCCL_SOCKET_IFNAME="eth0"
export NCCL_IB_GID_INDEX='3' NCCL_NET_GDR_LEVEL=PHB   # RoCE v2
declare -x NCCL_IB_TIMEOUT="20"
NCCL_ALGO=Ring torchrun --nproc_per_node 8 train.py
mpirun -np 16 -x NCCL_SOCKET_IFNAME -x NCCL_IB_TIMEOUT=22 \
   -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 8G
srun --export=ALL,NCCL_IB_HCA=mlx5_2 python x.py; echo done
docker run -e NCCL_P2P_DISABLE=1 --env NCCL_SHM_DISABLE=1 --env=NCCL_NET=Socket -e HOME img
mpiexec -genv NCCL_CROSS_NIC 0 -n 4 ./app
unset NCCL_ALGO
setenv NCCL_BUFFSIZE 8388608
"""


def test_every_shell_and_launcher_form():
    e = parse_launch_env(SCRIPT, "job.sbatch")
    how = {(x.value.name, x.value.value): (x.how, x.value.line) for x in e.entries}
    assert how[("NCCL_IB_HCA", "mlx5_0,mlx5_1")] == ("sbatch --export", 3)
    assert how[("NCCL_IB_GID_INDEX", "3")] == ("export", 5) and how[("NCCL_NET_GDR_LEVEL", "PHB")] == ("export", 5)
    assert how[("NCCL_IB_TIMEOUT", "20")] == ("export", 6)
    assert how[("NCCL_ALGO", "Ring")] == ("command prefix", 7)
    assert how[("NCCL_IB_TIMEOUT", "22")] == ("mpirun -x", 8)
    assert how[("NCCL_DEBUG", "INFO")] == ("mpirun -x", 9)
    assert how[("NCCL_IB_HCA", "mlx5_2")] == ("srun --export", 10)
    assert how[("NCCL_P2P_DISABLE", "1")] == ("docker -e", 11) and how[("NCCL_NET", "Socket")] == ("docker -e", 11)
    assert how[("NCCL_CROSS_NIC", "0")] == ("mpirun -genv", 12)
    assert how[("NCCL_BUFFSIZE", "8388608")] == ("setenv", 14)
    env = e.as_dict()
    assert env["NCCL_IB_HCA"] == "mlx5_2" and env["NCCL_IB_TIMEOUT"] == "22" and env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_ALGO" not in env                                   # unset at line 13
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"                      # -x NAME passes the earlier value on
    assert [(x.how, x.value.line) for x in e.entries if x.value.name == "NCCL_SOCKET_IFNAME"] == [
        ("export", 4), ("mpirun -x", 8)]
    assert [(p.name, p.how) for p in e.inherited] == [("LD_LIBRARY_PATH", "mpirun -x")]
    shadowed = {(v.name, v.value) for v in e.shadowed}
    assert {("NCCL_IB_HCA", "mlx5_0,mlx5_1"), ("NCCL_DEBUG", "WARN"), ("NCCL_IB_TIMEOUT", "20"),
            ("NCCL_ALGO", "Ring")} <= shadowed
    facts = e.to_facts()
    assert facts["env"] == env and facts["env_inherited"][0]["name"] == "LD_LIBRARY_PATH"
    nccl_env = e.to_nccl_env()
    assert nccl_env.get("NCCL_IB_HCA") == "mlx5_2" and nccl_env.status.state == "ok"


def test_kubernetes_yaml_compose_and_json():
    yaml_text = """apiVersion: v1
kind: Pod
spec:
  containers:
    - name: trainer
      env:
        - name: NCCL_IB_HCA
          value: "mlx5_5"
        - name: NCCL_SOCKET_IFNAME
          value: net1
        - name: NCCL_TOPO_FILE
          valueFrom:
            configMapKeyRef: {name: topo, key: file}
"""
    e = parse_launch_env(yaml_text, "pod.yaml")
    assert e.as_dict() == {"NCCL_IB_HCA": "mlx5_5", "NCCL_SOCKET_IFNAME": "net1"}
    assert e.entries[0].how == "kubernetes env" and e.entries[0].value.line == 8
    assert [p.name for p in e.inherited] == ["NCCL_TOPO_FILE"]
    compose = "services:\n  t:\n    environment:\n      - NCCL_DEBUG=INFO\n      NCCL_IB_DISABLE: '1'\n"
    assert parse_launch_env(compose).as_dict() == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}
    flow = "env: {NCCL_ALGO: Ring, NCCL_PROTO: \"Simple\"}\n"
    assert parse_launch_env(flow).as_dict() == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    js = json.dumps({"env": {"NCCL_IB_QPS_PER_CONNECTION": 4, "OTHER": "x"},
                     "list": ["NCCL_NET_PLUGIN=aws-ofi", "HOME=/root"],
                     "k8s": [{"name": "FI_PROVIDER", "value": "efa"}]}, indent=1)
    e = parse_launch_env(js, "cfg.json")
    assert e.as_dict() == {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_NET_PLUGIN": "aws-ofi", "FI_PROVIDER": "efa"}
    assert all(x.value.line for x in e.entries)


def test_env_dump_and_quoting():
    dump = "HOME=/root\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=^docker,lo\nCUDA_VISIBLE_DEVICES=0,1,2,3\r\n"
    e = parse_launch_env(dump)
    assert e.as_dict() == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "^docker,lo",
                           "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    e = parse_launch_env("export NCCL_X='a b' NCCL_Y=\"c\\\"d\" NCCL_Z=e\\ f\n")
    assert e.as_dict() == {"NCCL_X": "a b", "NCCL_Y": 'c"d', "NCCL_Z": "e f"}
    e = parse_launch_env("export NCCL_BROKEN='unterminated\n")          # does not raise
    assert isinstance(e.as_dict(), dict)


def test_file_entry_point_errors(tmp_path):
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(InputError, match="empty"):
        parse_launch_env_file(tmp_path / "empty")
    (tmp_path / "bin").write_bytes(bytes(range(256)))
    with pytest.raises(InputError, match="binary"):
        parse_launch_env_file(tmp_path / "bin")


@pytest.mark.parametrize("line, expected", [
    # a NAME=V counts before the command word, after export/declare/env, and as a launcher option's value
    ("NCCL_IB_HCA=mlx5_0 torchrun x.py", {"NCCL_IB_HCA": "mlx5_0"}),
    ("env -u HOME NCCL_ALGO=Ring ./a", {"NCCL_ALGO": "Ring"}),
    ("for i in 1 2; do NCCL_DEBUG=INFO ./run; done", {"NCCL_DEBUG": "INFO"}),
    ("if NCCL_P2P_LEVEL=NVL ./check; then NCCL_ALGO=Tree ./run; fi", {"NCCL_P2P_LEVEL": "NVL", "NCCL_ALGO": "Tree"}),
    ("setup() { NCCL_IB_TIMEOUT=22 ./run; }", {"NCCL_IB_TIMEOUT": "22"}),
    ("(export NCCL_SOCKET_IFNAME=eth2; ./run)", {"NCCL_SOCKET_IFNAME": "eth2"}),
    ("srun --export=ALL,NCCL_IB_HCA=mlx5_0,mlx5_1 ./a", {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}),
    # ... and not as an argument of another command, in parentheses after one, or in prose
    ("echo NCCL_IB_HCA=mlx5_0", {}),
    ("Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.", {}),
    ("[rank3]: Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.", {}),
    ("./run --tag (NCCL_ALGO=Ring) NCCL_PROTO=LL", {}),
    ("python -c 'print(1)' NCCL_DEBUG=INFO", {}),
])
def test_only_shell_assignments_count(line, expected):
    assert parse_launch_env(line).as_dict() == expected


def test_advice_lines_in_a_run_text_set_nothing():
    from ncdoc.evidence.launch_env import parse_launch_env_in_run
    lines = ["NCCL_NVLS_ENABLE=1 torchrun --nproc-per-node 8 train.py",
             "[rank0]: Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'x'.",
             "[rank0]: Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future."]
    found = parse_launch_env_in_run(lines, "run.txt")
    assert [(e.value.name, e.value.value, e.value.line) for e in found.entries] == [("NCCL_NVLS_ENABLE", "1", 1)]


def test_a_pasted_piece_of_a_command_is_shell_quoted_as_the_command_was():
    # lines cut from the middle of a `docker run ... \` command: the last one still ends in its backslash
    piece = "  -e NCCL_SOCKET_IFNAME='eth0' \\\n  -e NCCL_IB_HCA=\"mlx5_0,mlx5_1\" \\\n  -e NCCL_IB_DISABLE='0' \\\n"
    got = parse_launch_env(piece)
    assert got.as_dict() == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_IB_DISABLE": "0"}
    assert [v.line for v in got.values if v.name == "NCCL_IB_HCA"] == [2]
