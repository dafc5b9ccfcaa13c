"""`ncdoc cluster`: the cluster as the unit (snapshot, check, bom, diff, test)."""

from __future__ import annotations

import json
import os
import sys

from ncdoc.cli import rule_options as opt
from ncdoc.errors import InputError, UsageError
from ncdoc.readers.numbers import is_digits

NAME = "cluster"
HELP = "gather every node, find drift and the bad node or rail, record and compare the acceptance BOM"
DESCRIPTION = """\
  ncdoc cluster snapshot   a snapshot of every node (with its effective NCCL env) through a launcher,
                           into one cluster file; nodes that do not answer are recorded with the reason
  ncdoc cluster check      the node x attribute drift matrix and the cross-node rules, over a cluster
                           file, a folder of per-node snapshots (srun ncdoc snapshot -o snaps/%h.json),
                           or a live gather when given none
  ncdoc cluster bom        the bill of materials an acceptance test ran on (attributes + results)
  ncdoc cluster diff       what changed since a BOM, and whether to rerun the acceptance benchmark
  ncdoc cluster test       nccl-tests per node, per rail, pairwise and at full scale; the bad node or
                           rail found by re-testing against other partners; the drain lines to take it out

launchers (--launcher): slurm (srun in the allocation; the default inside one), mpirun (Open MPI,
MPICH/Hydra, Intel MPI: --mpi-flavour), ray (the default elsewhere: --ray-address, or a local
instance). --dry-run prints the exact command lines instead of running them; logs of every node
and run go under --out-dir.

exit status: check and test: 0 clean, 1 findings at or above --fail-on / faults found; snapshot: 1
when some node did not answer; diff: 1 when the acceptance benchmark must be rerun; 2 ncdoc could not
run (bad input, a launcher that is not installed; partial results are still written and say what is
missing).

examples:
  ncdoc cluster snapshot -o cluster.json                       # inside salloc/sbatch: srun on every node
  srun --ntasks-per-node=1 ncdoc snapshot -o snaps/%h.json && ncdoc cluster check snaps/
  ncdoc cluster check cluster.json --golden node01 --format markdown
  ncdoc cluster check snaps/ --format html > drift.html           # the drift grid as one page
  ncdoc cluster bom cluster.json --results ncdoc-cluster/results.json -o bom.json
  ncdoc cluster diff bom.json cluster-today.json
  ncdoc cluster test --launcher mpirun --hostfile hosts --mpi-flavour openmpi --dry-run
  ncdoc cluster test --snapshots cluster.json --scales node,pair,rail --nccl-tests-dir ~/nccl-tests/build
  ncdoc cluster test --simulate faults.yaml --scales pair,rail          # the isolation on the simulator
"""

SCALES = ("node", "rail", "pair", "full")


def _launcher_args(p) -> None:
    g = p.add_argument_group("launcher")
    g.add_argument("--launcher", choices=("slurm", "mpirun", "ray", "local"),
                   help="how to reach the nodes (default: slurm inside an allocation, else ray; local: this "
                        "machine alone)")
    g.add_argument("--nodes", metavar="LIST", help="the nodes, as a Slurm hostlist: gpu[01-16],gpu20")
    g.add_argument("--hostfile", metavar="FILE", help="the nodes, from an Open MPI or MPICH hostfile")
    g.add_argument("--ray-address", metavar="ADDR", help="join this Ray cluster (default: a local instance)")
    g.add_argument("--launcher-cmd", metavar="PATH", help="the srun or mpirun to use (default: on PATH)")
    g.add_argument("--launcher-args", action="append", default=[], metavar="ARGS",
                   help="passed to srun/mpirun as given (write it with '='): --launcher-args=\"--mpi=pmix\", "
                        "--launcher-args=\"--mca btl tcp,self -x UCX_TLS\" (repeatable)")
    g.add_argument("--mpi-flavour", choices=("openmpi", "hydra", "intel"),
                   help="mpirun's flags (default: asked from mpirun --version)")
    g.add_argument("--timeout", type=float, default=60.0, metavar="SEC",
                   help="per node (snapshot) or per nccl-tests size (test); past it the process is killed (default 60)")
    g.add_argument("--out-dir", default="ncdoc-cluster", metavar="DIR",
                   help="logs of every node and run, and results (default ./ncdoc-cluster)")
    g.add_argument("--dry-run", action="store_true", help="print the command lines, run nothing")
    g.add_argument("--agent", metavar="CMD", default="ncdoc snapshot",
                   help="what each node runs to print its snapshot (default: ncdoc snapshot)")


def _inputs_arg(p, what: str) -> None:
    p.add_argument("inputs", nargs="*", metavar="CLUSTER_FILE|FOLDER|SNAPSHOT",
                   help=f"{what}: a cluster file, folders of per-node snapshots or snapshot files "
                        "(none: gather the nodes live)")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    snap = sub.add_parser("snapshot", help="gather every node's snapshot into one cluster file")
    snap.add_argument("-o", "--output", metavar="FILE", help="the cluster file (default OUT_DIR/cluster.json)")
    snap.add_argument("--per-node-dir", metavar="DIR", help="also write each node's snapshot as DIR/<node>.json")
    snap.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    _launcher_args(snap)

    chk = sub.add_parser("check", help="the drift matrix and the cross-node rules")
    _inputs_arg(chk, "the nodes to compare")
    chk.add_argument("--golden", metavar="NODE|FILE",
                     help="judge against this node (or snapshot file) instead of the majority")
    chk.add_argument("--per-node", action="store_true",
                     help="also run every node's own rules (as ncdoc check), each finding once with its nodes")
    opt.add_selection_arguments(chk, "error")
    opt.add_output_arguments(chk, ("text", "json", "markdown", "html"), "text")   # html: ncdoc report's page
    _launcher_args(chk)

    bom = sub.add_parser("bom", help="record the bill of materials of an acceptance run")
    _inputs_arg(bom, "the nodes")
    bom.add_argument("-o", "--output", metavar="FILE", required=True, help="the BOM file to write")
    bom.add_argument("--results", action="append", default=[], metavar="FILE",
                     help="benchmark results to record: ncdoc cluster test's results.json or nccl-tests output "
                          "(repeatable)")
    _launcher_args(bom)

    dif = sub.add_parser("diff", help="what changed since a BOM; whether to rerun the acceptance benchmark")
    dif.add_argument("bom", metavar="BOM", help="a file written by ncdoc cluster bom")
    _inputs_arg(dif, "the cluster now")
    dif.add_argument("--json", action="store_true", help="print one JSON object")
    _launcher_args(dif)

    tst = sub.add_parser("test", help="nccl-tests in scales; find the bad node or rail")
    tst.add_argument("--scales", default="node,pair", metavar="LIST",
                     help=f"which, in order: {', '.join(SCALES)} (default node,pair)")
    tst.add_argument("--snapshots", metavar="INPUT",
                     help="the nodes' snapshots (cluster file or folder): expected figures and the rail NICs")
    tst.add_argument("--rails", metavar="LIST", help="the rail NICs when no snapshots: mlx5_0:1@0,mlx5_3:1@1 (HCA:PORT@GPU)")
    tst.add_argument("--gpus-per-node", type=int, default=8, metavar="N")
    tst.add_argument("--nccl-tests-dir", metavar="DIR", help="folder of all_reduce_perf etc. on every node "
                                                             "(default: on each node's PATH)")
    tst.add_argument("--collective", default="all_reduce", metavar="NAME")
    tst.add_argument("--sizes", default="1M,1G", metavar="LIST", help="message sizes (default 1M,1G; K/M/G suffixes)")
    tst.add_argument("--check-iters", type=int, default=1, metavar="N", help="nccl-tests -c (default 1)")
    tst.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="an NCCL variable for every run (repeatable)")
    tst.add_argument("--threshold", type=float, default=0.8, metavar="FRACTION",
                     help="below this fraction of the expected busbw a probe is slow (default 0.8)")
    tst.add_argument("--confirm", type=int, default=1, metavar="N", help="confirmation rounds per finding (default 1)")
    tst.add_argument("--simulate", metavar="SPEC", help="measure on the simulator with this fault spec (YAML/JSON)")
    tst.add_argument("--drain", action="store_true", help="run the scontrol drain lines (printed otherwise)")
    tst.add_argument("--json", action="store_true", help="print the results as one JSON object")
    _launcher_args(tst)


# ---------------------------------------------------------------- shared

def _launcher(args):
    from ncdoc.cluster.launchers import make_launcher
    return make_launcher(args.launcher, nodes=args.nodes, hostfile=args.hostfile, ray_address=args.ray_address,
                         command=args.launcher_cmd, extra_args=args.launcher_args, mpi_flavour=args.mpi_flavour,
                         dry_run=args.dry_run)


def _agent(args) -> list[str]:
    import shlex
    agent = shlex.split(args.agent)
    if not agent:
        raise UsageError("--agent is empty")
    return agent


def _progress(msg: str) -> None:
    print(f"ncdoc: {msg}", file=sys.stderr)


def _print_dry_run(launcher, nodes, argv) -> int:
    from ncdoc.cluster.launch import shell_line
    for cmd in launcher.per_node_commands(nodes, argv, {}):
        print(shell_line(cmd))
    return 0


def _live(args):
    """Gather the nodes live (check/bom/diff without inputs, snapshot)."""
    from ncdoc.cluster.gather import gather
    launcher = _launcher(args)
    try:
        nodes = launcher.nodes()
        log_dir = os.path.join(args.out_dir, "gather")
        return gather(launcher, nodes, agent=_agent(args), timeout_s=args.timeout, log_dir=log_dir,
                      progress=_progress)
    finally:
        launcher.close()


def _facts(args):
    from ncdoc.cluster.facts import load_inputs
    if args.inputs:
        return load_inputs(args.inputs)
    if args.dry_run:
        return None
    return _live(args)


def _write(path: str, text: str) -> None:
    from ncdoc.readers.textfile import write_user_file
    write_user_file(path, text, "the output", make_dirs=True)


def _report_problems(facts) -> int:
    for p in facts.problems:
        print(f"ncdoc: error: {p}", file=sys.stderr)
    return 2 if facts.problems else 0


# ---------------------------------------------------------------- subcommands

def _snapshot(args) -> int:
    launcher = _launcher(args)
    if args.dry_run:
        try:
            return _print_dry_run(launcher, launcher.nodes(), _agent(args))
        finally:
            launcher.close()
    launcher.close()
    facts = _live(args)
    out = args.output or os.path.join(args.out_dir, "cluster.json")
    _write(out, facts.to_json())
    if args.per_node_dir:
        for name, snap in facts.nodes.items():
            _write(os.path.join(args.per_node_dir, f"{name}.json"), snap.to_json() + "\n")
    for u in facts.unreachable:
        print(f"ncdoc: {u.node}: unreachable: {u.reason}", file=sys.stderr)
    print(f"ncdoc: wrote {out} ({len(facts.nodes)} node(s)" + (f", {len(facts.unreachable)} unreachable, "
                                                                  "marked incomplete" if facts.unreachable else "")
          + ")", file=sys.stderr)
    if args.json:
        print(json.dumps({"schema_version": 1, "output": out, "nodes": list(facts.nodes),
                          "unreachable": [u.to_dict() for u in facts.unreachable], "complete": facts.complete},
                         indent=2))
    return 1 if facts.unreachable else 0


def _check(args) -> int:
    from ncdoc.cluster.facts import load_golden
    from ncdoc.cluster.render import render_check
    from ncdoc.cluster.report import check_cluster
    fmt = opt.output_format(args, "text")
    sel = opt.selection(args, default_fail_on="error")
    if not args.inputs and args.dry_run:
        launcher = _launcher(args)
        try:
            return _print_dry_run(launcher, launcher.nodes(), _agent(args))
        finally:
            launcher.close()
    facts = _facts(args)
    if args.golden:
        facts = load_golden(args.golden, facts)
    report = check_cluster(facts, sel, per_node=args.per_node)
    if fmt == "html":
        from ncdoc.report.build import cluster_page
        sys.stdout.write(cluster_page(facts, report, {r.code: r.stage for r in sel.rules},
                                      title=f"ncdoc cluster check: {len(facts.nodes)} nodes"))
    else:
        sys.stdout.write(render_check(facts, report, fmt, color=args.color))
    bad_input = _report_problems(facts)
    if bad_input:
        return bad_input
    return 1 if report.fails(sel.fail_on) else 0


def _bom(args) -> int:
    from ncdoc.cluster.bom import record, result_entry
    results = [result_entry(p) for p in args.results]
    if not args.inputs and args.dry_run:
        launcher = _launcher(args)
        try:
            return _print_dry_run(launcher, launcher.nodes(), _agent(args))
        finally:
            launcher.close()
    facts = _facts(args)
    doc = record(facts, results=results)
    doc["complete"] = facts.complete
    doc["problems"] = list(facts.problems)
    _write(args.output, json.dumps(doc, indent=1) + "\n")
    print(f"ncdoc: wrote {args.output}: {len(facts.nodes)} node(s), {len(doc['attributes'])} attributes, "
          f"{len(results)} result(s)" + ("" if facts.complete else " (incomplete: see 'problems' and "
                                                                   "'unreachable' in it)"), file=sys.stderr)
    return _report_problems(facts)


def _diff(args) -> int:
    from ncdoc.cluster.bom import diff, load, render_diff
    bom = load(args.bom)
    if not args.inputs and args.dry_run:
        launcher = _launcher(args)
        try:
            return _print_dry_run(launcher, launcher.nodes(), _agent(args))
        finally:
            launcher.close()
    facts = _facts(args)
    d = diff(bom, facts)
    sys.stdout.write(render_diff(d, bom, "json" if args.json else "text"))
    bad = _report_problems(facts)
    return bad or (1 if d.rerun else 0)


def _sizes(text: str) -> tuple[int, ...]:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for item in (x.strip().upper() for x in text.split(",") if x.strip()):
        unit = item[-1] if item[-1] in mult else ""
        num = item[:-1] if unit else item
        if not is_digits(num):
            raise UsageError(f"--sizes {item!r}: expected a number with an optional K/M/G suffix")
        out.append(int(num) * mult.get(unit, 1))
    if not out:
        raise UsageError("--sizes is empty")
    return tuple(out)


def _test(args) -> int:
    from ncdoc.cluster import bench, drain
    from ncdoc.cluster.isolation import Isolator, first_round, sim_measurer
    from ncdoc.cluster.measure import (BenchMeasurer, Expectations, dry_run_lines, parse_rails, rails_of,
                                       results_document)
    from ncdoc.cluster.render import render_test
    scales = [s.strip() for s in args.scales.split(",") if s.strip()]
    bad = [s for s in scales if s not in SCALES]
    if bad or not scales:
        raise UsageError(f"--scales {args.scales!r}: use {', '.join(SCALES)}")
    if not 0 < args.threshold < 1:
        raise UsageError("--threshold must be between 0 and 1")
    from ncdoc.envfiles.layers import parse_env_args
    env = {v.name: v.value for v in parse_env_args(args.env)}
    facts = None
    if args.snapshots:
        from ncdoc.cluster.facts import load_inputs
        facts = load_inputs([args.snapshots])
        _report_problems(facts)
    rails = parse_rails(args.rails) if args.rails else (rails_of(next(iter(facts.nodes.values()))) if facts and
                                                        facts.nodes else [])
    spec = bench.BenchSpec(collective=args.collective, sizes=_sizes(args.sizes), check_iters=args.check_iters,
                           timeout_s=args.timeout, tests_dir=args.nccl_tests_dir)
    out_dir = args.out_dir
    if args.simulate:
        from ncdoc.cluster.fabric_sim import Fabric, FabricSpec
        sim = FabricSpec.load(args.simulate)
        nodes = list(sim.nodes)
        measure = sim_measurer(Fabric(sim))
        rail_names = [r.hca for r in rails] or list(sim.rails)
        expectations = Expectations()
        launcher_name = "simulator"
    else:
        launcher = _launcher(args)
        nodes = launcher.nodes()
        launcher_name = launcher.name
        expectations = Expectations(facts, args.collective)
        measure = BenchMeasurer(launcher, spec, env=env, gpus_per_node=args.gpus_per_node, rails=rails,
                                expectations=expectations, log_dir=os.path.join(out_dir, "runs"), progress=_progress)
        rail_names = [r.hca for r in rails]
        if args.dry_run:
            try:
                for scale in scales:
                    print(f"# {scale} scale, first round" + (" (one such round per rail)" if scale == "rail" else ""))
                    for line in dry_run_lines(launcher, measure, first_round(scale, nodes, rail_names)):
                        print(line)
                return 0
            finally:
                launcher.close()
    try:
        report = Isolator(nodes, measure, threshold=args.threshold, rails=rail_names, confirm=args.confirm,
                          progress=_progress).run(scales)
    finally:
        if not args.simulate:
            launcher.close()
    drains = drain.commands(report.findings)
    doc = results_document(report, scales=scales, launcher=launcher_name, spec=spec, expectations=expectations,
                           drains=drains)
    _write(os.path.join(out_dir, "results.json"), json.dumps(doc, indent=1) + "\n")
    ran = drain.run_slurm(drains["slurm"]) if args.drain and drains["slurm"] else []
    if args.json:
        doc["drained"] = ran
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_test(report, drains, ran, len(nodes), scales))
    print(f"ncdoc: {report.rounds} round(s) ({report.first_pass_rounds} first pass, {report.extra_rounds} to "
          f"attribute); results in {os.path.join(out_dir, 'results.json')}", file=sys.stderr)
    return 0 if report.healthy else 1


def run(args) -> int:
    action = getattr(args, "action", None)
    if action is None:
        raise UsageError("ncdoc cluster needs an action: snapshot, check, bom, diff or test (see ncdoc cluster --help)")
    if getattr(args, "timeout", 1) is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    try:
        return {"snapshot": _snapshot, "check": _check, "bom": _bom, "diff": _diff, "test": _test}[action](args)
    except FileNotFoundError as exc:
        raise InputError("no such file", path=exc.filename) from None
