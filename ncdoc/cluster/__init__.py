"""The cluster as the unit: every node gathered, compared, measured and recorded.

    nodes.py       node lists: Slurm hostlists (node[01-04]), hostfiles, validation, short names for many
    facts.py       ClusterFacts: many nodes' snapshots (and effective NCCL envs), the cluster file
    attributes.py  what is compared across nodes (versions, GPUs, ports, PCIe, env, topology)
    drift.py       the node x attribute drift matrix: reference (majority or golden), odd nodes
    report.py      `ncdoc cluster check`: the cross-node rules (and each node's own) over ClusterFacts
    render.py      the drift matrix, the check and the test reports as text, JSON and markdown
    launch.py      one way to run something on every node: the Launcher interface, its results
    launchers.py   which launcher a command line asks for
    processes.py   local processes with deadlines, process-group cleanup and logs on disk
    slurm.py       srun; mpi.py: mpirun (Open MPI, MPICH/Hydra, Intel MPI); local.py: this machine alone
    ray_nodes.py   Ray: one task per node with node-affinity scheduling
    ray_start.py   the one place Ray is started or joined (a local instance on 127.0.0.1 only, no dashboard)
    gather.py      `ncdoc cluster snapshot`: a snapshot per node through a launcher
    bom.py         the acceptance record (bill of materials) and what changed since
    tuning_log.py  the TUNING and per-rank ENV lines NCCL prints
    trust.py       is a measurement what it claims: one job, one NCCL, the env reached NCCL
    bench.py       nccl-tests on node groups through a launcher, parsed and trust-checked (the tuner's API)
    measure.py     `ncdoc cluster test`: isolation probes as bench groups, expected figures from snapshots
    fabric_sim.py  a simulated fabric with injected faults (slow node, bad rail, flapping, GDR off)
    isolation.py   fault isolation by measurement: per node, per rail, pairwise, full scale
    drain.py       the scheduler lines that take a bad node out (printed; run only when asked)

Everything that reads facts (facts, attributes, drift, report, render, trust, tuning_log,
isolation, fabric_sim, bom) does no I/O of its own beyond reading the files it is given. Only
the launchers (processes, slurm, mpi, ray_nodes, local) start processes, only ray_nodes and
ray_start import Ray,
and nothing here is on `ncdoc check`'s path.
"""
