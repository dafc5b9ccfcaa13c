"""One local Ray runtime per pytest process, shared by every test that needs it.

ray.init costs seconds, and ray.init and ray.cluster_utils.Cluster cannot share a process,
so tests never start their own: they take `ray_runtime`. It has two node groups
(ncdoc_nodegroup_0/1), which is what ncdoc's RayExecutor schedules trials on.
"""

import pytest

RAY_GROUPS = 2


@pytest.fixture(scope="session")
def ray_runtime():
    ray = pytest.importorskip("ray")
    from ncdoc.cluster.ray_start import start
    from ncdoc.tuner.dispatch import GROUP_PREFIX

    # The project's one Ray starter, as every command uses it (loopback only, no dashboard).
    start(None, num_cpus=2, resources={f"{GROUP_PREFIX}{i}": 1 for i in range(RAY_GROUPS)})
    yield ray
    ray.shutdown()
