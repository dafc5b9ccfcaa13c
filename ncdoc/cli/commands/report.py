"""`ncdoc report`: one self-contained HTML page with the findings, the topology, the bandwidth curve,
the tuning story and the cluster grid."""

from __future__ import annotations

import argparse
import json
import os

from ncdoc.cli import rule_options as opt

NAME = "report"
HELP = "write one self-contained HTML report: findings, topology, busbw curve, tuning story, cluster grid"
DESCRIPTION = """\
Write one HTML file that opens offline in any browser (no script, font or image is fetched;
everything is inline) and reads without JavaScript:

  - the verdict and every finding in the order an expert checks, with the evidence (file:line),
    the fix, the env line to apply and the rule's documentation;
  - the node topology: NUMA nodes, host bridges and PCIe switches down to the GPUs and NICs,
    NVLink, each GPU's rail to its NIC coloured by NCCL's path type (PIX/PXB/PHB/NODE/SYS),
    ports that are down or slow and PCIe links trained low in red, NICs that NCCL_IB_HCA
    leaves out greyed;
  - bus bandwidth against message size (log2) from nccl-tests output, with the expected figure
    and the bandwidth-bound region;
  - with --tune DIR, the tuning story: best so far per trial, each variable's effect and spread,
    what was accepted and rejected, the guard sweep and the command that opens the study in
    optuna-dashboard;
  - with --cluster INPUT (what ncdoc cluster check reads, or its --json output), the drift grid:
    nodes x the attributes on which they differ, the odd cells marked, alike nodes in one row with
    their count, and the cross-node findings; with --cluster-test FILE, what ncdoc cluster test
    found (bad nodes and rails, the drain lines, each node's first-pass figures).

Evidence files are what `ncdoc triage` takes, in any mix. An input that cannot be read is shown
in the report where it would have been used; the report is still written.

exit status: 0 the report was written, 2 bad usage or the output cannot be written.

examples:
  ncdoc report -o report.html --example dgx-h100-port-down
  ncdoc report job.log all_reduce.txt --snapshot node7.json -o node7.html
  ncdoc report --tune ncdoc-demo -o tune.html
  ncdoc report --cluster snaps/ --cluster-test ncdoc-cluster/results.json -o cluster.html
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="evidence files, as for ncdoc triage: NCCL logs, nccl-tests output, env/launch "
                             "files, topo -m, ibv_devinfo/ibstat/ibstatus/show_gids, topology XML, snapshot JSON")
    parser.add_argument("-o", "--output", default="report.html", metavar="FILE",
                        help="the HTML file to write (default report.html; written whole or not at all)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="FILE", help="an ncdoc snapshot of the node")
    src.add_argument("--example", metavar="NAME", help="use a bundled example machine as the node")
    opt.add_env_option(parser, "an NCCL variable the job ran with, beating launch files and logs")
    parser.add_argument("--nic-gbps", type=float, metavar="N", help="port rate of one NIC, Gb/s (e.g. 400)")
    parser.add_argument("--nics", type=int, metavar="K", help="rail NICs per node (with --nic-gbps)")
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes the job ran on")
    parser.add_argument("--tune", metavar="DIR", help="a tune output folder (summary.json, EXPLAIN.md, study.db)")
    parser.add_argument("--cluster", action="append", default=[], metavar="INPUT",
                        help="the nodes to compare, as ncdoc cluster check takes them: a cluster file, a folder of "
                             "per-node snapshots (repeatable), or the output of ncdoc cluster check --json")
    parser.add_argument("--cluster-test", metavar="FILE",
                        help="ncdoc cluster test's results.json: the bad nodes and rails, the drain lines, each "
                             "node's first-pass figures")
    parser.add_argument("--title", help="the page title (default: what the report is about)")
    parser.add_argument("--json", action="store_true",
                        help="print what was written as one JSON object (path, bytes, sections, findings)")


def run(args: argparse.Namespace) -> int:
    from ncdoc.errors import UsageError
    from ncdoc.report.build import build_report, render
    from ncdoc.report.page import write_report

    if args.nics is not None and args.nic_gbps is None:
        raise UsageError("--nics needs --nic-gbps")
    out = args.output
    if os.path.isdir(out):        # said before any work, in the writer's words
        from ncdoc.errors import InputError
        raise InputError("cannot write the report: that is a folder", path=os.path.realpath(out))
    rep = build_report(args.paths, snapshot=args.snapshot, example=args.example, env=args.env,
                       nic_gbps=args.nic_gbps, nics=args.nics, nodes=args.nodes, tune_dir=args.tune,
                       cluster=args.cluster, cluster_tests=args.cluster_test, title=args.title)
    text = render(rep)
    path = write_report(out, text)
    sections = [name for name, present in (("findings", rep.verdict_known), ("topology", rep.topology is not None),
                                           ("bandwidth", bool(rep.bandwidth)), ("tuning", rep.tune is not None),
                                           ("cluster", rep.cluster is not None),
                                           ("cluster tests", rep.cluster_tests is not None)) if present]
    size = len(text.encode("utf-8"))
    if args.json:
        print(json.dumps({"schema_version": 1, "path": path, "bytes": size, "kind": rep.kind, "sections": sections,
                          "findings": len(rep.findings), "problems": [{"where": p.where, "message": p.message}
                                                                      for p in rep.problems]}, indent=2))
    else:
        print(f"wrote {path} ({size / 1024:.0f} KB: {', '.join(sections) or 'no section'}"
              + (f"; {len(rep.problems)} input problem(s) shown in it" if rep.problems else "") + ")")
    return 0


__all__ = ["NAME", "HELP", "DESCRIPTION", "add_arguments", "run"]
