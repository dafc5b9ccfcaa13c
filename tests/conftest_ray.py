"""One local Ray runtime per pytest process, shared by every test that needs it.

ray.init costs seconds, and ray.init and ray.cluster_utils.Cluster cannot share a process,
so tests never start their own: they take `ray_runtime`. It has two node groups
(ncdoc_nodegroup_0/1), which is what ncdoc's RayExecutor schedules trials on.
"""

import logging

import pytest

RAY_GROUPS = 2


@pytest.fixture(scope="session")
def ray_runtime():
    ray = pytest.importorskip("ray")
    from ncdoc.tuner.dispatch import GROUP_PREFIX

    if not ray.is_initialized():
        logging.getLogger("ray").setLevel(logging.ERROR)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 _node_ip_address="127.0.0.1", resources={f"{GROUP_PREFIX}{i}": 1 for i in range(RAY_GROUPS)})
    yield ray
    ray.shutdown()
