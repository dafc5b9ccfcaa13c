"""Run as a script (a process of its own: ray.cluster_utils.Cluster and ray.init cannot share one):
three raylets named node01..node03 by their ncdoc_host_<name> resource, a gather through
RayLauncher in which node03 is removed while its agent is still working. Prints a JSON result."""

import json
import os
import sys
import threading
import time

from ray.cluster_utils import Cluster

import ray


def main(log_dir: str) -> None:
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={
        "num_cpus": 1, "resources": {"ncdoc_host_node01": 1}, "include_dashboard": False})
    workers = {name: cluster.add_node(num_cpus=1, resources={f"ncdoc_host_{name}": 1}) for name in ("node02", "node03")}
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    from ncdoc.cluster.gather import gather
    from ncdoc.cluster.ray_nodes import RayLauncher
    launcher = RayLauncher()
    nodes = launcher.nodes()
    first = gather(launcher, nodes, agent=["ncdoc-fixture-node"], timeout_s=20, log_dir=os.path.join(log_dir, "a"))
    # from now on node03's agent takes 6 s (the fixture agent reads the fault file live); the node goes
    # away after 2
    with open(os.environ["NCDOC_STANDIN_FAULTS"], "w") as fh:
        json.dump({"nodes": 3, "faults": {"node03": {"agent": "slow:6"}}}, fh)
    threading.Timer(2.0, lambda: cluster.remove_node(workers["node03"], allow_graceful=False)).start()
    t0 = time.monotonic()
    second = gather(launcher, nodes, agent=["ncdoc-fixture-node"], timeout_s=20, log_dir=os.path.join(log_dir, "b"))
    print("RESULT " + json.dumps({"nodes": nodes, "first": sorted(first.nodes), "first_unreachable": [u.node for u in first.unreachable],
                      "second": sorted(second.nodes),
                      "second_unreachable": {u.node: [u.kind, u.reason] for u in second.unreachable},
                      "second_s": time.monotonic() - t0,
                      "offsets": sorted(first.clock_offsets)}))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
