"""`ncdoc snapshot`: capture this node (or a bundled example machine) as one JSON snapshot."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ncdoc.errors import UsageError

NAME = "snapshot"
HELP = "capture this node's GPU, RDMA, network, PCIe and NCCL facts as a JSON snapshot"
DESCRIPTION = """\
Probe this node (NVML, sysfs, /proc, pyverbs when installed) and write everything
ncdoc knows about it as one JSON snapshot: a file others can send you, and that every
ncdoc command reads with --snapshot. Facts that could not be read are marked unknown
with the reason; nothing is guessed. A short summary of what was and was not found goes
to stderr.

examples:
  ncdoc snapshot -o node7.json
  srun --ntasks-per-node=1 ncdoc snapshot -o snaps/%h.json   # one file per node (then: ncdoc cluster check snaps/)
  ncdoc snapshot --sysfs-root /tmp/capture        # a copied /sys + /proc tree
  ncdoc snapshot --example dgx-h100               # a bundled example machine
  ncdoc snapshot --list-examples
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the snapshot to FILE (atomically) instead of stdout; %%h in FILE is the "
                             "node's hostname, so `srun ncdoc snapshot -o snaps/%%h.json` writes one file per node")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--sysfs-root", metavar="DIR",
                     help="read /sys and /proc under DIR instead of this machine's (NVML is not queried)")
    src.add_argument("--example", metavar="NAME", help="capture a bundled example machine instead")
    parser.add_argument("--list-examples", action="store_true", help="list the bundled example machines")
    parser.add_argument("--json", action="store_true",
                        help="with -o, print a JSON summary on stdout; with --list-examples, list as JSON")


def output_path(template: str, snapshot) -> str:
    """-o with %h replaced by the node's hostname (%% for a literal %), as srun and ssh spell it."""
    if "%" not in template:
        return template
    host = snapshot.host.hostname
    if not host:
        import socket
        host = socket.gethostname()
    host = host.split(".")[0]
    out, i = [], 0
    while i < len(template):
        c = template[i]
        if c == "%" and i + 1 < len(template) and template[i + 1] in "h%":
            out.append(host if template[i + 1] == "h" else "%")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _count(items: tuple, what: str) -> str:
    return f"{len(items)} {what}{'' if len(items) == 1 else 's'}"


def summary(snapshot) -> list[str]:
    """A few lines saying what was found and what was not, for stderr."""
    lines = [f"snapshot of {snapshot.host.hostname or 'unknown host'} ({snapshot.origin})"]

    def section(label: str, status, found: str) -> None:
        if status.state == "ok":
            lines.append(f"  {label}: {found}")
        else:
            word = "none" if status.state == "absent" else "unknown"
            lines.append(f"  {label}: {word} ({status.reason})")

    gpus = snapshot.gpus
    names = sorted({g.name for g in gpus.gpus})
    nvl = max((sum(1 for link in g.nvlinks if link.active) for g in gpus.gpus), default=0)
    gpu_text = f"{len(gpus.gpus)} x {', '.join(names)}" + (f", {nvl} NVLinks each" if nvl else ", no NVLink")
    if gpus.fabric_manager and gpus.fabric_manager != "not_supported":
        gpu_text += f", fabric manager {gpus.fabric_manager}"
    section("GPUs", gpus.status, gpu_text)
    ports = [p for h in snapshot.hcas.hcas for p in h.ports]
    active = sum(1 for p in ports if p.state == "ACTIVE")
    rdma_from = snapshot.hcas.status.source          # sysfs, +pyverbs when it answered (a note says why not)
    section("RDMA", snapshot.hcas.status,
            f"{_count(snapshot.hcas.hcas, 'device')}, {active} of {len(ports)} ports ACTIVE"
            + (f" (from {rdma_from})" if rdma_from else ""))
    section("network", snapshot.net.status, _count(snapshot.net.interfaces, "interface"))
    section("PCIe", snapshot.pci.status, _count(snapshot.pci.devices, "device"))
    section("NUMA", snapshot.numa.status, _count(snapshot.numa.nodes, "node"))
    v = snapshot.versions
    lines.append(f"  driver: {v.driver or 'unknown'}, CUDA driver API: {v.cuda_driver or 'unknown'}, "
                 f"NCCL: {v.nccl or 'not found'}" + (f" ({v.nccl_libs[0].origin})" if v.nccl_libs else ""))
    lines.append(f"  NCCL environment: {_count(snapshot.env.values, 'NCCL_* variable')} set"
                 + (f" (files: {', '.join(snapshot.env.files)})" if snapshot.env.files else ""))
    lines += [f"  note: {n}" for n in snapshot.notes]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.list_examples:
        from ncdoc.examples.machines import list_examples

        examples = list_examples()
        if args.json:
            print(json.dumps({"schema_version": 1, "examples": [
                {"name": n, "description": d} for n, d in examples]}, indent=2))
        else:
            width = max((len(n) for n, _ in examples), default=0)
            for name, desc in examples:
                print(f"{name:<{width}}  {desc}")
        return 0
    if args.example:
        from ncdoc.examples.machines import capture_example     # built and probed, not the stored copy

        snapshot = capture_example(args.example)
    else:
        from ncdoc.probes.live import capture

        root = args.sysfs_root or "/"
        if not os.path.isdir(root):
            raise UsageError(f"--sysfs-root {root!r} is not a folder")
        snapshot = capture(sysfs_root=root)
    text = snapshot.to_json() + "\n"
    if args.output and args.output != "-":
        from ncdoc.readers.textfile import write_user_file
        args.output = output_path(args.output, snapshot)
        write_user_file(args.output, text, "the snapshot")
        if args.json:
            print(json.dumps({"schema_version": 1, "output": args.output, "origin": snapshot.origin,
                              "summary": summary(snapshot)[1:], "notes": list(snapshot.notes)}, indent=2))
        print(f"ncdoc: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    print("\n".join("ncdoc: " + line if i == 0 else line for i, line in enumerate(summary(snapshot))),
          file=sys.stderr)
    return 0
