"""The public paired measurements the fabric layer is calibrated to, and the sim's figures beside them.

Each anchor is a public report in which one variable or condition changed and busbw was measured
before and after (tuner_anchors.md, shared/reference/anchors.md): its source (owner/repo#N or a
URL), the term of fabric.py it pins, the cluster it ran on as a SimCluster, the cases (env or
cluster change) and every published figure of the row. `check` says where the simulator leaves
the stated tolerance; tests/tuner/sim/test_sim_anchors.py runs it for every anchor, and
`python -m ncdoc.tuner.sim.anchors` prints the table docs/simulator.md carries (a test keeps the
two equal). Figures are facts from the reports, not copied text.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ncdoc.tuner.sim.cluster import SimCluster, preset
from ncdoc.tuner.sim.errors import SimTrialError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Case:
    label: str
    env: dict = field(default_factory=dict)
    cluster: dict = field(default_factory=dict)      # SimCluster fields changed for this case


@dataclass(frozen=True)
class Point:
    collective: str
    size: int
    public: tuple[float | None, ...]                 # per case, GB/s (None: not published)


@dataclass(frozen=True)
class Anchor:
    key: str
    source: str
    term: str
    setup: str
    cluster: dict
    cases: tuple[Case, ...]
    points: tuple[Point, ...]
    tolerance: float                                 # relative, on each figure (or ratio)
    compare: str = "absolute"                        # absolute | ratio (each case over the first)

    def build(self, case: Case) -> SimCluster:
        base = dict(self.cluster)
        name = base.pop("preset", None)
        c = preset(name) if name else SimCluster(**base)
        fields = ({} if not name else base) | dict(case.cluster)
        return c.with_fabric(**fields) if fields else c


def _h100(**kw: Any) -> dict:
    return {"preset": "h100-ib-2node", **kw}


ANCHORS: tuple[Anchor, ...] = (
    Anchor("H1", "NVIDIA/nccl#1222", "per-NIC rate, scale",
           "4 nodes x 8 H100, 8x 400G IB, default algorithm",
           _h100(nodes=4, nccl_version="2.19.3"), (Case("default"),),
           tuple(Point("all_reduce", s, (bw,)) for s, bw in
                 ((GIB, 385.41), (2 * GIB, 387.74), (4 * GIB, 389.67), (8 * GIB, 390.60))),
           0.05),
    Anchor("H4", "NVIDIA/nccl#1469", "scale: mid sizes keep NCCL's latencies",
           "16 nodes x 8 H100, 64 MiB: 'normal ~150 GB/s', mostly lower, unstable (the algorithm is not "
           "reported; the ring is assumed)", _h100(nodes=16, nccl_version="2.20.5"),
           (Case("Ring", {"NCCL_ALGO": "Ring"}),), (Point("all_reduce", 64 * MIB, (150.0,)),), 0.15),
    Anchor("H5", "NVIDIA/nccl-tests#283", "scale (healthy fabrics stay flat)",
           "248 nodes x 8 H200, 8x IB, default algorithm",
           _h100(nodes=248, gpu_name="NVIDIA H200"), (Case("default"),),
           (Point("all_reduce", 512 * MIB, (350.0,)),), 0.12),
    Anchor("V1", "NVIDIA/nccl#2140", "NVLink ring and NVLS rates",
           "1 node 8x H100, NVLS off -> on", _h100(nodes=1, nccl_version="2.30.4"),
           (Case("NVLS off", {"NCCL_NVLS_ENABLE": "0"}), Case("NVLS on")),
           (Point("all_reduce", 8 * GIB, (370.0, 480.0)),), 0.05),
    Anchor("V4", "NVIDIA/nccl#1221", "NVLSTree over the network",
           "2 nodes 8x H100, 8x 400G RoCE, NVLS 0 -> 1",
           _h100(fabric="roce", ecmp_paths=8, nccl_version="2.19.3"),
           (Case("NVLS 0", {"NCCL_NVLS_ENABLE": "0"}), Case("NVLS 1", {"NCCL_NVLS_ENABLE": "1"})),
           (Point("all_reduce", 4 * GIB, (330.0, 430.0)),), 0.08, "ratio"),
    Anchor("V5", "NVIDIA/nccl#1221", "NVLSTree beyond 2 nodes",
           "4 nodes 8x H100, 8x 400G RoCE, NVLS 0 -> 1 (no effect without CollNet)",
           _h100(nodes=4, fabric="roce", ecmp_paths=8, nccl_version="2.19.3"),
           (Case("NVLS 0", {"NCCL_NVLS_ENABLE": "0"}), Case("NVLS 1", {"NCCL_NVLS_ENABLE": "1"})),
           (Point("all_reduce", 4 * GIB, (320.0, 320.0)),), 0.05, "ratio"),
    Anchor("Q1", "NVIDIA/nccl#2409 (+#2408)", "host ceiling; QPs inside one rail group",
           "2x8 H100, 8x 400G RoCE, a host stuck at ~13 GB/s per rail; QPS 1 -> 8 (its all-reduce is above "
           "the 1.875x all-gather rate a 2-node tree allows, hence the wider tolerance)",
           {"preset": "h100-roce-2node-misconfigured"},
           (Case("QPS 1"), Case("QPS 8", {"NCCL_IB_QPS_PER_CONNECTION": "8"})),
           (Point("all_reduce", GIB, (216.5, 216.5)), Point("all_reduce", 8 * GIB, (231.0, 231.0)),
            Point("all_gather", 256 * MIB, (101.0, 101.0)), Point("reduce_scatter", 256 * MIB, (100.0, 100.0)),
            Point("alltoall", 256 * MIB, (25.0, 25.0)), Point("sendrecv", GIB, (13.1, 13.1))),
           0.2),
    Anchor("Q2", "NVIDIA/cluster-readiness-engine PR#287", "RoCE ECMP: adaptive routing",
           "multi-rack RoCE (GB300 class), QPS=4 already; AR=1 + SPLIT=1: ~+70 % peak busbw",
           _h100(nodes=8, fabric="roce", ecmp_paths=8, leaf_nodes=2, ecmp_base_eff=0.55, ecmp_qp_hash=False,
                 switch_ar=True),
           (Case("QPS 4", {"NCCL_IB_QPS_PER_CONNECTION": "4"}),
            Case("+AR +split", {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_ADAPTIVE_ROUTING": "1",
                                "NCCL_IB_SPLIT_DATA_ON_QPS": "1"})),
           (Point("all_reduce", 8 * GIB, (1.0, 1.7)),), 0.08, "ratio"),
    Anchor("Q3", "NVIDIA/cluster-readiness-engine PR#287", "RoCE ECMP: more QPs are not free gains",
           "same fabric, QPS 4 -> 8: no improvement",
           _h100(nodes=8, fabric="roce", ecmp_paths=8, leaf_nodes=2, ecmp_base_eff=0.55, ecmp_qp_hash=False,
                 switch_ar=True),
           (Case("QPS 4", {"NCCL_IB_QPS_PER_CONNECTION": "4"}), Case("QPS 8", {"NCCL_IB_QPS_PER_CONNECTION": "8"})),
           (Point("all_reduce", 8 * GIB, (1.0, 1.0)),), 0.04, "ratio"),
    Anchor("Q4", "Meta, SIGCOMM'24 (RDMA over Ethernet at Meta scale)", "RoCE ECMP: QP hashing",
           "RoCE 2-stage Clos: 5-tuple ECMP -> E-ECMP (QP hashed) + QP scaling: up to +40 %",
           _h100(nodes=16, fabric="roce", ecmp_paths=16, leaf_nodes=4, ecmp_base_eff=0.63, ecmp_qp_hash=False),
           (Case("ECMP"), Case("E-ECMP + 4 QPs", {"NCCL_IB_QPS_PER_CONNECTION": "4"}, {"ecmp_qp_hash": True})),
           (Point("all_reduce", 8 * GIB, (1.0, 1.4)),), 0.08, "ratio"),
    Anchor("Q5", "Asterfusion blog, flowlet adaptive routing", "RoCE ECMP: hash -> QP hash -> AR",
           "2x8 GPUs across a RoCE Clos: link utilisation 84.5 % -> 88.05 % -> 97 %",
           _h100(fabric="roce", ecmp_paths=8, leaf_nodes=1, ecmp_base_eff=0.845, ecmp_qp_hash=False,
                 switch_ar=True),
           (Case("5-tuple"), Case("QP hash, 4 QPs", {"NCCL_IB_QPS_PER_CONNECTION": "4"}, {"ecmp_qp_hash": True}),
            Case("AR", {"NCCL_IB_ADAPTIVE_ROUTING": "1"})),
           (Point("all_gather", 8 * GIB, (84.5, 88.05, 97.0)),), 0.03, "ratio"),
    Anchor("C1", "NVIDIA/nccl#1272", "p2p channels per remote peer",
           "8 nodes x 4 GH200, 4x 200G (Slingshot-class); NCCL 2.19.4 (per peer 2), 2.20.5 auto, "
           "2.20.5 with NCCL_NCHANNELS_PER_NET_PEER=4",
           {"nodes": 8, "gpus_per_node": 4, "gpu_name": "NVIDIA GH200 120GB", "sm": 90, "nvlink_links": 6,
            "nvswitch": False, "nvls": False, "nics_per_node": 4, "nic_rate_gbps": 200.0, "nccl_version": "2.20.5"},
           (Case("2.19.4", {}, {"nccl_version": "2.19.4"}), Case("2.20.5 auto"),
            Case("2.20.5 NPP=4", {"NCCL_NCHANNELS_PER_NET_PEER": "4"})),
           (Point("sendrecv", 512 * MIB, (24.24, 18.32, 24.2)),), 0.08),
    Anchor("X1", "NVIDIA/nccl-tests#187", "PXN for all-to-all on rail-optimised fabrics",
           "8 nodes x 8 A800, rail-style leaf/spine: alltoall PXN off -> on, 10 -> 12 GB/s",
           {"preset": "a100-ib-4node", "nodes": 8, "nccl_version": "2.19.3"},
           (Case("PXN off", {"NCCL_P2P_PXN_LEVEL": "0"}), Case("PXN on")),
           (Point("alltoall", 4 * MIB, (1.0, 1.2)),), 0.06, "ratio"),
    Anchor("N2", "oracle-quickstart/oci-hpc PR#48 (sjeaugey, GTC24 S62129)", "CROSS_NIC on rail-optimised fabrics",
           "8x H100, 8x 400G: rail-aligned rings only -> alternating rings (CROSS_NIC=2), 370 -> 390 GB/s",
           _h100(nccl_version="2.23.4"),
           (Case("CROSS_NIC=0", {"NCCL_CROSS_NIC": "0", "NCCL_ALGO": "Ring"}), Case("default", {"NCCL_ALGO": "Ring"})),
           (Point("all_reduce", 8 * GIB, (370.0, 390.0)),), 0.03, "ratio"),
    Anchor("C3", "NVIDIA/nccl-tests#309", "channels per NIC",
           "2x8 H100, 8x 400G IB, Ring: NCCL_MIN_CTAS default -> 24, ~370 -> above 380 GB/s",
           _h100(), (Case("default", {"NCCL_ALGO": "Ring"}), Case("MIN_CTAS=24", {"NCCL_ALGO": "Ring",
                                                                                "NCCL_MIN_CTAS": "24"})),
           (Point("all_reduce", 8 * GIB, (370.0, 381.0)),), 0.03, "ratio"),
    Anchor("C9", "NVIDIA/nccl#439 (sjeaugey in nccl#438)", "one channel per NIC",
           "A100, 2x HDR: 1 ring vs 2 rings, 24 vs 48 GB/s (one channel per NIC cannot hide NCCL's bubbles)",
           {"preset": "a100-ib-4node", "nodes": 2, "nics_per_node": 2},
           (Case("1 per NIC", {"NCCL_ALGO": "Ring", "NCCL_MAX_CTAS": "2"}), Case("2 per NIC", {"NCCL_ALGO": "Ring",
                                                                                              "NCCL_MAX_CTAS": "4"})),
           (Point("all_reduce", GIB, (24.0, 48.0)),), 0.10, "ratio"),
    Anchor("A1", "NVIDIA/nccl#1368", "Ring vs Tree beyond 2 nodes",
           "5 nodes 8x H100, 4x 400G RoCE, QPS=2: Ring 190 -> Tree 150 GB/s",
           _h100(nodes=5, fabric="roce", ecmp_paths=8, nics_per_node=4, nccl_version="2.20.5"),
           (Case("Ring", {"NCCL_ALGO": "Ring", "NCCL_IB_QPS_PER_CONNECTION": "2"}),
            Case("Tree", {"NCCL_ALGO": "Tree", "NCCL_IB_QPS_PER_CONNECTION": "2"})),
           (Point("all_reduce", GIB, (190.0, 150.0)),), 0.10),
    Anchor("V8", "NVIDIA/nccl PR#1112", "NVLSTree chunks over a high-latency network",
           "8 nodes x 8 H100 (AWS P5, EFA): NVLSTree all-reduce, 64 KiB -> 512 KiB chunks, 104.20 -> 279.78 GB/s",
           _h100(nodes=8, net_msg_overhead_us=7.1, nccl_version="2.20.3"),
           (Case("64 KiB", {"NCCL_ALGO": "NVLSTree", "NCCL_NVLSTREE_MAX_CHUNKSIZE": "65536"}),
            Case("512 KiB", {"NCCL_ALGO": "NVLSTree", "NCCL_NVLSTREE_MAX_CHUNKSIZE": "524288"})),
           (Point("all_reduce", 4 * GIB, (104.20, 279.78)),), 0.10),
    Anchor("R2", "NVIDIA/nccl#949 (closest pair: no RO-only pair is public)", "relaxed ordering in VMs",
           "A100 VM, 2x HDR: ~56 % of the expected rate -> 48 GB/s (line rate)",
           {"preset": "a100-ib-4node", "nodes": 2, "nics_per_node": 2, "vm": True, "relaxed_ordering": "hidden"},
           (Case("RO off", {"NCCL_ALGO": "Ring"}), Case("RO on", {"NCCL_ALGO": "Ring",
                                                                   "NCCL_IB_PCI_RELAXED_ORDERING": "1"})),
           (Point("all_reduce", 8 * GIB, (0.56, 1.0)),), 0.06, "ratio"),
    Anchor("F1", "NVIDIA/nccl#378 (#306, #173)", "RoCE traffic outside the lossless class",
           "RoCE without PFC for the traffic: bandwidth collapses under load (0.x GB/s)",
           {"preset": "h100-roce-8node-lossless-tc"},
           (Case("TC 106 (lossless)", {"NCCL_IB_TC": "106"}), Case("default TC 0")),
           (Point("all_reduce", GIB, (1.0, 0.3)),), 0.35, "ratio"),
    Anchor("S1", "AReaL#639", "TCP socket transport",
           "2x8 H100 falling back to NET/Socket (no helper threads): ~5 GB/s where ~25 was expected",
           {"preset": "h100-socket-2node"}, (Case("default"),),
           (Point("all_reduce", GIB, (5.0,)),), 0.20),
)


def _mean_busbw(cluster: SimCluster, env: dict, collective: str, size: int, reps: int) -> float | None:
    from ncdoc.tuner.sim.run import simulate_rows
    try:
        rows = [simulate_rows(cluster, env, collective, [size], seed=0, repeat_index=r, in_place=False)[0].busbw
                for r in range(reps)]
    except SimTrialError:
        return None
    return statistics.fmean(rows)


def measure(anchor: Anchor, reps: int = 16) -> list[tuple[Point, tuple[float | None, ...]]]:
    """Per point, the simulator's mean busbw per case."""
    clusters = [(anchor.build(case), case.env) for case in anchor.cases]
    return [(pt, tuple(_mean_busbw(c, env, pt.collective, pt.size, reps) for c, env in clusters))
            for pt in anchor.points]


def _scaled(values: tuple[float | None, ...], compare: str) -> tuple[float | None, ...]:
    if compare != "ratio" or not values or not values[0]:
        return values
    return tuple(None if v is None else v / values[0] for v in values)


def check(anchor: Anchor, reps: int = 16) -> list[str]:
    """Where the simulator leaves the anchor's tolerance (empty: it reproduces the row)."""
    bad = []
    for pt, sim in measure(anchor, reps):
        pub, got = _scaled(pt.public, anchor.compare), _scaled(sim, anchor.compare)
        for case, p, s in zip(anchor.cases, pub, got):
            if p is None:
                continue
            if s is None or abs(s - p) > anchor.tolerance * p:
                bad.append(f"{anchor.key} {pt.collective} {pt.size} {case.label}: public {p:.3g}, sim "
                           f"{'fails' if s is None else f'{s:.3g}'} (tolerance {100 * anchor.tolerance:.0f} %)")
    return bad


def _size(n: int) -> str:
    for unit, mult in (("G", GIB), ("M", MIB), ("K", KIB)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def markdown_table(reps: int = 16) -> str:
    """Every anchor, every published figure of its row, the simulator's beside it."""
    lines = ["| anchor | source | term | collective, size | case | public | sim | tolerance |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for a in ANCHORS:
        unit = " (ratio)" if a.compare == "ratio" else " GB/s"
        for pt, sim in measure(a, reps):
            pub, got = _scaled(pt.public, a.compare), _scaled(sim, a.compare)
            for case, p, s in zip(a.cases, pub, got):
                shown_p = "n/r" if p is None else f"{p:.3g}"
                shown_s = "fails" if s is None else f"{s:.3g}"
                lines.append(f"| {a.key} | {a.source} | {a.term} | {pt.collective} {_size(pt.size)} | {case.label} | "
                             f"{shown_p}{unit if p is not None else ''} | {shown_s} | ±{100 * a.tolerance:.0f} % |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys
    sys.stdout.write(markdown_table())
