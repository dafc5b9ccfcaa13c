"""NCCL's tuning constants and model rules, per release.

The simulator's NCCL layer follows HEAD 2.30.7 (src/graph/tuning.cc `ncclTunerConstantsDefaults`,
`ncclTopoTuneModel`; nccl_facts.md section 4). Older releases used other constants and a few
other formulas; each `Revision` below records them, read from the release tags' tuning.cc.
Eras are keyed by the first release that carries them; a release between two listed ones
takes the earlier era (exact for the releases listed, close for the ones in between).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ncdoc.nccl.parse import version_tuple
from ncdoc.readers.numbers import is_digits

# Index order as in NCCL (src/include/device.h, src/init.cc name tables).
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOS = ("LL", "LL128", "Simple")
FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT = range(7)
LL, LL128, SIMPLE = range(3)
BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLREDUCE = range(5)
HW_NVLINK, HW_PCI, HW_NET = range(3)

# Path types, HEAD numbering (src/include/graph.h); compare by index, print by name.
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
PATH = {name: i for i, name in enumerate(PATH_TYPES)}

PATTERN_BALANCED_TREE, PATTERN_SPLIT_TREE, PATTERN_TREE, PATTERN_RING, PATTERN_NVLS = 1, 2, 3, 4, 5

Table3 = tuple[tuple[float, float, float], ...]


def _t(*rows: tuple[float, float, float]) -> Table3:
    return tuple(rows)


@dataclass(frozen=True)
class Revision:
    """Constants and rule switches of one NCCL era. Tables are [algo][proto] or [cc][nodes]."""
    first: tuple[int, int, int]
    base_lat: Table3                       # [algo][proto]
    hw_lat: tuple[Table3, Table3, Table3]  # [NVLINK, PCI, NET][algo][proto]
    ll_max_bws: Table3                     # rows: Volta/Intel, Ampere/AMD, Hopper, Blackwell
    per_ch_ring_ll128: Table3
    per_ch_tree_ll128: Table3
    per_ch_tree: Table3
    per_ch_nvls_tree: Table3 | None        # None before 2.28
    nvls_eff: tuple[float, float, float, float] | None
    ring_ll_quarter: bool                  # <2.21: Ring LL busBw x1/4 (or 1/3), later x.5
    ring_ll128_ppn1: bool                  # <2.23: Ring LL128 x0.7 when ppn<2
    tree_pattern_factor: bool              # 2.21+: Tree x.85 when the tree pattern is TREE
    pat_factor: float | None               # None before PAT (2.23)
    pat_needs_sm60: bool
    agrs_nvls_collnet: bool                # 2.19+: AllGather/ReduceScatter may use NVLS, CollNetDirect
    nvls_bw_rule: str                      # "graph" (2.18) | "min" | "min_agrs" (2.27) | "eff" (2.28+)
    nvls_ratio_rule: str                   # "2.18" | "5/6" | "nsteps"
    convert_skip: str                      # "none" (2.18) | "collnet_agrs" | "nonring_agrs" (2.23+)
    collnet_agrs_rule: str                 # "interp" (2.19-2.26) | "min09" (2.27+)
    collnet_arity: float
    ring_inter_2n: bool                    # <2.23: AllReduce ring inter steps = 2*nNodes
    ppn1_tree_net_lat: bool                # 2.23+: with ppn=1 use the Tree network latency
    old_nvls_lat: bool                     # 2.18: NVLS/NVLSTree latencies from the NET table only
    ll128_rule: str                        # "2.18" | "2.21" | "2.26" | "2.27" | "2.30"
    ring_backup: bool                      # <2.24: a function with no algorithm gets Ring back
    ring_never_disabled_nonallreduce: bool  # 2.18: NCCL_ALGO never disables Ring outside AllReduce
    tree_corr_len: int                     # tree correction factor entries (23, 24 in 2.29+)

    @property
    def code(self) -> int:
        return self.first[0] * 10000 + self.first[1] * 100 + self.first[2]


_HEAD = Revision(
    first=(2, 30, 3),
    base_lat=_t((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0)),
    hw_lat=(
        _t((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
        _t((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
        _t((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
    ),
    ll_max_bws=_t((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0)),
    per_ch_ring_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0)),
    per_ch_tree_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0)),
    per_ch_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0)),
    per_ch_nvls_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0)),
    nvls_eff=(0.0, 0.0, 0.85, 0.74),
    ring_ll_quarter=False, ring_ll128_ppn1=False, tree_pattern_factor=True,
    pat_factor=0.75, pat_needs_sm60=True, agrs_nvls_collnet=True,
    nvls_bw_rule="eff", nvls_ratio_rule="nsteps", convert_skip="nonring_agrs", collnet_agrs_rule="min09",
    collnet_arity=0.4, ring_inter_2n=False, ppn1_tree_net_lat=True, old_nvls_lat=False,
    ll128_rule="2.30", ring_backup=False, ring_never_disabled_nonallreduce=False,
    tree_corr_len=24,
)

_BW_BLACKWELL_2X = dict(  # 2.26-2.28: the Blackwell rows were twice the Hopper ones
    ll_max_bws=_t((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0)),
    per_ch_ring_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (73.4, 73.4, 73.4)),
    per_ch_tree_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (73.4, 73.4, 58.0)),
    per_ch_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0)),
)

_R229 = replace(_HEAD, first=(2, 29, 0), ll128_rule="2.27",
                per_ch_ring_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (34.5, 34.6, 34.5)),
                per_ch_nvls_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 43.8)))
_R228 = replace(_R229, first=(2, 28, 0), tree_corr_len=23,
                hw_lat=(_HEAD.hw_lat[0], _HEAD.hw_lat[1],
                        _t((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14),
                           (0, 0, 14))),
                per_ch_nvls_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 43.1)),
                **_BW_BLACKWELL_2X)
_R227 = replace(_R228, first=(2, 27, 0), per_ch_nvls_tree=None, nvls_eff=None,
                nvls_bw_rule="min_agrs", nvls_ratio_rule="5/6")
_R224 = replace(_R227, first=(2, 24, 0), nvls_bw_rule="min", collnet_agrs_rule="interp", ll128_rule="2.26")
_R223 = replace(_R224, first=(2, 23, 0), pat_factor=0.85, pat_needs_sm60=False, ring_backup=True,
                ll128_rule="2.21",
                ll_max_bws=_HEAD.ll_max_bws[:3], per_ch_ring_ll128=_HEAD.per_ch_ring_ll128[:3],
                per_ch_tree_ll128=_HEAD.per_ch_tree_ll128[:3], per_ch_tree=_HEAD.per_ch_tree[:3])
_R221 = replace(
    _R223, first=(2, 21, 0), pat_factor=None, ring_ll128_ppn1=True, convert_skip="collnet_agrs",
    ring_inter_2n=True, ppn1_tree_net_lat=False,
    base_lat=_t((6.8, 14.0, 0), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
    hw_lat=(
        _t((0.6, 1.25, 28), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 0)),
        _t((1.0, 1.9, 28), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        _t((5.0, 8.5, 28), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14), (0, 0, 0)),
    ))
# 2.19-2.20: Ring LL still x1/4 and NVLink NVLS latency 23; otherwise as 2.21.
_R219 = replace(
    _R221, first=(2, 19, 0), ring_ll_quarter=True,
    hw_lat=(
        _t((0.6, 1.25, 28), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 23), (0, 0, 23), (0, 0, 0)),
        _R221.hw_lat[1], _R221.hw_lat[2]))
_R218 = replace(
    _R219, first=(2, 18, 0), tree_pattern_factor=False, agrs_nvls_collnet=False,
    nvls_bw_rule="graph", nvls_ratio_rule="2.18", convert_skip="none", collnet_arity=0.5,
    old_nvls_lat=True, ll128_rule="2.18", ring_never_disabled_nonallreduce=True,
    base_lat=_t((6.8, 14.0, 0), (6.6, 14.0, 8.4), (6.8, 14.0, 0), (6.8, 14.0, 0), (0, 0, 23.0), (0, 0, 23.0),
                (0, 0, 0)),
    hw_lat=(
        _t((0.6, 1.25, 28), (0.6, 1.9, 3.4), (0, 0, 8.0), (0, 0, 4.75), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        _t((1.0, 1.9, 28), (1.0, 2.5, 5.7), (0, 0, 8.0), (0, 0, 8.0), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
        _t((5.0, 8.5, 28), (2.7, 4.0, 14.0), (0, 0, 10.7), (0, 0, 14), (0, 0, 18), (0, 0, 19), (0, 0, 0)),
    ),
    ll_max_bws=_t((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
    # 2.18 had one LL128 per-channel cap (ll128MaxBwPerCh) for Ring and Tree alike.
    per_ch_ring_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7)),
    per_ch_tree_ll128=_t((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7)),
    per_ch_tree=_t((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 33.0)))

ERAS: tuple[Revision, ...] = (_R218, _R219, _R221, _R223, _R224, _R227, _R228, _R229, _HEAD)

# Tree correction factors, powers of two from 64 B (src/graph/tuning.cc treeCorrectionFactor).
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)

# Graph search speeds, GB/s per channel (src/graph/search.cc).
SPEEDS_INTRA = {0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
                90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
SPEEDS_INTER = {0: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                    0.24, 0.12),
                90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
                     0.12),
                100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                      2.4, 1.2, 0.24, 0.12)}

# Device constants (src/include/device.h, collectives.h).
WARP_SIZE = 32
MAXCHANNELS = 64
SIMPLE_MAX_NTHREADS = LL_MAX_NTHREADS = 512
LL128_MAX_NTHREADS = MAX_NTHREADS = 640
PCI_BW = 12.0
LOC_BW = 5000.0
NCCL_STEPS = 8
THREAD_THRESHOLDS = (8, 8, 64)        # LL, LL128, Simple bytes per thread


def with_example_plugin(rev: Revision) -> Revision:
    """The constants once NCCL's example tuner plugin is loaded: its init() overwrites three of them
    (nccl_facts.md 3.1), which moves NCCL's own choice wherever no rule applies."""
    def cell(table: Table3, row: int, col: int, value: float) -> Table3:
        if row >= len(table):
            return table
        rows = [list(r) for r in table]
        rows[row][col] = value
        return tuple(tuple(r) for r in rows)

    net = [list(r) for r in rev.hw_lat[HW_NET]]
    net[NVLS][SIMPLE] = 24.0
    return replace(rev, per_ch_tree=cell(rev.per_ch_tree, 3, 2, 15.0),
                   per_ch_ring_ll128=cell(rev.per_ch_ring_ll128, 3, 2, 20.0),
                   hw_lat=(rev.hw_lat[HW_NVLINK], rev.hw_lat[HW_PCI], tuple(tuple(r) for r in net)))


def revision_for(version: tuple[int, int, int]) -> Revision:
    """The era a release belongs to; releases before 2.18 get the 2.18 era (not modelled further)."""
    chosen = ERAS[0]
    for era in ERAS:
        if version >= era.first:
            chosen = era
    return chosen


def parse_version(text: str) -> tuple[int, int, int]:
    """'2.21.5', '2.21.5+cuda12.1', 'v2.21.5-1' or a version code '22105' -> (2, 21, 5)."""
    s = text.strip().lstrip("vV")
    if is_digits(s) and len(s) >= 5:
        code = int(s)
        return (code // 10000, (code // 100) % 100, code % 100)
    parts = list(version_tuple(s) or ())[:3]
    if len(parts) < 2:
        raise ValueError(f"not an NCCL version: {text!r}")
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def cc_index(min_cc: int) -> int:
    """compCapIndex: 0 Volta (<80), 1 Ampere (80-89), 2 Hopper (90-99), 3 Blackwell (>=100)."""
    return 3 if min_cc >= 100 else 2 if min_cc >= 90 else 1 if min_cc >= 80 else 0
