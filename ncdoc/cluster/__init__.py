"""The cluster as the unit: every node gathered, compared, measured and recorded.

    nodes.py       node lists: Slurm hostlists (node[01-04]), hostfiles, validation
    facts.py       ClusterFacts: many nodes' snapshots (and effective NCCL envs), the cluster file
    attributes.py  what is compared across nodes (versions, GPUs, ports, PCIe, env, topology)
    drift.py       the node x attribute drift matrix: reference (majority or golden), odd nodes
    render.py      the drift matrix and cluster findings as text, JSON and markdown
    launch.py      one way to run something on every node: the Launcher interface, its results
    launchers.py   which launcher a command line asks for
    processes.py   local processes with timeouts, process-group cleanup and logs
    slurm.py       srun (and scontrol for drains); mpi.py: mpirun (Open MPI, MPICH/Hydra, Intel MPI);
    ray_nodes.py   Ray: one task per node with node-affinity scheduling
    gather.py      `ncdoc cluster snapshot`: a snapshot per node through a launcher
    bom.py         the acceptance record (bill of materials) and what changed since
    tuning_log.py  the TUNING and per-rank ENV lines NCCL prints
    trust.py       is a measurement what it claims: one job, one NCCL, the env reached NCCL
    bench.py       nccl-tests on a node group through a launcher, parsed and trust-checked
    fabric_sim.py  a simulated fabric with injected faults (slow node, bad rail, flapping, GDR off)
    isolation.py   fault isolation by measurement: per node, per rail, pairwise, full scale
    drain.py       the scheduler lines that take a bad node out (printed; run only when asked)

Everything that reads facts (facts, attributes, drift, render, trust, tuning_log, isolation,
fabric_sim) is pure. Only the launchers and gather touch processes, and only ray_nodes
imports Ray; nothing here is on `ncdoc check`'s path.
"""
