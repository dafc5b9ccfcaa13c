"""`ncdoc triage`: why is this job slow or failing? Read the evidence, say the most likely cause first."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

NAME = "triage"
HELP = "explain a slow or failing NCCL job from its logs, nccl-tests output, topology and settings"
DESCRIPTION = """\
Give ncdoc what you have, in any mix: NCCL_DEBUG=INFO logs (NCCL DIAG lines included),
nccl-tests output, ncclras reports (text or -f json), framework logs (PyTorch's NCCL
watchdog), launch scripts or env files, `nvidia-smi topo -m`, ibv_devinfo / ibstat /
ibstatus / show_gids output, `ulimit -a` or nvidia-smi output, an NCCL topology XML or an
ncdoc snapshot. Each file's kind is detected past launcher and log-shipper prefixes (-v says
why); everything is merged into one picture and checked in the order an expert works:

  1. RDMA path or TCP fallback
  2. GPUDirect RDMA, GPU-NIC affinity and rails
  3. link health
  4. bandwidth against what this hardware should reach
  5. settings and tuning hints

The most likely cause comes first, with the evidence lines (file:line) and the fix; when the
inputs cannot decide (one rank, sizes too small, no NIC rate), "inconclusive" and what would.

exit status: 0 no finding at or above --fail-on (default error), 1 there is one,
2 an input cannot be used (missing, empty, binary) or bad usage; a text file of no known kind
beside usable ones is skipped with a note (alone, it is exit 2 too).

examples:
  ncdoc triage job.log
  ncdoc triage rank0.log all_reduce.txt topo.txt launch.sh
  ncdoc triage results.txt --nic-gbps 400 --nics 8 --nodes 2
  ncdoc triage job.log --env NCCL_IB_HCA=mlx5_0,mlx5_1 --json
  ncdoc triage job.log all_reduce.txt --format html > triage.html
  ncdoc triage huge.log --jobs 4
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ncdoc.output.triage_report import FORMATS
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="evidence files: NCCL logs, nccl-tests output, env/launch files, topo -m, "
                             "ibv_devinfo/ibstat/ibstatus/show_gids, NCCL topology XML, snapshot JSON "
                             "('-' reads stdin)")
    parser.add_argument("--snapshot", metavar="FILE", help="an ncdoc snapshot of the node the job ran on")
    parser.add_argument("--example", metavar="NAME", help="use a bundled example machine as the node")
    opt.add_env_option(parser, "an NCCL variable the job ran with, beating launch files and logs")
    parser.add_argument("--nic-gbps", type=float, metavar="N", help="port rate of one NIC, Gb/s (e.g. 400)")
    parser.add_argument("--nics", type=int, metavar="K", help="rail NICs per node (with --nic-gbps)")
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes the job ran on")
    opt.add_output_arguments(parser, FORMATS + ("html",), "text")   # html: the page of ncdoc report
    parser.add_argument("--fail-on", choices=("error", "warning", "info", "none"), default="error",
                        help="lowest severity that makes the exit status 1 (default error)")
    parser.add_argument("--show-skipped", action="store_true", help="list the rules skipped and why")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="processes reading a large log at once (default: one per core this process may use, "
                             "or one with the native scanner, which gains nothing from more); the facts are the same "
                             "for any N")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="say why each input was taken for its kind (how many of its lines bear that kind's "
                             "sign, and which other kinds' signs it bears); --json always carries it")


def run(args: argparse.Namespace) -> int:
    from ncdoc.errors import UsageError
    from ncdoc.output.triage_report import render
    from ncdoc.triage.run import triage

    fmt = opt.output_format(args, "text")
    if args.nics is not None and args.nic_gbps is None:
        raise UsageError("--nics needs --nic-gbps")
    if args.snapshot and args.example:
        raise UsageError("give --snapshot or --example, not both")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    result = triage(args.paths, snapshot=args.snapshot, example=args.example, env=args.env,
                    nic_gbps=args.nic_gbps, nics=args.nics, nodes=args.nodes, jobs=args.jobs)
    if fmt == "html":
        from ncdoc.report.build import triage_page
        sys.stdout.write(triage_page(result, snapshot=args.snapshot, example=args.example))
    else:
        sys.stdout.write(render(result, fmt, color=args.color, show_skipped=args.show_skipped, verbose=args.verbose))
    return result.exit_code(args.fail_on)
