"""Reproducers the fuzz campaign found (benchmarks/fuzz.py), each cut down to the few bytes that matter.

Before the fix each raised something other than ncdoc's one-line error (ValueError past int()'s 4,300 digits,
OverflowError from an infinite float, RecursionError, MemoryError), ran for seconds to hours on a few
kilobytes, or wrote outside its folder. Inputs that used to hang run in the fuzz worker, whose generous limit
turns a regression into a failure instead of a stuck suite.
"""

from __future__ import annotations

import json
import os

import pytest

from ncdoc.errors import InputError, NcdocError, UsageError

BIG = "9" * 5000                           # past int()'s 4,300-digit limit


def _file(tmp_path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(p)


def _refused(call, *args, says: str | None = None):
    with pytest.raises(NcdocError) as exc:
        call(*args)
    msg = str(exc.value)
    assert len(msg) < 1300 and "Traceback" not in msg, msg[:300]
    if says:
        assert says in msg, msg
    return msg


# ------------------------------------------------------------------------------------------- YAML

@pytest.mark.parametrize("text,says", [
    ("pack: x\nrules: []\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "? [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n: v\n", "aliases"),        # the 1.5 GB key of a 323-byte pack
    ("? [a, b]\n: c\n", "plain value"),                                      # a LineDict as a mapping key
    ("a: " + BIG + "\n", "longer than"),                                     # int() past 4,300 digits
    ("a: 1.0e+999\n", "finite"), ("a: .inf\n", "finite"), ("a: .nan\n", "finite"),   # YAML 1.1 floats have a dot
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nest"),        # RecursionError in the composer (libyaml stops at 1000)
    ("- " * 3000 + "x\n", "nest"),
])
def test_yaml_packs_refuse_bombs_big_numbers_and_deep_nesting(tmp_path, text, says):
    from ncdoc.engine.policy import load_policy
    from ncdoc.engine.packs import parse_pack
    from ncdoc.tuner.space_file import load_space
    _refused(parse_pack, text, "pack.yaml", says=says)
    _refused(load_policy, _file(tmp_path, "site.yaml", text), says=says)
    _refused(load_space, _file(tmp_path, "space.yaml", text), says=says)


def test_yaml_number_and_depth_limits_leave_real_files_alone():
    from ncdoc.readers.yaml_lines import MAX_DEPTH, load_plain, load_yaml
    nested = "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    assert load_plain(nested, "x") is not None
    assert load_yaml("a: 18446744073709551615\nb: 1.5e+300\nc: 0x1f\n", "x") == {"a": 2 ** 64 - 1, "b": 1.5e300,
                                                                               "c": 31}


def test_toml_config_refuses_deep_nesting_and_huge_integers(tmp_path):
    from ncdoc.engine.policy import load_config
    _refused(load_config, _file(tmp_path, "ncdoc.toml", "a = " + "[" * 2000 + "]" * 2000 + "\n"), says="TOML")
    _refused(load_config, _file(tmp_path, "ncdoc.toml", "expect-gpus = " + BIG + "\n"), says="TOML")


# ------------------------------------------------------------------------------------------- JSON

@pytest.mark.parametrize("doc", ["[" * 50_000 + "]" * 50_000, '{"schema_version": 1, "host": ' + BIG + "}",
                                 '{"schema_version": 1, "a": 1e999}', '{"schema_version": 1, "a": NaN}'])
def test_snapshot_and_cluster_loaders_refuse_what_json_loads_would_crash_on(tmp_path, doc):
    from ncdoc.cluster.facts import load_inputs
    from ncdoc.snapshot import Snapshot
    path = _file(tmp_path, "s.json", doc)
    _refused(Snapshot.load, path, says="JSON")
    _refused(load_inputs, [path])


def test_a_typed_number_out_of_range_is_a_malformed_snapshot(tmp_path):
    from ncdoc.examples.machines import load_example
    from ncdoc.snapshot import Snapshot
    data = load_example("dgx-h100").to_dict()
    data["hcas"]["hcas"][0]["ports"][0]["rate_gbps"] = 10 ** 400       # float(): OverflowError before
    data["hcas"]["hcas"][0]["ports"][0]["lid"] = 10 ** 30               # a 64-bit field
    _refused(Snapshot.load, _file(tmp_path, "s.json", json.dumps(data)), says="malformed snapshot")


# ----------------------------------------------------------------------------------------- evidence

def test_text_parsers_skip_numbers_no_counter_holds():
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    from ncdoc.evidence.nccl_log import parse_nccl_log
    rows = ["# nThread 1 nGpus " + BIG + " minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 1 "
            "agg iters: 1 validation: 1 graph: 0",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong",
            f"  {BIG}  2  float  sum  -1  1.0  1.0  1.0  0  1.0  1.0  1.0  0",
            "  8  2  float  sum  -1  " + "9" * 400 + "  1.0  1.0  0  1.0  1.0  1.0  " + "9" * 400,   # inf cells
            "# Avg bus bandwidth    : " + "9" * 400]
    facts = parse_nccl_tests(rows)
    assert all(r.size < 2 ** 64 for r in facts.rows)
    parse_nccl_log([f"n:1:1 [0] NCCL INFO comm 0x1 rank {BIG} nranks {BIG} cudaDev 0 busId 1 - Init COMPLETE",
                    f"n:1:1 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to {BIG}"])


def test_node_evidence_numbers_past_64_bits_are_no_numbers():
    from ncdoc.importers import nodes
    xml = (f'<system version="1"><cpu numaid="{BIG}" arch="x86_64"><pci busid="0000:18:00.0" class="0x{"f" * 300}" '
           f'link_width="{BIG}"><gpu dev="{BIG}" sm="90"/></pci></cpu></system>')
    nodes.nccl_topo_xml(xml, "topo.xml")
    ibv = f"hca_id:\tmlx5_0\n\tport:\t{BIG}\n\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\tactive_mtu:\t\t{BIG} (5)\n"
    nodes.rdma_listing(ibv, "ibv.txt")


def test_unicode_digits_are_not_digits(tmp_path):
    from ncdoc.cluster.nodes import expand, read_hostfile
    _refused(read_hostfile, _file(tmp_path, "hosts", "node01:\u00b2\n"), says="not a number")
    _refused(expand, "node[\u00b2-3]")
    from ncdoc.nccl.parse import strtoll, version_tuple
    assert strtoll("\u0663").kind == "nodigits" and version_tuple("2." + BIG) == (2, 10 ** 20)
    assert strtoll(BIG).kind == "overflow" and strtoll("0x" + "f" * 5000).kind == "overflow"
    from ncdoc.nccl.parse import version_cmp        # a snapshot's NCCL version "18446744073709551616"
    assert version_cmp("18446744073709551616", (2, 18, 5)) == 1 and version_cmp(BIG, "2.21") == 1


def test_a_hostlist_that_expands_past_any_cluster_is_refused():
    from ncdoc.cluster.nodes import expand
    _refused(expand, "n[1-99999][1-99999]", says="more than")       # a MemoryError before
    # nested brackets: each expansion copied a 7 KB name 100,000 times (1.2 GB, 15 s)
    _refused(expand, "16" + "[1," * 2000 + "2" + "]" * 2000, says="inside")


def test_ras_summary_and_log_prefix_numbers_past_64_bits():
    from ncdoc.evidence.nccl_log import parse_nccl_log
    from ncdoc.evidence.ras_report import parse_ras_text
    parse_ras_text(["Job summary", "===========", "", "  Nodes  Processes  GPUs",
                    "  (total)  per node  (total)", f"  {BIG}  8  8", f"  1 {BIG} 8 8 8"])
    parse_nccl_log([f"h:1:1 [{BIG}] NCCL INFO NCCL version 2.21.5+cuda12.4",
                    # PyTorch's watchdog lines, signed counts (-?\d+) included
                    f"[rank0]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL("
                    f"SeqNum=1, OpType=ALLREDUCE, NumelIn=-{BIG}, NumelOut={BIG}, Timeout(ms)=600000)",
                    f"[rank0]: detected by watchdog at work: 7, last enqueued NCCL work: -{BIG}, last completed "
                    f"NCCL work: {BIG}."])


def test_a_fault_spec_node_count_is_bounded(tmp_path):
    from ncdoc.cluster.fabric_sim import FabricSpec
    _refused(FabricSpec.load, _file(tmp_path, "f.yaml", "nodes: 1000000000000\n"), says="node count")
    _refused(FabricSpec.load, _file(tmp_path, "f.yaml", "faults: {n1: {net: x}}\n"), says="finite number")
    _refused(FabricSpec.load, _file(tmp_path, "f.json", '{"nodes": 2, "noise": 1e999}'), says="out of range")


# ------------------------------------------------------------------------------------- machine specs

@pytest.mark.parametrize("spec,says", [
    ("files:\n  ../../../../../../../../OUTSIDE: x\n", "leaves"),
    ("files:\n  /../../OUTSIDE: x\n", "leaves"),
    ("links:\n  etc/out: /tmp\nfiles:\n  etc/out/OUTSIDE: x\n", "must be relative"),
    ("links:\n  etc/out: ../../../..\n", "leaves"),
    # '..' after a link climbs from where the link points: only resolving it shows that it leaves the root
    ("links:\n  a/b/c/deep: ..\n  a/b/c/deep/x/up: ../../../../..\n", "outside"),
    ("links:\n  etc/l: x\nfiles:\n  etc/l: y\n", None),              # a file written over a link of its own name
    ("net:\n  ../../../OUTSIDE: {kind: ether}\n", None),
    ("base: " + "x" * 5000 + "\n", "bundled example"),
    ("devices: x\n", "must be a mapping"),                           # AttributeError: 'str' has no .items()
    # a device path of thousands of bridges: os.makedirs recursed once per folder (RecursionError)
    ("devices:\n  '0000:18:00.0': {path: pci0000:00" + "/00:01.0" * 3000 + ", part: h100-sxm}\n", "deeper"),
])
def test_a_machine_spec_never_writes_outside_its_root(tmp_path, spec, says):
    from ncdoc.examples.machines import build_machine
    dest = tmp_path / "in" / "dest"
    path = _file(tmp_path, "spec.yaml", "base: dgx-h100\n" + spec if not spec.startswith("base") else spec)
    try:
        build_machine(path, dest)
    except (InputError, UsageError) as exc:
        assert says is None or says in str(exc), str(exc)
    else:
        assert says is None, "not refused"
    stray = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
             if not (os.path.join(d, f).startswith(str(dest) + os.sep) or f == "spec.yaml")]
    assert not stray, stray


# ---------------------------------------------------------------------------------- former hangs

# (reader, file name, text, input index: 0 runs the node-evidence readers' `ncdoc topo` too); each took 5 s to
# over 40 s of CPU before (measured against the code before the fix), well under one second after
HANGS = [
    # 100 K blank lines: `^\s*hca_id` and `^\s+CA type` re-scanned the blank run from every line start
    ("rdma_listing", "ibv.txt", "hca_id:\tmlx5_0\n" + "\n" * 100_000 + "\tport:\t1\n", 1),
    ("detect", "input.txt", "x\n" + "\n" * 100_000 + "CA 'mlx5_0'\n", 1),
    ("triage", "input.txt", "NCCL INFO x\n" + "\n" * 100_000, 1),
    # shlex copies a token per character: an 800 KB value took 11 s in `check --env-file`
    ("env_file", "nccl.env", "NCCL_A=1\nexport NCCL_B='" + "a" * 400_000 + "'\n", 1),
    # the mapping regex's lazy run before \s*: 20 KB of spaces took 9 s
    ("launch_env", "launch.sh", "NCCL_A: x" + " " * 40_000 + "y\n", 1),
    # the nccl-tests check-failure regex's optional "host: " group, retried from every character of a token
    ("nccl_tests", "out.txt", "x" * 40_000 + " failure common.cu:1 'x'\n", 1),
    # a lazy GPU name before "with CUDA capability", retried from every character; "(.+?)\s*$" over blanks
    ("host_output", "host.txt", "max locked memory (kbytes, -l) 64\n" + "a" * 40_000 + "\n", 1),
    ("host_output", "host.txt", "Failed to initialize NVML: x" + " " * 40_000 + "y\n", 1),
    # every header token taken as a device: a 16 KB header drew a 2,000 x 2,000 matrix (`ncdoc topo`)
    ("topo_matrix", "topo.txt", "\tGPU0\t" + "\t".join(f"X{i}" for i in range(2000)) + "\tCPU Affinity\n"
     "GPU0\t X\t" + "\t".join("SYS" for _ in range(2000)) + "\t0-1\n", 0),
]


@pytest.mark.parametrize("reader,name,text,index", HANGS, ids=[f"{h[0]}-{i}" for i, h in enumerate(HANGS)])
def test_former_hangs_finish(worker, tmp_path, reader, name, text, index):
    path = _file(tmp_path, name, text)
    status, detail, _, _ = worker.run(reader, path, str(tmp_path), index, 120.0)
    assert status == "ok", f"{reader}: {status}: {detail}"


def test_a_launch_file_of_a_million_assignments_is_read_up_to_the_bound():
    # the campaign's launch file: one export line repeated 292 K times (13 MB) took 11 s of CPU, a record pair
    # a line; no script a person writes sets NCCL variables ten thousand times, so reading stops there and
    # the result says at which line
    from ncdoc.evidence.launch_env import parse_launch_env
    from ncdoc.evidence.launch_env_collector import MAX_ENTRIES
    text = "export NCCL_IB_HCA=mlx5\n" + "export NCCL_DEBUG_SUBSYS=ALL\n" * (MAX_ENTRIES + 5000) + "torchrun train.py\n"
    env = parse_launch_env(text, "launch.sh")
    assert len(env.entries) == MAX_ENTRIES and env.cut_at_line == MAX_ENTRIES + 1
    assert env.get("NCCL_IB_HCA") == "mlx5" and env.to_facts()["env_cut_at_line"] == MAX_ENTRIES + 1
    whole = parse_launch_env("export NCCL_IB_HCA=mlx5\nexport NCCL_IB_HCA=mlx5_1\n", "launch.sh")
    assert whole.cut_at_line is None and "env_cut_at_line" not in whole.to_facts()
    assert whole.get("NCCL_IB_HCA") == "mlx5_1" and len(whole.shadowed) == 1
