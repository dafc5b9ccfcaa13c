"""Layer (a) of the simulator against NCCL's own printed cost tables.

The formulas follow NCCL HEAD 2.30.7 (src/graph/tuning.cc, src/enqueue.cc) and, for older
releases, the constants and rules of that release's tuning.cc (ncdoc/tuner/sim/revisions.py).
Reference: /work/shared/reference/nccl_tuning_tables (real NCCL output; read from shared/,
skipped when absent). Tolerance: NCCL prints "%8.1f/%6.1f", so every cell must match to
0.05 (half a printed digit) plus 0.1 % for float rounding. The releases in the reference set
(2.18.1, 2.21.5, 2.23.4, 2.27.7, 2.29.2, 2.29.7) are checked cell by cell, all 90-105 cells.
"""

import json
import re
from dataclasses import replace

import pytest

from paths import SHARED
from ncdoc.tuner.sim import SimTrialError, model_tables, nccl_choice, preset
from ncdoc.tuner.sim.graphs import EMPTY, CommTopo, Graph
from ncdoc.tuner.sim.nccl_model import choose, tune_tables
from ncdoc.tuner.sim.params import parse_env, path_level, strtoll
from ncdoc.tuner.sim.revisions import (
    ALGOS, FUNCS, NVLS, NVLS_TREE, PAT, PROTOS, RING, TREE, parse_version, revision_for)

TABLES = SHARED / "reference" / "nccl_tuning_tables"
HEAD = revision_for((2, 30, 7))


def _cases():
    if not TABLES.is_dir():
        return []
    return sorted(p for p in TABLES.iterdir() if p.is_dir() and (p / "meta.json").is_file())


def _need_tables():
    if not TABLES.is_dir():
        pytest.skip("shared/reference/nccl_tuning_tables not present")


def parse_table(text: str) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(function, algorithm, protocol) -> (latency, bandwidth) from NCCL's TUNING table lines."""
    out, algos = {}, None
    for line in text.splitlines():
        if "NCCL INFO" not in line:
            continue
        body = line.split("NCCL INFO", 1)[1]
        if body.strip().startswith("Algorithm"):
            algos = [a.strip() for a in body.split("|")[1:] if a.strip()]
            continue
        m = re.match(r"\s*(Broadcast|Reduce|AllGather|ReduceScatter|AllReduce) \|(.*)$", body)
        if m and algos:
            for i, cell in enumerate(c for c in m.group(2).split("|") if c.strip()):
                lat, bw = (float(x) for x in cell.split("/"))
                out[(m.group(1), algos[i // 3], PROTOS[i % 3])] = (lat, bw)
    return out


def _sm(gpu: str) -> int:
    # The only unknown model (pcie 2.21.5) is SYS-only PCIe: no cell there depends on the arch.
    return 70 if "V100" in gpu else 90 if "H100" in gpu else 80


def _topo_from_meta(meta: dict, text: str) -> CommTopo:
    by_pattern = {g["pattern"]: g for g in meta["graphs"]}

    def graph(*patterns):
        g = next((by_pattern[p] for p in patterns if p in by_pattern), None)
        if g is None:
            return EMPTY
        return Graph(g["pattern"], g["nChannels"], g["bwIntra"], g["bwInter"], g["typeIntra"], g["typeInter"],
                     g["sameChannels"])

    ring, tree, nvls = graph(4), graph(1, 2, 3), graph(5)
    graphs = [EMPTY] * len(ALGOS)
    graphs[TREE], graphs[RING], graphs[NVLS], graphs[NVLS_TREE], graphs[PAT] = tree, ring, nvls, nvls, tree
    n, nn = meta["nranks"], meta["nnodes"]
    sm = _sm(meta["gpu"])
    nvswitch = "NVS/" in text or "NVSwitch" in meta["gpu"] or "H100" in meta["gpu"]
    return CommTopo(nranks=n, nnodes=nn, ppn=n // nn, min_cc=sm, max_cc=sm, cpu_vendor="Intel",
                    graphs=tuple(graphs), nvls_support=nvls.nchannels > 0, nvls_channels=16,
                    collnet_support=False, nvs_count=int(nvswitch), nchannels=2 * ring.nchannels,
                    default_nchannels=2 * ring.nchannels,
                    net="Socket", intra="NVL", nic_types=())


def _compare(expected, tables):
    bad = []
    for (f, a, p), (lat, bw) in expected.items():
        ml, mb = tables.lat(f, a, p), tables.bw(f, a, p)
        if abs(ml - lat) > 0.05 + 1e-3 * lat or abs(mb - bw) > 0.05 + 1e-3 * bw:
            bad.append(f"{f} {a}/{p}: NCCL {lat}/{bw}, model {ml:.2f}/{mb:.2f}")
    return bad


@pytest.mark.parametrize("case", [c for c in _cases() if json.loads((c / "meta.json").read_text())
                                  .get("table_complete") and json.loads((c / "meta.json").read_text())["graphs"]],
                         ids=lambda c: c.name)
def test_tables_from_printed_graphs_match_nccl(case):
    """Feed NCCL's printed GRAPH values into the formulas of that case's release."""
    meta = json.loads((case / "meta.json").read_text())
    text = (case / "artifact.txt").read_text()
    rev = revision_for(parse_version(meta["nccl_version"]))
    params = parse_env({}, meta["nccl_version"], rdma=False, socket_vendor="other")
    expected = parse_table(text)
    assert len(expected) >= 90
    assert _compare(expected, tune_tables(_topo_from_meta(meta, text), rev, params)) == []


def test_reference_set_has_graph_cases():
    _need_tables()
    with_graphs = [c for c in _cases() if json.loads((c / "meta.json").read_text())["graphs"]]
    assert len(with_graphs) >= 5


@pytest.mark.parametrize("ngpus", [2, 4, 6])
def test_h100_single_node_tables_from_derived_graphs(ngpus):
    """No GRAPH lines were logged here, so the graphs come from the hardware (graphs.py) too."""
    _need_tables()
    case = TABLES / f"h100sxm-{ngpus}gpu-nvswitch-2.29.2"
    if not case.is_dir():
        pytest.skip(f"needs ../shared/reference/nccl_tuning_tables/{case.name}")
    text = case.joinpath("artifact.txt").read_text()
    cluster = replace(preset("h100-1node"), gpus_per_node=ngpus, nccl_version="2.29.2")
    tables = model_tables(cluster, {})
    assert _compare(parse_table(text), tables) == []
    assert tables.nchannels == int(re.search(r"(\d+) coll channels", text).group(1))
    # NCCL's own per-size decisions, logged as "AllReduce: <n> Bytes -> Algo X proto Y channel{Lo..Hi}={0..H}".
    decisions = re.findall(r"AllReduce: (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{0\.\.(\d+)\}", text)
    assert decisions
    for nbytes, algo, proto, hi in decisions:
        c = nccl_choice(cluster, {}, "all_reduce", int(nbytes))
        assert (c.algo.upper(), c.proto.upper(), c.nchannels) == (algo, proto, int(hi) + 1)


def test_socket_two_hostid_latencies_match_without_graphs():
    """rtx5090 case: graphs unlogged, so only latencies are checked (they do not depend on bw)."""
    _need_tables()
    case = TABLES / "rtx5090-2rank-samegpu-socket-2hostid-2.29.7"
    if not case.is_dir():
        pytest.skip(f"needs ../shared/reference/nccl_tuning_tables/{case.name}")
    from ncdoc.tuner.sim import SimCluster
    cluster = SimCluster(nodes=2, gpus_per_node=1, gpu_name="NVIDIA GeForce RTX 5090", sm=120, nvlink_links=0,
                         nvswitch=False, nvls=False, gpu_gpu_path="SYS", fabric="socket", nccl_version="2.29.7")
    tables = model_tables(cluster, {"NCCL_NET": "Socket"})
    for (f, a, p), (lat, _) in parse_table(case.joinpath("artifact.txt").read_text()).items():
        assert abs(tables.lat(f, a, p) - lat) <= 0.05 + 1e-3 * lat, (f, a, p)


@pytest.mark.parametrize("name,func,nbytes,algo,proto,time", [
    ("h100sxm-4gpu-p2pdisabled-nvls-2.23.4", "AllGather", 32, "Ring", "LL", 9.602401),
    ("h100sxm-4gpu-socket-isolated-2.23.4", "AllGather", 32, "Ring", "LL", 21.604000),
    ("pcie-2gpu-crosssocket-shm-2.21.5", "AllReduce", 40, "Ring", "LL", 8.605333),
])
def test_per_call_decisions_and_times_match_nccl(name, func, nbytes, algo, proto, time):
    """NCCL's TRACE `<n> Bytes -> Algo a proto p time t` lines, time to 1e-5 us."""
    case = TABLES / name
    if not case.is_dir():
        pytest.skip(f"needs ../shared/reference/nccl_tuning_tables/{name}")
    meta = json.loads((case / "meta.json").read_text())
    rev = revision_for(parse_version(meta["nccl_version"]))
    tables = tune_tables(_topo_from_meta(meta, case.joinpath("artifact.txt").read_text()), rev,
                         parse_env({}, meta["nccl_version"], rdma=False, socket_vendor="other"))
    coll = {"AllGather": "all_gather", "AllReduce": "all_reduce"}[func]
    c = choose(tables, coll, nbytes)
    assert (c.algo, c.proto) == (algo, proto)
    assert c.model_time_us == pytest.approx(time, abs=1e-5)


# ---------------------------------------------------------------- HEAD model on presets

def test_head_two_node_h100_graphs_and_choices():
    t = model_tables(preset("h100-ib-2node"), {})
    ring, tree, nvls = t.topo.graphs[RING], t.topo.graphs[TREE], t.topo.graphs[NVLS]
    assert (ring.nchannels, ring.bw_intra, ring.bw_inter) == (8, 48.0, 48.0)   # 8 NICs x 48 GB/s
    assert (tree.nchannels, nvls.nchannels) == (8, 8)
    assert t.nchannels == 16
    assert t.bw("AllReduce", "Ring", "Simple") == pytest.approx(8 * 48 * 16 / 30)
    big = nccl_choice(preset("h100-ib-2node"), {}, "all_reduce", 8 << 30)
    assert (big.algo, big.proto) == ("NVLSTree", "Simple")
    assert nccl_choice(preset("h100-ib-2node"), {}, "all_reduce", 8).proto == "LL"
    one = nccl_choice(preset("h100-1node"), {}, "all_reduce", 8 << 30)
    assert (one.algo, one.nchannels, one.nthreads) == ("NVLS", 16, 640)


def test_channels_and_threads_follow_the_environment():
    c = preset("h100-ib-2node")
    assert model_tables(c, {"NCCL_MAX_NCHANNELS": "4"}).nchannels == 4
    assert model_tables(c, {"NCCL_MIN_NCHANNELS": "32"}).nchannels == 32
    assert model_tables(c, {"NCCL_MAX_CTAS": "2", "NCCL_MAX_NCHANNELS": "8"}).nchannels == 2
    assert model_tables(c, {"NCCL_MIN_CTAS": "0"}).nchannels == 16            # <= 0 is ignored
    assert model_tables(c, {"NCCL_MAX_NCHANNELS": "0"}).nchannels == 1        # < 1 becomes 1
    t = model_tables(c, {"NCCL_NTHREADS": "100"})                             # not a multiple of 32
    assert t.max_threads[RING][2] == 512
    assert model_tables(c, {"NCCL_NTHREADS": "32"}).max_threads[RING][2] == 64
    assert model_tables(c, {"NCCL_NTHREADS": "0x80"}).max_threads[TREE][0] == 128
    assert model_tables(c, {"NCCL_NVLS_NCHANNELS": "4"}).topo.nvls_channels == 4
    assert not model_tables(c, {"NCCL_NVLS_ENABLE": "0"}).topo.nvls_support


def test_small_messages_use_fewer_channels_and_threads():
    c = nccl_choice(preset("h100-1node"), {}, "all_reduce", 4096)
    assert c.nchannels == 1 and c.nthreads < 512


# ---------------------------------------------------------------- environment parsing

@pytest.mark.parametrize("text,value", [("0x40", 64), ("010", 8), ("12abc", 12), ("garbage", 0), ("", -2),
                                        ("1e3", 1), ("-2", -2), (None, -2), ("99999999999999999999", -2)])
def test_integers_read_as_nccl_param_does(text, value):
    assert strtoll(text, -2) == value


def test_path_levels_are_case_sensitive_with_legacy_integers():
    assert path_level("PXB") == 5 and path_level("pxb") is None
    assert path_level("2") == path_level("PXB") and path_level("9") == path_level("SYS")


def test_algo_grammar_per_function_and_inversion():
    p = parse_env({"NCCL_ALGO": "ring,tree;allreduce:^ring"}, "2.30.7", rdma=True, socket_vendor="other")
    ar, bc = p.algo_enable[FUNCS.index("AllReduce")], p.algo_enable[FUNCS.index("Broadcast")]
    assert ar[RING] == 0 and ar[TREE] == 1 and ar[NVLS] == 1
    assert bc[RING] == 1 and bc[TREE] == 1 and bc[NVLS] == 0


@pytest.mark.parametrize("value,message", [
    ("Rign", 'Unrecognized element token "Rign" when parsing "Rign"'),
    ("allreduce:ring;tree", 'All entries except the first must have a prefix: "allreduce:ring;tree"'),
    ("allreduc:ring", 'Unrecognized prefix token "allreduc" when parsing "allreduc:ring"'),
])
def test_bad_algo_lists_fail_init_on_head(value, message):
    with pytest.raises(SimTrialError) as e:
        model_tables(preset("h100-ib-2node"), {"NCCL_ALGO": value})
    assert e.value.message == message and e.value.kind == "init"


def test_old_flat_grammar_ignores_unknown_tokens_and_keeps_ring():
    old = replace(preset("h100-ib-2node"), nccl_version="2.21.5")
    t = model_tables(old, {"NCCL_ALGO": "Rign,Tree"})
    assert t.bw("AllReduce", "Tree", "Simple") > 0 and t.bw("AllReduce", "Ring", "Simple") == 0
    # Broadcast has no Tree: before 2.24 NCCL gave Ring back instead of failing.
    assert t.bw("Broadcast", "Ring", "Simple") > 0
    assert nccl_choice(old, {"NCCL_ALGO": "Tree"}, "broadcast", 1 << 20).algo == "Ring"


def test_algorithm_unsupported_for_a_collective_fails_the_call_on_head():
    with pytest.raises(SimTrialError) as e:
        nccl_choice(preset("h100-ib-2node"), {"NCCL_ALGO": "Tree"}, "all_gather", 1 << 20)
    assert e.value.kind == "call"
    assert e.value.message == ("No algorithm/protocol available for function AllGather with datatype "
                               "ncclFloat32. NCCL_ALGO was set to Tree.")


def test_ll128_default_enablement():
    assert model_tables(preset("h100-ib-2node"), {}).bw("AllReduce", "Ring", "LL128") > 0
    # Socket transport: the NIC hangs off the CPU (PHB), beyond PXN: LL128 stays off unless asked for.
    sock = preset("h100-socket-2node")
    assert model_tables(sock, {}).bw("AllReduce", "Ring", "LL128") == 0
    assert model_tables(sock, {"NCCL_PROTO": "LL128,Simple"}).bw("AllReduce", "Ring", "LL128") > 0


def test_network_selection_and_socket_threads():
    ib = preset("h100-ib-2node")
    assert model_tables(ib, {"NCCL_IB_DISABLE": "1"}).topo.net == "Socket"
    assert model_tables(ib, {"NCCL_NET": "socket"}).topo.net == "Socket"
    with pytest.raises(SimTrialError, match="Failed to initialize any NET plugin"):
        model_tables(ib, {"NCCL_NET": "IB", "NCCL_IB_DISABLE": "1"})
    sock = model_tables(preset("h100-socket-2node"), {"NCCL_SOCKET_NTHREADS": "32", "NCCL_NSOCKS_PERTHREAD": "8"})
    assert (sock.params.socket_threads, sock.params.socket_per_thread) == (16, 4)     # 16 threads, 64 sockets
    assert model_tables(preset("h100-socket-2node"), {"NCCL_NSOCKS_PERTHREAD": "8"}).params.socket_count == 0
