"""Rules whose problem matters only between nodes (`scope: multi-node`): on a job known to run on one
node their findings are info, saying why and what they would be otherwise; with nothing saying how
many nodes the job spans, or on a multi-node job, they keep their severity. Run evidence is judged
by what the run printed, never softened by the job about to start."""

from __future__ import annotations

import pytest

from ncdoc.engine import cases as rule_cases, packs, ruleset
from ncdoc.engine.job_facts import job_span
from ncdoc.engine.rules import Context, Rule, run_rules
from ncdoc.errors import InputError
from ncdoc.findings import Evidence, Hit
from ncdoc.snapshot import JobClaim, JobSection, Status

RULES = ruleset.load(from_sources=True)


def _claims(**kinds) -> JobSection:
    return JobSection(status=Status.ok("env"), **{k: tuple(JobClaim(s, v, str(v)) for s, v in claims)
                                                   for k, claims in kinds.items()})


def _snap(job: JobSection | None = None, example: str = "dgx-h100"):
    snap = rule_cases.fixture(example)
    return snap.replace(job=job) if job is not None else snap


def _demo(ctx):
    yield Hit("a port is down", (Evidence("mlx5_4 port 1: DOWN", "hcas"),), subject="mlx5_4:1")
    yield Hit("NCCL_NET names an absent plugin", subject="NCCL_NET", scope="any")


def _run(job: JobSection | None, **rule):
    rule = Rule(code="NC4998", name="demo-port", severity="error", summary="s", checks=("demo",),
                scope=rule.pop("scope", "multi-node"), **rule)
    return run_rules(Context(snapshot=_snap(job)), [rule], checks={"demo": _demo})


def test_a_one_node_job_sees_network_findings_as_info_with_the_reason():
    report = _run(_claims(nodes=[("SLURM_NNODES", 1)]))
    by = {f.subject: f for f in report.findings}
    port, net = by["mlx5_4:1"], by["NCCL_NET"]
    assert (port.severity, port.original_severity) == ("info", "error")
    assert port.note == "the job runs on one node (SLURM_NNODES=1): NCCL does not need the network between nodes"
    assert port.message.startswith("a port is down [error on a multi-node job; info here: the job runs on one node")
    assert port.to_dict()["downgraded"] == {"from": "error", "reason": port.note}
    # a hit of the rule that breaks any job (scope: any) keeps its severity
    assert (net.severity, net.original_severity, net.subject) == ("error", "", "NCCL_NET")
    assert "downgraded" not in net.to_dict()
    assert report.fails("error")                 # by the NCCL_NET hit alone


@pytest.mark.parametrize("job", [
    None,                                                           # the fixture's job: nothing stated
    _claims(nodes=[("SLURM_NNODES", 2)]),
    _claims(nodes=[("SLURM_NNODES", 1), ("--nodes", 4)]),            # the largest count stated decides
    _claims(ranks=[("WORLD_SIZE", 16)]),                            # 16 ranks, 8 GPUs here
    _claims(ranks=[("OMPI_COMM_WORLD_SIZE", 8)], local_ranks=[("OMPI_COMM_WORLD_LOCAL_SIZE", 4)]),
    _claims(nodes=[("SLURM_NNODES", 0)]),                           # "0 nodes" says nothing
], ids=["unknown", "two-nodes", "largest-count", "ranks-beyond-gpus", "ranks-beyond-local", "zero"])
def test_findings_keep_their_severity_unless_the_job_is_known_to_be_one_node(job):
    report = _run(job)
    assert {f.severity for f in report.findings} == {"error"}
    assert not any(f.original_severity for f in report.findings)


@pytest.mark.parametrize("job, why", [
    (_claims(nodes=[("NNODES", 1)]), "NNODES=1"),
    (_claims(nodes=[("--nodes", 1)]), "--nodes 1"),
    (_claims(ranks=[("WORLD_SIZE", 8)]), "WORLD_SIZE=8 ranks, 8 GPU(s) on this node"),
    (_claims(ranks=[("WORLD_SIZE", 4)], local_ranks=[("LOCAL_WORLD_SIZE", 4)]),
     "WORLD_SIZE=4 with LOCAL_WORLD_SIZE=4"),
])
def test_what_says_a_job_is_one_node(job, why):
    assert job_span(_snap(job)) == (False, why)


def test_a_rule_without_scope_is_never_softened():
    report = _run(_claims(nodes=[("SLURM_NNODES", 1)]), scope="any")
    assert {f.severity for f in report.findings} == {"error"}


def test_an_info_finding_stays_as_it_is():
    rule = Rule(code="NC4997", name="demo-info", severity="info", summary="s", checks=("demo",), scope="multi-node")
    report = run_rules(Context(snapshot=_snap(_claims(nodes=[("SLURM_NNODES", 1)]))), [rule], checks={"demo": _demo})
    assert all(f.severity == "info" and not f.original_severity for f in report.findings)


def test_a_severity_override_is_what_gets_softened():
    rule = Rule(code="NC4996", name="demo-warn", severity="error", summary="s", checks=("demo",), scope="multi-node")
    ctx = Context(snapshot=_snap(_claims(nodes=[("SLURM_NNODES", 1)])))
    report = run_rules(ctx, [rule], checks={"demo": _demo}, severity_overrides={"NC4996": "warning"})
    port = next(f for f in report.findings if f.subject == "mlx5_4:1")
    assert (port.severity, port.original_severity) == ("info", "warning")


def test_scope_is_validated_in_the_pack():
    pack = ("pack: demo\nrules:\n  - code: NC4999\n    name: demo\n    severity: error\n    stage: settings\n"
            "    scope: one-node\n    summary: s\n    why: w\n    fix: f\n    references: []\n"
            "    check: demo\n    example: {expect: []}\n")
    with pytest.raises(InputError, match=r"scope: 'one-node' is not one of any, multi-node"):
        packs.parse_pack(pack, "demo.yaml")


# The audit of every rule: what only matters between nodes, and what would break a one-node job too.
MULTI_NODE = {
    "ib-disabled-by-env", "socket-threads-product", "ib-timeout-infinite", "nsocks-without-threads",
    "gid-index-ignored-on-ib",
    "ib-hca-unknown-device", "ib-hca-prefix-match", "ib-hca-includes-down-port", "nic-count-limited",
    "socket-ifname-loopback", "socket-ifname-virtual", "roce-gid-link-local", "roce-gid-v1",
    "roce-gid-index-unset", "gdr-level-excludes-nic", "roce-gid-table-sparse",
    "nccl-peermem-detection-bug", "gpu-without-local-nic",
    "no-rdma-devices", "peermem-not-loaded", "port-down", "link-below-rated-speed", "mixed-link-layers",
    "link-errors", "roce-mtu-mismatch", "multi-node-job-without-rdma",
}
# NCCL's init fails, or the GPUs' own paths suffer, on one node as well: never softened.
BREAKS_ONE_NODE = {
    "fewer-gpus-than-allocated", "nvml-init-failed", "driver-library-mismatch", "gpu-in-bad-state",
    "probe-timed-out", "nvlink-inactive", "fabric-manager", "gpu-p2p-blocked", "p2p-disabled", "acs-enabled",
    "socket-ifname-no-match", "net-ib-with-ib-disabled", "net-plugin-missing", "invalid-value",
    "iommu-translation-enabled", "virtual-topology", "comm-id-overrides-ifname",
}


def test_the_network_only_rules_are_marked_and_nothing_that_breaks_one_node_is():
    marked = {r.name for r in RULES if r.scope == "multi-node"}
    assert marked == MULTI_NODE
    assert not marked & BREAKS_ONE_NODE


def test_every_multi_node_rule_judges_the_node():
    # run evidence says itself whether the run spanned nodes: scope is for what the node check reports
    from ncdoc.engine.rules import reads_node
    assert all(reads_node(r) for r in RULES if r.scope == "multi-node")
