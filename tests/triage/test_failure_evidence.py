"""Triage on the shapes of real bug reports (third round): probe WARNs are no failure, old-style connect
retries and bootstrap traces are, host bridges with routable addresses are not "virtual", the GDR reason
quotes only what the log says, bare pasted message bodies read as NCCL logs, an unknown file among several
is skipped, and an excerpt of a device listing is no proof a device is missing.

Every log here is written for the test (invented hosts and addresses) in NCCL's own line formats.
"""

from __future__ import annotations

import json

from ncdoc.cli.main import main
from ncdoc.evidence.interfaces import classify
from ncdoc.evidence.nccl_log_errors import classify_error
from triage_helpers import named, triage

_VETH_LL = "fe80::3c:4dff:fe5e:6f70%veth7a6b5c4"


def _run(tmp_path, capsys, files: dict[str, str], *argv: str) -> tuple[int, dict | None, str]:
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    rc = main(["triage", *paths, "--json", *argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


# ---------------------------------------------------------------- 1. probe WARNs are not failures

def test_libibverbs_probe_warn_does_not_back_no_rdma_verdict(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "\n".join([
        "wk-3:810:810 [0] NCCL INFO Bootstrap : Using [0]eth0:10.61.2.3<0>",
        "wk-3:810:810 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        "wk-3:810:810 [0] NCCL INFO NET/Socket : Using [0]eth0:10.61.2.3<0>",
        "wk-3:810:810 [0] NCCL INFO Using network Socket",
        "wk-3:810:840 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0",
    ]) + "\n")
    assert doc["verdict"]["code"] == "NC4001"
    assert doc["verdict"]["observed_failure"] is False       # a missing library is a state, not a failure


def test_link_local_veth_with_connect_retries_is_the_verdict(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, "\n".join([
        f"wk-4:900:900 [0] NCCL INFO Bootstrap : Using [0]eth0:10.61.2.4<0> [1]veth7a6b5c4:{_VETH_LL}<0>",
        "wk-4:900:900 [0] NCCL INFO NET/IB : No device found.",
        f"wk-4:900:900 [0] NCCL INFO NET/Socket : Using [0]eth0:10.61.2.4<0> [1]veth7a6b5c4:{_VETH_LL}<0>",
        "wk-4:900:900 [0] NCCL INFO Using network Socket",
        "NCCL version 2.8.4+cuda11.2",
        "wk-4:900:930 [0] NCCL INFO Channel 00 : 0[3b000] -> 1[3b000] [send] via NET/Socket/1",
        "wk-4:900:930 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
        "wk-4:900:930 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
    ]) + "\n")
    v = doc["verdict"]
    assert v["code"] == "NC4503" and v["observed_failure"] and v["severity"] == "error"
    assert any("Call to connect returned Connection timed out" in e["text"] for e in v["evidence"])
    assert "NCCL_SOCKET_IFNAME" in v["fix"]


# ---------------------------------------------------------------- 2. old connect retries

def test_old_connect_retry_lines_are_socket_connect_errors():
    for text, name in (("Call to connect returned Connection timed out, retrying", "ETIMEDOUT"),
                       ("Call to connect returned Connection refused, retrying", "ECONNREFUSED"),
                       ("Call to connect returned : Connection refused", "ECONNREFUSED")):
        c = classify_error(text)
        assert c is not None and c.kind == "socket_connect_error" and c.code_name == name, text
        assert "retrying" not in dict(c.details)["error"]


def test_repeated_refused_retries_report_bootstrap_unreachable(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "\n".join([
        "nd-1:77:77 [0] NCCL INFO Bootstrap : Using [0]eth0:10.61.9.1<0>",
        "nd-1:77:99 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        "nd-1:77:99 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        "nd-1:77:99 [0] NCCL INFO Call to connect returned Connection refused, retrying",
    ]) + "\n")
    hit = named(doc, "bootstrap-unreachable")
    assert hit and "ECONNREFUSED" in hit[0]["message"] and hit[0]["observed_failure"]


# ---------------------------------------------------------------- 3. bootstrap trace without a WARN

def test_bootstrap_trace_without_warn_is_an_observed_bootstrap_failure(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "\n".join([
        "gp-7:4100:4100 [0] NCCL INFO Bootstrap : Using ibp12s0:172.29.4.7<0>",
        "gp-7:4100:4100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ibp12s0:172.29.4.7<0>",
        "gp-7:4100:4100 [0] NCCL INFO Using network IB",
        "NCCL version 2.18.3+cuda12.2",
        "gp-7:4100:4130 [0] NCCL INFO misc/socket.cc:567 -> 2",
        "gp-7:4100:4130 [0] NCCL INFO bootstrap.cc:270 -> 2",
    ]) + "\n")
    v = doc["verdict"]
    assert v["name"] == "bootstrap-unreachable" and v["observed_failure"]
    assert "ibp12s0" in v["message"] and "IPoIB" in v["message"]
    assert any("bootstrap.cc:270 -> 2" in e["text"] for e in v["evidence"])
    assert "NCCL_SOCKET_IFNAME" in v["fix"]


def test_trace_outside_bootstrap_is_not_a_bootstrap_failure(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "gp-7:4100:4130 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
                                      "gp-7:4100:4130 [0] NCCL INFO transport/net.cc:1301 -> 6\n")
    assert not named(doc, "bootstrap-unreachable")


# ---------------------------------------------------------------- 4. host bridges and container uplinks

def test_routable_host_bridge_and_uplink_veth_are_ok_local_bridges_are_not():
    assert classify("br0", "10.52.0.16")[0] == "ok"
    assert classify("veth0", "2001:db8:40::7")[0] == "ok"
    assert classify("docker0", "172.17.0.1")[0] == "virtual"
    assert classify("br-0a1b2c3d4e5f", "172.20.0.1")[0] == "virtual"
    assert classify("virbr0", "192.168.122.1")[0] == "virtual"
    assert classify("br0", "172.17.0.9")[0] == "virtual"          # Docker's default subnet
    assert classify("veth3", "fe80::1%veth3")[0] == "link_local"


def test_host_bridge_used_as_ib_oob_is_not_flagged(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "\n".join([
        " [0] NCCL INFO Bootstrap : Using [0]br0:10.52.0.16<0>",
        " [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB br0:10.52.0.16<0>",
        " [0] NCCL INFO NCCL version 2.5.6+cuda10.1",
        " [0] NCCL INFO Ring 00 : 7[41000] -> 0[1b000] [receive] via NET/IB/0",
    ]) + "\n")
    assert not named(doc, "socket-ifname-virtual")
    # 5. the GDR reason quotes what the log shows: channel lines, not per-HCA lines it does not have
    gdr = named(doc, "gdr-disabled")
    assert gdr and "per-HCA" not in gdr[0]["message"] and "without /GDRDMA" in gdr[0]["message"]


# ---------------------------------------------------------------- 6. bare pastes, unknown files

def test_bare_info_gdr_line_reads_as_nccl_log(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'\n")
    assert doc["inputs"][0]["kind"] == "nccl_log" and doc["facts"]["gdr"] == "disabled"
    assert named(doc, "gdr-disabled")


def test_bare_channel_lines_read_as_partial_gdr(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "5[3d000] -> 12[b1000] [send] via NET/IB/2/GDRDMA\n"
                                      "5[3d000] -> 12[b1000] [receive] via NET/IB/3\n")
    assert doc["inputs"][0]["read_as"] == ["nccl_log"]
    assert doc["facts"]["gdr"] == "partial" and doc["facts"]["transport"] == "IB"
    assert all("INFO" not in f["message"] for f in doc["findings"])     # no rank named after the level


def test_unknown_file_among_several_is_skipped_with_a_note(tmp_path, capsys):
    rc, doc, _ = _run(tmp_path, capsys, {
        "job.log": "nd-2:51:51 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.61.9.2<0>\n",
        "modules.txt": "nd-2$ lsmod | grep peer\nnvidia_peermem 16384 0\n"})
    assert rc in (0, 1) and doc is not None
    skipped = [i for i in doc["inputs"] if i["path"].endswith("modules.txt")][0]
    assert skipped["kind"] == "unknown" and skipped["read_as"] == [] and skipped["notes"]


def test_only_unknown_files_still_exit_2(tmp_path, capsys):
    rc, doc, err = _run(tmp_path, capsys, {"a.txt": "hello\n", "b.txt": "world\n"})
    assert rc == 2 and doc is None and "not a file ncdoc knows" in err


# ---------------------------------------------------------------- 7. partial device listings

_SHOW_GIDS = """DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
---     ----    -----   ---                                     ------------    ---     ---
mlx5_4  1       4       0000:0000:0000:0000:0000:ffff:0a3d:0205 10.61.2.5       v2      net1
"""


def test_hca_missing_from_show_gids_excerpt_is_a_warning(tmp_path, capsys):
    rc, doc, _ = _run(tmp_path, capsys, {"gids.txt": _SHOW_GIDS, "job.env": "NCCL_IB_HCA=mlx5_0\n"})
    hits = named(doc, "ib-hca-unknown-device")
    assert hits and all(h["severity"] == "warning" for h in hits)
    assert any("listing given" in h["message"] for h in hits)


def test_hca_missing_from_full_ibv_devinfo_stays_an_error(tmp_path, capsys):
    devinfo = ("hca_id:\tmlx5_4\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t20.31.1014\n"
               "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tlink_layer:\t\tInfiniBand\n")
    rc, doc, _ = _run(tmp_path, capsys, {"devinfo.txt": devinfo, "job.env": "NCCL_IB_HCA=mlx5_0\n"})
    hits = named(doc, "ib-hca-unknown-device")
    assert hits and any(h["severity"] == "error" for h in hits)


# ---------------------------------------------------------------- small: removed var, version unknown

def test_removed_var_without_version_says_version_unknown(tmp_path, capsys):
    rc, doc, _ = _run(tmp_path, capsys, {"job.env": "NCCL_AGG_CHANNEL_SIZE=2097152\n"})
    hit = named(doc, "removed-var")
    assert hit and "your NCCL version is unknown" in hit[0]["message"]
    assert "(version unknown) ignores" not in hit[0]["message"]


# ---------------------------------------------------------------- 8. a pod's sparse GID table

def test_show_gids_of_a_pod_whose_table_starts_at_index_4(tmp_path, capsys):
    rows = [("4", "fe80:0000:0000:0000:a4ed:ccff:fe8b:2211", "", "v1"),
            ("5", "fe80:0000:0000:0000:a4ed:ccff:fe8b:2211", "", "v2"),
            ("6", "0000:0000:0000:0000:0000:ffff:0a98:0021", "10.152.0.33", "v1"),
            ("7", "0000:0000:0000:0000:0000:ffff:0a98:0021", "10.152.0.33", "v2")]
    text = ("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"
            + "".join(f"mlx5_0\t1\t{i}\t{gid}\t{ip}  \t{ver}\tnet1\n" for i, gid, ip, ver in rows))
    rc, doc, _ = _run(tmp_path, capsys, {"show_gids.txt": text})
    assert doc["verdict"]["name"] == "roce-gid-table-sparse"
    assert "starts at index 4" in doc["verdict"]["message"] and "NCCL_IB_GID_INDEX=7" in doc["verdict"]["fix"]
    rc, doc, _ = _run(tmp_path, capsys, {"show_gids.txt": text}, "--env", "NCCL_IB_GID_INDEX=7")
    assert not [f for f in doc["findings"] if f["name"] == "roce-gid-table-sparse"]


# ---------------------------------------------------------------- older shapes and containers

def test_old_nccl_tests_failure_line_without_host_or_test(tmp_path, capsys):
    text = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
            "#\n# Using devices\n#   Rank  0 on 4f1c2a7b9d0e device  0 [0x03] Tesla V100-SXM2-16GB\n"
            "NCCL failure common.cu:874 'unhandled system error'\n")
    rc, doc, _ = _run(tmp_path, capsys, {"run.txt": text})
    assert rc == 1 and doc["verdict"]["name"] == "nccl-tests-failed"
    assert "'unhandled system error'" in doc["verdict"]["message"] and " on None" not in doc["verdict"]["message"]


def test_socket_creation_refused_in_a_container_names_the_namespace(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, (
        "4f1c2a7b9d0e:3171:3171 [0] NCCL INFO NET/Socket : Using [0]eth0:172.18.0.3<0>\n"
        "4f1c2a7b9d0e:3171:3171 [0] include/socket.h:311 NCCL WARN Socket creation failed : "
        "Address family not supported by protocol\n"))
    assert doc["verdict"]["name"] == "bootstrap-unreachable"
    assert "network namespace" in doc["verdict"]["message"]


def test_a_gdr_pair_line_cut_before_its_distance_is_not_a_per_nic_verdict(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, (
        "dgx7:90:90 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB\n"
        "dgx7:90:90 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 18000 / HCA 0 (distance 5 > 4)\n"
        "dgx7:90:90 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 5e000 / HCA 0 (distance 4 <= 4), read 0\n"
        "dgx7:90:90 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 3b000 / HCA 0\n"))
    gdr = [f for f in doc["findings"] if f["name"] in ("gdr-partial", "gdr-disabled")]
    assert gdr and "distance 5 > " in gdr[0]["message"]
    assert "not a distance problem" not in gdr[0]["message"] and "peer-memory" not in gdr[0]["message"]


def test_docker_default_bridge_address_inside_a_container(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, (
        "c1:10:10 [0] NCCL INFO Bootstrap : Using [0]eth0:172.17.0.3<0>\n"
        "c1:10:10 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.3<0>\n"
        "c1:10:10 [0] NCCL INFO Using network Socket\n"
        "c1:10:10 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"))
    hit = named(doc, "socket-ifname-virtual")[0]
    assert "private to its host" in hit["message"] and "physical interface local" not in hit["message"]
    assert "--network host" in hit["fix"]


def test_nccl_2_3_lines_without_the_word_nccl_are_read(tmp_path, capsys):
    # NCCL 2.3 and older: "host:pid:tid [dev] INFO ..." and "host:pid:tid [dev] file:line WARN ..."
    doc, path = triage(tmp_path, capsys, (
        "4f1c2a7b9d0e:3171:3171 [0] INFO NET : Using interface eth0:172.18.0.3<0>\n"
        "4f1c2a7b9d0e:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : "
        "Address family not supported by protocol\n"
        "4f1c2a7b9d0e:3171:3171 [0] INFO init.cc:185 -> 2\n"))
    assert doc["inputs"][0]["kind"] == "nccl_log"
    assert doc["verdict"]["name"] == "bootstrap-unreachable"
    # quoted as the file has it, without the "NCCL " the reader inserted
    assert doc["verdict"]["evidence"][0]["text"].startswith("4f1c2a7b9d0e:3171:3171 [0] include/socket.h:311 WARN")
