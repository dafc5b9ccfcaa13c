"""The job's claims: what its launcher's variables and ncdoc's options say it was given."""

from __future__ import annotations

import pytest

from ncdoc.probes.job import claims_from, device_list, hostlist_size, probe_job, slurm_gpu_ids, with_options
from ncdoc.snapshot import JobSection


def _by_source(claims):
    return {c.source: c.value for c in claims}


def test_slurm_job_as_a_prolog_and_a_step_see_it():
    job = probe_job({"SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7", "SLURM_STEP_GPUS": "4-7",
                     "SLURM_NNODES": "4", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NODELIST": "gpu[01-03],gpu07",
                     "HOME": "/root"})
    assert job.status.state == "ok"
    assert _by_source(job.gpus) == {"SLURM_GPUS_ON_NODE": 8, "SLURM_JOB_GPUS": 8, "SLURM_STEP_GPUS": 4}
    assert _by_source(job.nodes) == {"SLURM_NNODES": 4, "SLURM_JOB_NUM_NODES": 4, "SLURM_JOB_NODELIST": 4}
    step = next(c for c in job.gpus if c.source == "SLURM_STEP_GPUS")
    assert step.items == ("4", "5", "6", "7") and step.text == "4-7"
    assert job.ignored == ()


def test_launchers_ranks():
    job = probe_job({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "OMPI_COMM_WORLD_SIZE": "32",
                     "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "NNODES": "2"})
    assert _by_source(job.ranks) == {"WORLD_SIZE": 16, "OMPI_COMM_WORLD_SIZE": 32}
    assert _by_source(job.local_ranks) == {"LOCAL_WORLD_SIZE": 8, "OMPI_COMM_WORLD_LOCAL_SIZE": 8}
    assert _by_source(job.nodes) == {"NNODES": 2}


@pytest.mark.parametrize("name, text, items", [
    ("CUDA_VISIBLE_DEVICES", "0,1,2,3", ("0", "1", "2", "3")),
    ("CUDA_VISIBLE_DEVICES", "GPU-8f1e,GPU-22aa", ("GPU-8f1e", "GPU-22aa")),
    ("CUDA_VISIBLE_DEVICES", "0,1,-1,2", ("0", "1")),            # CUDA stops at the first non-device
    ("CUDA_VISIBLE_DEVICES", "", ()),
    ("CUDA_VISIBLE_DEVICES", "-1", ()),
    ("CUDA_VISIBLE_DEVICES", "NoDevFiles", ()),                    # what Slurm sets when it gave no GPU
    ("NVIDIA_VISIBLE_DEVICES", "all", None),                       # every GPU of the host: no count
    ("NVIDIA_VISIBLE_DEVICES", "void", ()),
    ("NVIDIA_VISIBLE_DEVICES", "0,3", ("0", "3")),
    ("CUDA_VISIBLE_DEVICES", "0,,1", None),
])
def test_device_lists(name, text, items):
    assert device_list(name, text) == items


def test_slurm_gpu_ids_and_hostlists():
    assert slurm_gpu_ids("0,2-4") == ("0", "2", "3", "4")
    assert slurm_gpu_ids("0,x") is None
    assert hostlist_size("node1") == 1
    assert hostlist_size("gpu[01-04,07],login1") == 6
    assert hostlist_size("rack[1-2]-gpu[1-4]") == 8
    assert hostlist_size("gpu[01-") is None and hostlist_size("gpu[4-1]") is None


def test_values_that_are_no_counts_are_kept_aside_with_the_reason():
    found, ignored = claims_from({"SLURM_GPUS_ON_NODE": "eight", "SLURM_NNODES": "4(x2)", "WORLD_SIZE": "-1",
                                  "CUDA_VISIBLE_DEVICES": "0,,1", "NVIDIA_VISIBLE_DEVICES": "all"})
    assert all(not v for v in found.values())
    assert sorted(ignored) == ["CUDA_VISIBLE_DEVICES='0,,1' is not a list of GPUs",
                               "SLURM_GPUS_ON_NODE='eight' is not a count", "SLURM_NNODES='4(x2)' is not a count",
                               "WORLD_SIZE='-1' is not a count"]


def test_ncdocs_own_options_are_claims_too_and_join_a_snapshots():
    job = probe_job({"SLURM_GPUS_ON_NODE": "8"}, expect_gpus=8, nodes=2, config_gpus=("/etc/ncdoc.toml", 8))
    assert [c.source for c in job.gpus] == ["SLURM_GPUS_ON_NODE", "config:/etc/ncdoc.toml", "--expect-gpus"]
    assert _by_source(job.nodes) == {"--nodes": 2}
    old = JobSection()                                    # a snapshot taken before ncdoc read the job
    assert not old.status.known
    added = with_options(old, expect_gpus=4)
    assert added.status.known and _by_source(added.gpus) == {"--expect-gpus": 4}
    assert with_options(old) is old
