"""`ncdoc tune`: search NCCL settings with an Optuna study; trials on the simulator (in process or on
Ray) or on the cluster through its launchers (srun, mpirun, Ray, this machine)."""

from __future__ import annotations

import argparse
import json
import sys

from ncdoc.errors import UsageError

NAME = "tune"
HELP = "search NCCL env settings for a workload (Optuna study; trials through srun, mpirun or Ray) and write nccl.env"
DESCRIPTION = """\
Measure the current environment (the baseline), then search NCCL variables for the chosen
workload: each variable's values alone first (screening), then one variable at a time on top
of the best so far (refinement), then a search over the ones that moved the score (Optuna, TPE
by default), stopping clearly worse trials after their first run. The best candidates are measured again against the baseline in shuffled rounds and must
clear both a t bound and Wilcoxon's test; the winner is reduced to the variables that matter
(leave-one-out, repeated until nothing drops); where the backend can load a tuner table,
per-size algorithm/protocol choices are probed; last, the guard sweep measures the final env
(and table) against the baseline on small sizes and every collective the job runs, and any
size slower beyond noise rejects it.

Only what `ncdoc lint` passes for the NCCL version in use is searched and written: no global
NCCL_ALGO or NCCL_PROTO, no thread or CTA counts, no value equal to NCCL's default.

Writes to --out (default ./ncdoc-tune): nccl.env (shell export lines), other formats on
request, nccl_tuner.conf (for NCCL's example tuner plugin; only when confirmed), EXPLAIN.md,
summary.json and the study itself (study.journal; open it with optuna-dashboard, where the
objective is named busbw_vs_baseline); with --format html also report.html, the tuning story on
one page. Ctrl-C keeps the study: run the same command with --resume to continue it. A simulated tune says SIMULATED in
every file: rerun it with --backend nccl-tests before deploying.

backends:
  sim         the simulator (the default where no GPU is present): say which cluster with
              --preset, or --snapshot / --example with --nodes and fabric flags
  nccl-tests  runs all_reduce_perf etc. (--nccl-tests-dir); --tuner-plugin for tables
  torch       a torch.distributed benchmark (nccl-tests' flags and format), one process per GPU

The real backends launch like ncdoc cluster (--launcher): srun inside an allocation, mpirun for
--hosts / --hostfile (--launcher-args are passed as given), Ray for --ray-address, else this
machine alone. Every run has NCCL's INFO log and is trust-checked: a trial whose ranks did not
form one job, whose env did not reach NCCL on every rank, or whose nodes ran different envs is
rejected with the reason; NCCL's own algorithm/protocol/channels come from its TUNING lines (the
tuner table's base). With --nodes N below the nodes reached, trials run on groups of N placed by
leaf switch (--topology, or scontrol show topology), after a health gate (a group with a bad node
is not used), each group with its own baseline; the result is then checked once on every healthy
node (--full-scale-rounds). Logs of every run go under OUT/trials and OUT/trials/health.

examples:
  ncdoc tune --preset h100-roce-8node --trials 40
  ncdoc tune --example dgx-h100 --nodes 4 --fabric roce --leaf-nodes 2 --profile moe-alltoall
  ncdoc tune --backend nccl-tests --nccl-tests-dir ~/nccl-tests/build --gpus-per-node 8
  salloc -N 16 ncdoc tune --backend nccl-tests --nccl-tests-dir /shared/nccl-tests/build --nodes 2 \
      --launcher-args="--mpi=pmix" --tuner-plugin /shared/libnccl-tuner-example.so
  ncdoc tune --preset h100-ib-2node --storage /shared/ncdoc.journal --resume
"""


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return v


def _study_name(text: str) -> str:
    # the name goes into every output's header and the storage's records: one printable line
    if not text or not text.isprintable() or len(text) > 200:
        raise argparse.ArgumentTypeError("must be 1-200 printable characters (no newline or control character)")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ncdoc.tuner.space import COLLECTIVES, FABRICS

    parser.add_argument("--backend", choices=("sim", "nccl-tests", "torch"),
                        help="what runs a trial (default: sim where no GPU is present, else nccl-tests)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="the node's snapshot (ncdoc snapshot -o FILE)")
    src.add_argument("--example", metavar="NAME", help="a bundled example machine as the node")
    src.add_argument("--preset", metavar="NAME", help="a simulator cluster preset (e.g. h100-roce-2node)")
    parser.add_argument("--nodes", type=_positive_int,
                        help="nodes per trial (sim: default the preset's, else 2; real backends: default every "
                             "node reached, fewer tunes on node groups of that size)")
    fab = parser.add_argument_group("simulated fabric (sim backend)")
    fab.add_argument("--fabric", choices=FABRICS, help="network between nodes")
    fab.add_argument("--nic-gbps", type=float, metavar="GBPS", help="rate of each NIC, Gb/s")
    fab.add_argument("--nics-per-node", type=_positive_int, metavar="N")
    fab.add_argument("--ecmp-paths", type=int, metavar="N", help="spine paths RoCE flows hash onto (0: no hashing)")
    fab.add_argument("--leaf-nodes", type=int, metavar="N",
                     help="nodes under one leaf switch: traffic between leaves crosses the spine (0: one leaf)")
    fab.add_argument("--switch-ar", action="store_true", default=None,
                     help="the RoCE switches do adaptive routing")
    fab.add_argument("--congestion", type=float, metavar="X",
                     help="background congestion, 0..1 (a stress test: healthy fabrics have none)")
    fab.add_argument("--noise", type=float, metavar="SIGMA", help="measurement noise (log-normal sigma)")
    fab.add_argument("--sim-failures", choices=("report", "emulate"), default="report",
                     help="emulate: a simulated hang really hangs and a crash kills the worker (rehearses timeouts)")
    st = parser.add_argument_group("study")
    st.add_argument("--trials", type=_positive_int, default=30, help="measured trials (default 30)")
    st.add_argument("--repeats", type=_positive_int, default=2,
                    help="runs per trial at most, median counts; clearly worse trials stop after one (default 2)")
    st.add_argument("--profile", metavar="NAME",
                    help="workload profile: dp-allreduce (default), moe-alltoall, latency, fsdp")
    st.add_argument("--collectives", type=_csv, metavar="LIST",
                    help=f"measure these collectives ({', '.join(COLLECTIVES)})")
    st.add_argument("--space", metavar="FILE", help="your own search space (YAML; see tuners/spaces/ib.yaml)")
    st.add_argument("--sampler", default="tpe", choices=("tpe", "random", "grid", "cmaes", "qmc"))
    st.add_argument("--storage", metavar="URL",
                    help="Optuna storage: sqlite:///f.db, postgresql://..., a journal file (*.log, *.journal) "
                         "on shared disk, or memory (nothing kept, no --resume) (default: OUT/study.journal)")
    st.add_argument("--study-name", default="ncdoc-tune", type=_study_name)
    st.add_argument("--resume", action="store_true", help="continue the study of the same name")
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--top-k", type=int, default=2, help="candidates re-measured against the baseline (default 2)")
    st.add_argument("--confirm-pairs", type=int, default=6,
                    help="rounds of each re-measurement against the baseline, order shuffled per round (default 6)")
    st.add_argument("--replicate", action="store_true",
                    help="run the final comparison on a second node group too; both must agree")
    st.add_argument("--min-gain", type=float, default=1.0, metavar="PCT",
                    help="smallest gain worth recommending, percent (default 1)")
    run = parser.add_argument_group("dispatch")
    run.add_argument("--ray-address", metavar="ADDR", help="join this Ray cluster (default: start a local one)")
    run.add_argument("--groups", type=_positive_int, metavar="N",
                     help="node groups, i.e. trials at once (local default: 2 for sim, else 1)")
    run.add_argument("--timeout", type=float, metavar="SEC",
                     help="per measurement; a trial past it is killed and recorded as failed (default 60 sim, 600)")
    run.add_argument("--nccl-tests-dir", metavar="DIR", help="folder with all_reduce_perf etc.")
    run.add_argument("--gpus-per-node", type=_positive_int, metavar="N")
    run.add_argument("--tuner-plugin", metavar="PATH",
                     help="NCCL's libnccl-tuner-example.so: lets real backends measure tuner tables")
    lau = parser.add_argument_group("launcher (nccl-tests and torch backends)")
    lau.add_argument("--launcher", choices=("slurm", "mpirun", "ray", "local"),
                     help="how to reach the nodes (default: ray with --ray-address, slurm inside an allocation, "
                          "mpirun with --hosts/--hostfile, else local: this machine)")
    lau.add_argument("--hosts", type=_csv, metavar="LIST", help="the nodes: names or Slurm hostlists (gpu[01-16])")
    lau.add_argument("--hostfile", metavar="FILE", help="the nodes, from an Open MPI or MPICH hostfile")
    lau.add_argument("--launcher-cmd", metavar="PATH", help="the srun or mpirun to use (default: on PATH)")
    lau.add_argument("--mpirun", default="mpirun", metavar="CMD", help=argparse.SUPPRESS)
    lau.add_argument("--launcher-args", action="append", default=[], metavar="ARGS",
                     help="passed to srun/mpirun as given (write it with '='): --launcher-args=\"--mpi=pmix\" "
                          "(repeatable)")
    lau.add_argument("--mpi-flavour", choices=("openmpi", "hydra", "intel"),
                     help="mpirun's flags (default: asked from mpirun --version)")
    lau.add_argument("--topology", metavar="FILE",
                     help="leaf switches for placing node groups (Slurm topology.conf form; default: scontrol show "
                          "topology inside an allocation)")
    lau.add_argument("--health-gate", metavar="SCALES",
                     help="isolation scales run first over every node (default node,pair; 'off' for none)")
    lau.add_argument("--full-scale-rounds", type=int, default=3, metavar="N",
                     help="after tuning on node groups, rounds of the final env against the baseline on every "
                          "healthy node (default 3; 0: off)")
    lau.add_argument("--torch-python", metavar="PATH", help="the Python the torch backend's ranks run (default: this)")
    lau.add_argument("--iters", type=_positive_int, metavar="N",
                     help="benchmark iterations per size (default: scaled by size, sizes run in at most two bands)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", default="ncdoc-tune", metavar="DIR", help="output folder (default ./ncdoc-tune)")
    out.add_argument("--format", dest="formats", action="append", type=_csv, metavar="FMT",
                     help="also write the env as: sh, dotenv, nccl.conf, slurm, k8s, json; html: the tuning story "
                          "as one self-contained page, OUT/report.html (repeatable)")
    out.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def options_from_args(args: argparse.Namespace):
    from ncdoc.tuner.run import TuneOptions

    fabric = {"fabric": args.fabric, "nic_rate_gbps": args.nic_gbps, "nics_per_node": args.nics_per_node,
              "ecmp_paths": args.ecmp_paths, "leaf_nodes": args.leaf_nodes, "switch_ar": args.switch_ar,
              "congestion": args.congestion, "noise_sigma": args.noise}
    formats = tuple(f for group in (args.formats or ()) for f in group if f != "html")   # html: after the run
    if args.min_gain < 0:
        raise UsageError("--min-gain must not be negative")
    return TuneOptions(
        backend=args.backend, preset=args.preset, snapshot=args.snapshot, example=args.example, nodes=args.nodes,
        fabric={k: v for k, v in fabric.items() if v is not None}, trials=args.trials, repeats=args.repeats,
        profile=args.profile, collectives=args.collectives or (), space=args.space, sampler=args.sampler,
        storage=args.storage, study_name=args.study_name, resume=args.resume, ray_address=args.ray_address,
        groups=args.groups, timeout_s=args.timeout, out=args.out, seed=args.seed, formats=formats or ("sh",),
        top_k=args.top_k, confirm_pairs=args.confirm_pairs, min_gain=args.min_gain / 100.0,
        nccl_tests_dir=args.nccl_tests_dir, gpus_per_node=args.gpus_per_node, hosts=args.hosts or (),
        mpirun=args.mpirun, sim_failures=args.sim_failures, replicate=args.replicate, tuner_plugin=args.tuner_plugin,
        launcher=args.launcher, hostfile=args.hostfile, launcher_cmd=args.launcher_cmd,
        launcher_args=tuple(args.launcher_args), mpi_flavour=args.mpi_flavour, topology=args.topology,
        health_gate=args.health_gate, full_scale_rounds=args.full_scale_rounds, torch_python=args.torch_python,
        iters=args.iters)


def _interrupted(exc: BaseException | None) -> bool:
    """Ctrl-C, also when it landed inside a storage commit (Optuna re-raises it as StorageInternalError)."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def run(args: argparse.Namespace) -> int:
    from ncdoc.tuner.progress import Progress
    from ncdoc.tuner.run import run_tune

    opts = options_from_args(args)
    progress = Progress(sys.stderr)
    try:
        result = run_tune(opts, progress=progress)
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        progress.finish()
        progress.note("interrupted; the study is saved: run the same command with --resume to continue it")
        raise KeyboardInterrupt from None
    page = _write_page(args.out) if _wants_html(args) else None
    if args.json:
        doc = result.to_json()
        if page:
            doc["files"] = {**doc.get("files", {}), "html": page}
        print(json.dumps(doc, indent=2))
    else:
        from ncdoc.tuner.outputs import console_summary
        print(console_summary(result))
        if page:
            print(f"The tuning story, on one page: {page}")
    return 0


def _wants_html(args: argparse.Namespace) -> bool:
    return any(f == "html" for group in (args.formats or ()) for f in group)


def _write_page(out_dir: str) -> str:
    """OUT/report.html: the report's tuning story over the folder the tune just wrote (ncdoc report --tune)."""
    import os

    from ncdoc.report.build import tune_page
    from ncdoc.report.page import write_report
    return write_report(os.path.join(out_dir, "report.html"), tune_page(out_dir))
