"""What the job about to start expects of this node: its GPUs, nodes and ranks, from the variables
its launcher set (Slurm, Open MPI, torchrun, the container runtime) and from ncdoc's own options.

Read once, here, into the Snapshot's job section; rules compare these claims with the node and
never read the environment themselves. Each claim keeps its source, so a finding can say
"SLURM_GPUS_ON_NODE=8 but NVML sees 7 GPUs".

GPUs given to the job on this node:
    SLURM_GPUS_ON_NODE=8                      a count
    SLURM_JOB_GPUS=0,1,2,3 / SLURM_STEP_GPUS  the GPU indices Slurm allocated (a list)
    CUDA_VISIBLE_DEVICES=0,1 / GPU-<uuid>,... the devices CUDA may use (a list; "" or -1: none)
    NVIDIA_VISIBLE_DEVICES=0,1                the container runtime's list ("all" and "void" state no count)
    --expect-gpus N, the config's expect-gpus
Nodes the job spans: SLURM_NNODES, SLURM_JOB_NUM_NODES, SLURM_JOB_NODELIST (a hostlist:
"gpu[01-04]" is 4), NNODES (torchrun scripts), --nodes N.
Ranks: WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE; on this node: LOCAL_WORLD_SIZE,
OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS.
"""

from __future__ import annotations

from ncdoc.snapshot import (JOB_GPU_COUNTS as GPU_COUNTS, JOB_GPU_LISTS as GPU_LISTS,
                            JOB_LOCAL_RANK_COUNTS as LOCAL_RANK_COUNTS, JOB_NODE_COUNTS as NODE_COUNTS,
                            JOB_NODE_LISTS as NODE_LISTS, JOB_RANK_COUNTS as RANK_COUNTS,
                            JOB_VARIABLES as VARIABLES, JobClaim, JobSection, Status)

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Mapping



def count(text: str) -> int | None:
    """A non-negative decimal count ("8", " 8 "); None for anything else."""
    t = text.strip()
    return int(t) if t.isdigit() and t.isascii() else None


def device_list(name: str, text: str) -> tuple[str, ...] | None:
    """The entries of a GPU list variable; None when it states no count ("all", unparsable)."""
    t = text.strip()
    if name == "NVIDIA_VISIBLE_DEVICES":
        if t in ("all", ""):
            return None                     # every GPU of the host: no count to hold the node to
        if t in ("void", "none"):
            return ()
    if name == "CUDA_VISIBLE_DEVICES":
        if t == "" or t.startswith("-1") or t == "NoDevFiles":
            return ()                       # CUDA sees no device (Slurm writes NoDevFiles when it gave none)
    if not t:
        return ()
    items = tuple(x.strip() for x in t.split(","))
    if any(not x for x in items):
        return None
    if name == "CUDA_VISIBLE_DEVICES":
        # CUDA stops at the first entry that is no device ("0,1,-1,2" makes two GPUs visible)
        cut = next((i for i, x in enumerate(items) if x.startswith("-")), len(items))
        items = items[:cut]
    return items


def slurm_gpu_ids(text: str) -> tuple[str, ...] | None:
    """SLURM_JOB_GPUS / SLURM_STEP_GPUS: "0,1,2,3" (older Slurm writes ranges: "0-3")."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        if dash and count(lo) is not None and count(hi) is not None and int(lo) <= int(hi):
            out += [str(i) for i in range(int(lo), int(hi) + 1)]
        elif count(part) is not None:
            out.append(part)
        else:
            return None
    return tuple(out)


def hostlist_size(text: str) -> int | None:
    """How many hosts a Slurm hostlist names: "gpu[01-04,07],login1" -> 6; None when malformed."""
    total, i, n = 0, 0, len(text)
    while i < n:
        start = i
        ranges = None
        while i < n and text[i] != ",":
            if text[i] == "[":
                close = text.find("]", i)
                if close < 0:
                    return None
                size = _range_size(text[i + 1:close])
                if size is None:
                    return None
                ranges = size if ranges is None else ranges * size
                i = close + 1
            else:
                i += 1
        if i > start:
            total += ranges if ranges is not None else 1
        i += 1
    return total or None


def _range_size(text: str) -> int | None:
    size = 0
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        if dash:
            if count(lo) is None or count(hi) is None or int(lo) > int(hi):
                return None
            size += int(hi) - int(lo) + 1
        elif count(part) is not None:
            size += 1
        else:
            return None
    return size


def claims_from(environ: Mapping[str, str]) -> tuple[dict[str, list[JobClaim]], list[str]]:
    """{"gpus": [...], "nodes": [...], "ranks": [...], "local_ranks": [...]} from the launcher's
    variables, and the variables that were set to something that is not a count."""
    out: dict[str, list[JobClaim]] = {"gpus": [], "nodes": [], "ranks": [], "local_ranks": []}
    ignored: list[str] = []

    def bad(name: str, text: str, what: str) -> None:
        ignored.append(f"{name}={text!r} is not {what}")

    for kind, names in (("gpus", GPU_COUNTS), ("nodes", NODE_COUNTS), ("ranks", RANK_COUNTS),
                        ("local_ranks", LOCAL_RANK_COUNTS)):
        for name in names:
            text = environ.get(name)
            if text is None:
                continue
            value = count(text)
            if value is None:
                bad(name, text, "a count")
            else:
                out[kind].append(JobClaim(source=name, value=value, text=text))
    for name in GPU_LISTS:
        text = environ.get(name)
        if text is None:
            continue
        items = slurm_gpu_ids(text) if name.startswith("SLURM_") else device_list(name, text)
        if items is None:
            if not (name == "NVIDIA_VISIBLE_DEVICES" and text.strip() in ("all", "")):
                bad(name, text, "a list of GPUs")
            continue
        out["gpus"].append(JobClaim(source=name, value=len(items), text=text, items=items))
    for name in NODE_LISTS:
        text = environ.get(name)
        if text is None:
            continue
        size = hostlist_size(text)
        if size is None:
            bad(name, text, "a Slurm hostlist")
        else:
            out["nodes"].append(JobClaim(source=name, value=size, text=text))
    return out, ignored


def probe_job(environ: Mapping[str, str], *, expect_gpus: int | None = None, nodes: int | None = None,
              config_gpus: tuple[str, int] | None = None) -> JobSection:
    """The job section: the environment's claims, then ncdoc's options (--expect-gpus, --nodes, the
    config file's expect-gpus as (config path, count))."""
    found, ignored = claims_from(environ)
    job = JobSection(status=Status.ok(source="env"), gpus=tuple(found["gpus"]), nodes=tuple(found["nodes"]),
                     ranks=tuple(found["ranks"]), local_ranks=tuple(found["local_ranks"]), ignored=tuple(ignored))
    return with_options(job, expect_gpus=expect_gpus, nodes=nodes, config_gpus=config_gpus)


def with_options(job: JobSection, *, expect_gpus: int | None = None, nodes: int | None = None,
                 config_gpus: tuple[str, int] | None = None) -> JobSection:
    """`job` (possibly from a snapshot file) with ncdoc's own options added as claims."""
    gpus: list[JobClaim] = list(job.gpus)
    node_claims: list[JobClaim] = list(job.nodes)
    if config_gpus is not None:
        path, value = config_gpus
        gpus.append(JobClaim(source=f"config:{path}", value=value, text=str(value)))
    if expect_gpus is not None:
        gpus.append(JobClaim(source="--expect-gpus", value=expect_gpus, text=str(expect_gpus)))
    if nodes is not None:
        node_claims.append(JobClaim(source="--nodes", value=nodes, text=str(nodes)))
    if len(gpus) == len(job.gpus) and len(node_claims) == len(job.nodes):
        return job
    status = job.status if job.status.known else Status.ok(source="options")
    return JobSection(status=status, gpus=tuple(gpus), nodes=tuple(node_claims), ranks=job.ranks,
                      local_ranks=job.local_ranks, ignored=job.ignored)


__all__ = ["probe_job", "with_options", "claims_from", "hostlist_size", "device_list", "slurm_gpu_ids", "VARIABLES"]
