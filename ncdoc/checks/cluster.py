"""Cross-node checks (rules/cluster.yaml): what differs between the nodes of one job.

Each reads ctx.cluster (ncdoc.cluster.facts.ClusterFacts: every node's snapshot and effective
NCCL env), takes the attributes it judges from the cluster's drift matrix (the majority value,
or a golden node's, as the reference) and names the odd nodes with their values. Without a
cluster (every single-node command) the rules are skipped; engine.selection leaves them out.
"""

from __future__ import annotations

from ncdoc.cluster.attributes import ABSENT, UNSET, Attr
from ncdoc.cluster.drift import AttrDrift, attribute_drift
from ncdoc.cluster.nodes import nodes_text
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip

NO_CLUSTER = "needs the snapshots of several nodes (ncdoc cluster check)"

# Variables that shape what NCCL builds across ranks: algorithm and protocol choice, the
# transport, buffer sizes, the cross-NIC graph, QoS classes, the GID. Ranks that disagree on
# them hang or fail at connect, they do not merely run slower.
MUST_MATCH = frozenset({
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_BUFFSIZE",
    "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_IB_GID_INDEX", "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_SOCKET_FAMILY", "NCCL_NET_GDR_LEVEL", "NCCL_IB_ADAPTIVE_ROUTING",
})
DEBUG_ONLY = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
                        "NCCL_DEBUG_TIMESTAMP_LEVELS"})
SKEW_TOLERANCE_S = 2.0


def _cluster(ctx: Context):
    c = getattr(ctx, "cluster", None)
    if c is None:
        raise Skip(NO_CLUSTER)
    return c


def _compared(ctx: Context):
    c = _cluster(ctx)
    if len(c.nodes) < 2 and c.golden is None:
        raise Skip("only one node gathered: nothing to compare it with (give a golden node with --golden)")
    return c


def _drifts(c, match, *, drop=()) -> list[AttrDrift]:
    """Drifts of the attributes `match` accepts; values in `drop` (ABSENT: a device some nodes do
    not have, judged by the inventory rule) are left out before comparing."""
    out = []
    table = c.table()
    golden = c.golden_values()
    for d in c.drift():
        if not match(d.key):
            continue
        if drop and any(v in drop for v, _ in d.groups):
            col = {n: (None if v in drop else v) for n, v in table.values[d.key].items()}
            g = golden.get(d.key) if golden is not None and d.key in golden else None
            given = golden is not None and d.key in golden and g not in drop
            d = attribute_drift(d.attr, col, g if given else None, given)
            if d is None:
                continue
            d = AttrDrift(d.attr, d.reference, d.basis, d.groups, d.odd, ())   # dropped is not unknown
        out.append(d)
    return out


def _sentence(d: AttrDrift, c) -> str:
    total = sum(len(n) for _, n in d.groups)
    if d.reference is None:
        parts = [f"{v} on {nodes_text(n)}" for v, n in d.groups]
        return "no majority: " + "; ".join(parts)
    ref_nodes = next((n for v, n in d.groups if v == d.reference), ())
    ref = f"{d.reference} on {len(ref_nodes)} of {total} nodes" if ref_nodes else f"{d.reference}"
    if d.basis == "golden":
        ref += f" (golden: {c.golden_name})"
    odd = [f"{v} on {nodes_text(n)}" for v, n in d.groups if v != d.reference]
    return f"{ref}, but " + "; ".join(odd)


def _merge(drifts: list[AttrDrift]) -> list[tuple[list[AttrDrift], tuple]]:
    """Drifts of one device family that single out the same nodes with the same values (every HCA's
    firmware on one node) are reported together."""
    groups: dict[tuple, list[AttrDrift]] = {}
    for d in drifts:
        parts = d.key.split(".")
        family = f"{parts[0]}.{parts[-1]}" if len(parts) > 2 else parts[0] if d.attr.group in (
            "pcie", "topology") else d.key
        sig = (family, d.odd, tuple(v for v, _ in d.groups), d.reference) if d.odd else (d.key,)
        groups.setdefault(sig, []).append(d)
    return [(ds, sig) for sig, ds in groups.items()]


def _hits(c, drifts: list[AttrDrift], consequence: str, *, severity=None, fix=None):
    for ds, _ in _merge(drifts):
        d = ds[0]
        labels = [x.attr.label for x in ds]
        if len(ds) > 1:
            devs = [x.key.split(".")[1] for x in ds]
            what = d.attr.label.split(" ", 1)[-1]
            label = (f"{', '.join(devs)} {what}" if len(devs) <= 3
                     else f"{what} of {len(devs)} devices ({devs[0]} ... {devs[-1]})")
        else:
            label = labels[0]
        evidence = []
        for x in ds[:4]:
            for v, nodes in x.groups:
                if v == x.reference:
                    continue
                for n in nodes[:4]:
                    evidence.append(Evidence(f"{n}: {x.attr.label} = {v}", f"snapshot:{n}"))
        if d.reference is not None and ds:
            ref_node = next((n for v, n in d.groups if v == d.reference), ())
            if ref_node:
                evidence.append(Evidence(f"{ref_node[0]}: {d.attr.label} = {d.reference} (reference)",
                                         f"snapshot:{ref_node[0]}"))
        msg = f"{label}: {_sentence(d, c)}"
        if consequence:
            msg += f" ({consequence})"
        yield Hit(msg, tuple(evidence), fix=fix(d) if callable(fix) else fix,
                  severity=severity(d) if callable(severity) else severity, subject=d.key)


def _prefix(*prefixes: str, suffix: tuple[str, ...] = ()):
    def match(key: str) -> bool:
        return key.startswith(prefixes) and (not suffix or key.endswith(suffix))
    return match


def _exact(*keys: str):
    wanted = set(keys)
    return lambda key: key in wanted


# ---------------------------------------------------------------- versions

@check("cluster_nccl_version_drift")
def cluster_nccl_version_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("versions.nccl")),
                     "ranks with different NCCL versions fail at bootstrap or hang")


@check("cluster_driver_drift")
def cluster_driver_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("versions.driver", "versions.cuda_driver")), "")


@check("cluster_hca_firmware_drift")
def cluster_hca_firmware_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("hcas.", suffix=(".fw",)), drop=(ABSENT,)), "")


@check("cluster_rdma_stack_drift")
def cluster_rdma_stack_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("versions.rdma_core")), "")


@check("cluster_kernel_drift")
def cluster_kernel_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("host.kernel", "host.os")), "")


@check("cluster_net_plugin_drift")
def cluster_net_plugin_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("versions.net_plugin", "versions.tuner_plugin")),
                     "nodes that load different plugins pick different transports or algorithms")


# ---------------------------------------------------------------- node inventory and topology

@check("cluster_gpu_inventory_drift")
def cluster_gpu_inventory_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("gpus.count", "gpus.model", "gpus.nvlinks")), "")


@check("cluster_hca_inventory_drift")
def cluster_hca_inventory_drift(ctx: Context):
    c = _compared(ctx)
    found = _drifts(c, _exact("hcas.count"))
    table, golden = c.table(), c.golden_values()
    for d in _drifts(c, _prefix("hcas.", suffix=(".fw",))):
        if not any(v == ABSENT for v, _ in d.groups):
            continue
        col = {n: None if v is None else ("missing" if v == ABSENT else "present")
               for n, v in table.values[d.key].items()}
        given = golden is not None and d.key in golden and golden[d.key] is not None
        g = ("missing" if golden[d.key] == ABSENT else "present") if given else None
        p = attribute_drift(Attr(d.key, "hcas", d.key.split(".")[1]), col, g, given)
        if p is not None:
            found.append(p)
    yield from _hits(c, found, "fewer NICs means fewer rails: such a node drags every ring to its rate")


@check("cluster_peermem_drift")
def cluster_peermem_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("host.peermem")),
                     "GPUDirect RDMA on one side of a connection only: the nodes without it stage every "
                     "transfer through host memory and every ring runs at their pace")


@check("cluster_iommu_acs_drift")
def cluster_iommu_acs_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("host.iommu", "host.acs", "host.virtual")), "")


@check("cluster_fabric_manager_drift")
def cluster_fabric_manager_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _exact("gpus.fabric_manager")), "")


@check("cluster_topology_drift")
def cluster_topology_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("topology.")), "")


@check("cluster_pcie_link_drift")
def cluster_pcie_link_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("pcie."), drop=(ABSENT,)), "")


# ---------------------------------------------------------------- ports

@check("cluster_port_state_drift")
def cluster_port_state_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("port.", suffix=(".state",)), drop=(ABSENT,)), "")


@check("cluster_link_rate_drift")
def cluster_link_rate_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("port.", suffix=(".rate", ".width")), drop=(ABSENT,)),
                     "a rail trained below its peers caps every ring through it")


@check("cluster_link_layer_drift")
def cluster_link_layer_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("port.", suffix=(".link_layer",)), drop=(ABSENT,)), "")


@check("cluster_mtu_drift")
def cluster_mtu_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("port.", suffix=(".mtu",)), drop=(ABSENT,)), "")


@check("cluster_roce_gid_drift")
def cluster_roce_gid_drift(ctx: Context):
    c = _compared(ctx)
    yield from _hits(c, _drifts(c, _prefix("port.", suffix=(".gid",)), drop=(ABSENT,)),
                     "one NCCL_IB_GID_INDEX cannot fit every node")


# ---------------------------------------------------------------- the NCCL environment

def _env_severity(d: AttrDrift) -> str:
    name = d.key[4:]
    if name in DEBUG_ONLY:
        return "info"
    return "error" if name in MUST_MATCH else "warning"


def _env_fix(d: AttrDrift) -> str:
    name = d.key[4:]
    if d.reference is None:
        return f"Set {name} to one value in the job's environment (or nccl.conf) on every node."
    if d.reference == UNSET:
        return f"Unset {name} on {nodes_text(d.odd)} (check /etc/nccl.conf, ~/.nccl.conf and the job script there)."
    return (f"Set {name}={d.reference} on every node: in the job script exported to all ranks "
            "(srun --export, mpirun -x), or in the same /etc/nccl.conf everywhere.")


@check("cluster_env_drift")
def cluster_env_drift(ctx: Context):
    c = _compared(ctx)
    drifts = _drifts(c, _prefix("env."))
    for d in drifts:
        consequence = ("ranks that disagree on it hang or fail at connect" if d.key[4:] in MUST_MATCH
                       else "set on some nodes only, or to different values")
        yield from _hits(c, [d], consequence, severity=_env_severity, fix=_env_fix)


# ---------------------------------------------------------------- the gather itself

@check("cluster_node_unreachable")
def cluster_node_unreachable(ctx: Context):
    c = _cluster(ctx)
    by_reason: dict[str, list[str]] = {}
    for u in c.unreachable:
        by_reason.setdefault(u.reason, []).append(u.node)
    for reason, nodes in by_reason.items():
        yield Hit(f"{nodes_text(nodes)} did not answer: {reason}; {len(c.nodes)} node(s) answered, and the "
                  "cross-node comparison covers only those",
                  tuple(Evidence(f"{n}: {reason}", "gather") for n in nodes[:8]), subject=nodes[0])


@check("cluster_clock_skew")
def cluster_clock_skew(ctx: Context):
    c = _cluster(ctx)
    bounds = c.clock_offsets
    if len(bounds) < 2:
        raise Skip("no clock readings (they come from a live gather: ncdoc cluster snapshot)")
    mids = sorted((lo + hi) / 2 for lo, hi in bounds.values())
    median = mids[len(mids) // 2]
    skewed = {}
    for node, (lo, hi) in bounds.items():
        # the node is off only if even its most favourable reading is beyond the tolerance
        off = min(abs(lo - median), abs(hi - median)) if not lo <= median <= hi else 0.0
        if off > SKEW_TOLERANCE_S:
            skewed[node] = (lo + hi) / 2 - median
    if skewed:
        names = sorted(skewed)
        worst = max(skewed.values(), key=abs)
        yield Hit(f"the clock of {nodes_text(names)} is {abs(worst):.1f} s {'ahead of' if worst > 0 else 'behind'} "
                  f"the other nodes (tolerance {SKEW_TOLERANCE_S:g} s): log timestamps across ranks will not line "
                  "up, and time-based timeouts and certificates drift",
                  tuple(Evidence(f"{n}: offset {skewed[n]:+.1f} s from the median", "gather") for n in names[:8]),
                  subject=names[0])
