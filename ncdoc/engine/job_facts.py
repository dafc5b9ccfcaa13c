"""The job's claims read against the node's facts: how many GPUs a job can use here, and whether
the job spans one node or several.

Two readers: the job checks (ncdoc/checks/job.py) and the engine, which uses the span to judge
rules whose problem matters only between nodes (`scope: multi-node` in rules/*.yaml) as info on
a one-node job. Kept out of ncdoc.checks so the engine can read it without importing a check
module. Pure: it reads the snapshot, never the environment.
"""

from __future__ import annotations

from ncdoc.findings import Skip


def one_node_note(why: str) -> str:
    """Why a `scope: multi-node` finding is info on this job (`why`: the claim saying it is one node)."""
    return f"the job runs on one node ({why}): NCCL does not need the network between nodes"


def claim_text(c) -> str:
    """"SLURM_NNODES=4" for a variable, "--nodes 4" or "config:<file> 8" for ncdoc's own options."""
    return f"{c.source}={c.text}" if not c.source.startswith(("-", "config:")) else f"{c.source} {c.text}"


def gpu_device_nodes(host) -> list[str] | None:
    """/dev/nvidia0, /dev/nvidia1, ...: one per GPU the driver exposes to this process (None: unknown)."""
    if not host.status.known or host.dev_nvidia is None:
        return None
    return [n for n in host.dev_nvidia if n[6:].isdigit() and n.startswith("nvidia")]


def usable_gpus(snap) -> tuple[int, str]:
    """(GPUs a job can use on this node, how that is known); raises Skip when it cannot be told."""
    gpus = snap.gpus
    if gpus.status.state == "ok":
        lost = {f.index for f in gpus.failed}
        total = len({g.index for g in gpus.gpus} | lost)
        text = f"NVML sees {total} GPU(s)"
        if lost:
            text += f", {len(lost)} of them unusable ({', '.join(f'GPU {f.index}: {f.error}' for f in gpus.failed)})"
        return total - len(lost), text
    nodes = gpu_device_nodes(snap.host)
    if gpus.status.state == "absent":
        return 0, f"this node shows no NVIDIA GPU ({gpus.status.reason})"
    if nodes is not None and not nodes:
        return 0, f"this node has no GPU device node, /dev/nvidia0 and up ({gpus.status.reason or 'no NVIDIA driver'})"
    if nodes:
        return len(nodes), f"only {len(nodes)} GPU device node(s) exist in /dev (NVML: {gpus.status.reason})"
    raise Skip(f"GPUs unknown: {gpus.status.reason}")


def job_span(snap) -> tuple[bool | None, str]:
    """(True, why) when the job spans several nodes, (False, why) when one, (None, "") when nothing says.

    A node count (SLURM_NNODES, SLURM_JOB_NUM_NODES, a hostlist, NNODES, --nodes) decides, the largest
    one stated; else the job's ranks (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE) against the ranks on
    this node (LOCAL_WORLD_SIZE, ...) or, without those, against the GPUs a job can use here."""
    job = snap.job
    if not job.status.known:
        return None, ""
    nodes = [c for c in job.nodes if c.value > 0]      # "0 nodes" states nothing
    if nodes:
        top = max(nodes, key=lambda c: c.value)
        return top.value > 1, claim_text(top)
    if job.ranks:
        ranks = max(job.ranks, key=lambda c: c.value)
        if job.local_ranks:
            local = max(job.local_ranks, key=lambda c: c.value)
            return ranks.value > local.value, f"{claim_text(ranks)} with {claim_text(local)}"
        try:
            have, _ = usable_gpus(snap)
        except Skip:
            return None, ""
        if have:
            return ranks.value > have, f"{claim_text(ranks)} ranks, {have} GPU(s) on this node"
    return None, ""


__all__ = ["one_node_note", "claim_text", "gpu_device_nodes", "usable_gpus", "job_span"]
