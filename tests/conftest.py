from conftest_ray import ray_runtime  # noqa: F401  (one Ray runtime per pytest process)
