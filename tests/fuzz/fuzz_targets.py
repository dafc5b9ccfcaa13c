"""The readers the fuzz harness drives: each one's seed samples, how it is called in process and through the CLI.

A reader passes an input when it returns or raises ncdoc's own error (NcdocError: one line, exit 2 at the CLI)
whose message stays short; anything else escaping is an "uncaught" failure. Readers are called the way ncdoc
calls them, most through the command that reads that kind of file, so what a parser hands on (numbers, names,
nesting) reaches the rules and the output formats too.

Seeds are the project's own samples (tests/fixtures, rules/, tuners/, ncdoc/examples/) and the real-evidence
corpus in ../shared/corpus, read at run time (never copied here), plus a few small inline documents for the
kinds that have no file in the repository (configs, hostfiles, fabric specs).
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"

# An error message longer than this is itself a failure: ncdoc must not print the input back at length.
MAX_MESSAGE = 2000


class Uncaught(Exception):
    """What the harness reports for an input: not ncdoc's own clean error."""


def _files(*patterns: str, base: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for pat in patterns:
        out.extend(sorted(p for p in base.glob(pat) if p.is_file() and not p.name.endswith(".facts.json")))
    return out


def _corpus(*words: str) -> list[Path]:
    """Corpus artifacts whose folder name holds one of `words` (all of them without words)."""
    if not CORPUS.is_dir():
        return []
    return [p for p in sorted(CORPUS.glob("*/artifact.txt")) if not words or any(w in p.parent.name for w in words)]


def run_main(argv: list[str]) -> int:
    """ncdoc's CLI in this process: NcdocError is caught as the CLI catches it (exit 2, its message checked);
    anything else propagates (NCDOC_DEBUG makes main re-raise) and is reported as uncaught."""
    from ncdoc.cli import main as cli
    os.environ["NCDOC_DEBUG"] = "1"
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = cli.main(argv)
    except SystemExit as exc:       # argparse on a usage error
        rc = exc.code if isinstance(exc.code, int) else 2
    message = err.getvalue()
    if rc == 2 and len(message) > MAX_MESSAGE:
        raise Uncaught(f"error message of {len(message)} characters: {message[:200]!r}...")
    if "internal error" in message or "Traceback" in message:
        raise Uncaught(message.strip()[:500])
    return rc


def _text(path: str) -> str:
    from ncdoc.readers.textfile import read_user_text
    return read_user_text(path, "evidence")


# ------------------------------------------------------------------------------------------- in-process calls

def _snapshot(path, tmp, i):
    from ncdoc.snapshot import Snapshot
    Snapshot.load(path)
    fmt = ("text", "json", "markdown")[i % 3]
    run_main(["doctor", "--snapshot", path, "--format", fmt, "--no-config"])


def _env_generate(path, tmp, i):
    from ncdoc.envfiles.formats import FORMATS
    fmt = FORMATS[i % len(FORMATS)] if i % 7 else "slurm"
    run_main(["env", "generate", "--snapshot", path, "--format", fmt, "-o", os.path.join(tmp, "out.env")])


def _json(path, tmp, i):
    from ncdoc.errors import NcdocError
    from ncdoc.startup.json_load import loads
    try:
        loads(_text(path))
    except NcdocError:
        raise
    except ValueError as exc:      # json.loads' contract: a ValueError saying where
        if len(str(exc)) > MAX_MESSAGE:
            raise Uncaught(f"error message of {len(str(exc))} characters") from None


def _rule_pack(path, tmp, i):
    from ncdoc.engine.packs import check_registry, parse_pack
    rules = parse_pack(_text(path), path)
    check_registry(rules, where=path)


def _policy(path, tmp, i):
    from ncdoc.engine.policy import load_policy
    load_policy(path)
    run_main(["check", "--example", "dgx-h100", "--rules", path, "--no-config", "--format", "json"])


def _config(path, tmp, i):
    from ncdoc.engine.policy import load_config
    load_config(path)
    run_main(["lint", "--example", "dgx-h100", "--config", path, "--format", "markdown"])


def _space(path, tmp, i):
    from ncdoc.tuner.space_file import load_space
    load_space(path)


def _profiles(path, tmp, i):
    from ncdoc.tuner.profiles import load_profiles
    load_profiles(path)


def _env_file(path, tmp, i):
    from ncdoc.envfiles.layers import read_env_file
    read_env_file(path)
    cmd = ("check", "lint", "env")[i % 3]
    if cmd == "env":
        run_main(["env", "show", "--example", "dgx-h100", "--env-file", path, "--json"])
    else:
        run_main([cmd, "--example", "dgx-h100", "--env-file", path, "--no-config"])


def _launch_env(path, tmp, i):
    from ncdoc.evidence.launch_env import parse_launch_env_file
    parse_launch_env_file(path)


def _node_evidence(parse):
    def call(path, tmp, i):
        from ncdoc.importers import nodes
        getattr(nodes, parse)(_text(path), path)
        if i % 4 == 0:
            run_main(["topo", path] + (["--json"] if i % 8 else ["--format", "mermaid"]))
    return call


def _nccl_log(path, tmp, i):
    from ncdoc.evidence.nccl_log import parse_nccl_log_file
    parse_nccl_log_file(path)


def _nccl_tests(path, tmp, i):
    from ncdoc.evidence.nccl_tests import parse_nccl_tests_file
    parse_nccl_tests_file(path)


def _detect(path, tmp, i):
    from ncdoc.importers.kinds import read_input
    read_input(path)


def _triage(path, tmp, i):
    fmt = ("text", "markdown", "json")[i % 3]
    run_main(["triage", path, "--format", fmt])


def _cluster(path, tmp, i):
    from ncdoc.cluster.facts import load_inputs
    load_inputs([path])
    run_main(["cluster", "check", path, "--format", ("text", "markdown", "json")[i % 3]])


def _bom(path, tmp, i):
    from ncdoc.cluster.bom import load
    load(path)


def _hostfile(path, tmp, i):
    from ncdoc.cluster.nodes import read_hostfile
    read_hostfile(path)


def _fabric(path, tmp, i):
    from ncdoc.cluster.fabric_sim import FabricSpec
    FabricSpec.load(path)


def _lines_of(parse):
    def call(path, tmp, i):
        import importlib
        module, name = parse.rsplit(".", 1)
        getattr(importlib.import_module(module), name)(_text(path).splitlines(), path)
    return call


def _ras(path, tmp, i):
    from ncdoc.importers.inputs import open_source
    from ncdoc.importers.run_files import read_ras
    read_ras(open_source(path))


def _framework(path, tmp, i):
    from ncdoc.importers.inputs import open_source
    from ncdoc.importers.run_files import read_run
    read_run("framework_log", open_source(path))


def _machine_spec(path, tmp, i):
    """Build the spec's fake root under tmp/dest; a file anywhere else under tmp is a write outside it."""
    from ncdoc.examples.machines import build_machine
    dest = os.path.join(tmp, "dest")
    try:
        build_machine(path, dest)
    finally:
        stray = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs
                 if not os.path.join(d, f).startswith(dest + os.sep) and os.path.join(d, f) != path]
        if stray:
            raise Uncaught(f"wrote outside the machine's folder: {stray[:3]}")


# ------------------------------------------------------------------------------------------------ inline seeds

CONFIG_SEEDS = {
    "ncdoc.toml": 'rules = ["site.yaml"]\nselect = ["NC1", "NC2"]\nfail-on = "warning"\nexpect-gpus = 8\n'
                  '[ignore]\nNC1004 = "pinned on purpose"\n[severity]\nNC2001 = "error"\n',
    "pyproject.toml": '[tool.ncdoc]\nfail-on = "error"\nselect = ["NC1"]\n[tool.ncdoc.severity]\nNC1101 = "off"\n',
    ".ncdoc.yaml": "fail-on: warning\nexpect-gpus: 4\nignore:\n  NC1004: until 2.24\nseverity:\n  NC2001: info\n",
    "ncdoc.json": '{"fail-on": "info", "select": ["NC1", "NC3"], "expect-gpus": 2}\n',
}
HOSTFILE_SEEDS = {
    "hosts": "node01 slots=8\nnode02 slots=8 max_slots=8\n# comment\nnode03\n",
    "hosts.mpich": "node01:8\nnode02:8\nnode03:4  # spare\n",
}
FABRIC_SEEDS = {
    "faults.yaml": "nodes: 16\ngpus_per_node: 8\nnic_gbps: 400\nfaults:\n  node07: {net: 0.4}\n"
                   "  node11: {rails: {mlx5_9: 0.5}}\n",
    "faults.json": '{"nodes": ["a", "b", "c"], "seed": 3, "noise": 0.01, "faults": {"b": {"nvlink": 0.5}}}\n',
}
ENV_SEEDS = {
    "nccl.env": "# generated\nexport NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'\nexport NCCL_SOCKET_IFNAME=eth0\n"
                "export NCCL_IB_GID_INDEX=3\n",
    "nccl.conf": "NCCL_DEBUG=INFO\nNCCL_IB_TIMEOUT=22\n# comment\nNCCL_P2P_LEVEL=NVL\n",
    "job.dotenv": "NCCL_ALGO=Ring\nNCCL_PROTO='LL128'\nNCCL_NET_GDR_LEVEL=PHB\n",
}
SPEC_SEEDS = {
    "files.yaml": "base: dgx-h100\nname: custom\nfiles:\n  etc/hostname: n1\n  proc/driver/x: 'a'\n"
                  "links:\n  etc/localtime: etc/hostname\n",
}


def _cluster_samples() -> list[tuple[str, str]]:
    """A cluster file of four example nodes, two of them drifted (driver, an HCA's firmware, NCCL_IB_HCA), and
    the bill of materials recorded from it: written by ncdoc itself, so they follow its formats."""
    from ncdoc.cluster import bom
    from ncdoc.cluster.facts import ClusterFacts
    from ncdoc.examples.machines import load_example
    from ncdoc.snapshot import Snapshot
    nodes = {}
    for i in range(4):
        data = load_example("dgx-h100").to_dict()
        data["host"]["hostname"] = f"node{i + 1:02d}"
        if i == 2:
            data["versions"]["driver"] = "535.104.05"
            data["hcas"]["hcas"][0]["fw_ver"] = "28.36.1010"
        if i == 3:
            data["env"]["values"] = [{"name": "NCCL_IB_HCA", "value": "mlx5_0", "source": "env", "line": None}]
        nodes[data["host"]["hostname"]] = Snapshot.from_dict(data)
    facts = ClusterFacts(nodes, source="fuzz-seed", created="2026-01-01T00:00:00Z")
    return [("cluster.json", facts.to_json()), ("bom.json", json.dumps(bom.record(facts), indent=1))]


@dataclass
class Target:
    name: str
    call: object                                    # (path, tmp, index) -> None
    seeds: list = field(default_factory=list)       # Paths, or (file name, text) pairs
    suffix: str = ".txt"                            # the file name random inputs get
    cli: object = None                              # (path, tmp) -> argv, for the CLI sample; None: no command

    def seed_samples(self) -> list[tuple[str, bytes]]:
        """(file name, bytes) of every seed that exists here (a callable seed makes its samples with ncdoc)."""
        out = []
        for s in self.seeds:
            if callable(s):
                out.extend((name, text.encode()) for name, text in s())
            elif isinstance(s, tuple):
                out.append((s[0], s[1].encode()))
            elif s.is_file():
                out.append((s.name, s.read_bytes()[: 8 << 20]))
        return out


def _inline(d: dict) -> list[tuple[str, str]]:
    return list(d.items())


LOGS = lambda: _files("tests/fixtures/logs/*.log", "tests/fixtures/triage/*.log") + _corpus()  # noqa: E731
TESTS_OUT = lambda: _files("tests/fixtures/logs/*nccl_tests*", "tests/fixtures/triage/all_reduce*") \
    + _corpus("nccl-tests", "GBps")  # noqa: E731
ALL_EVIDENCE = lambda: (_files("tests/fixtures/logs/*", "tests/fixtures/triage/*", "tests/fixtures/nodes/*/*.txt",  # noqa: E731
                               "tests/fixtures/nodes/*/*.json", "tests/fixtures/nodes/xml/*")
                        + _corpus() + _files("ncdoc/examples/snapshots/dgx-h100*.json"))
SNAPSHOTS = lambda: _files("ncdoc/examples/snapshots/*.json", "tests/fixtures/nodes/h200-vm/snapshot.json")  # noqa: E731


def targets() -> dict[str, Target]:
    T = Target
    ts = [
        T("snapshot", _snapshot, SNAPSHOTS(), ".json",
          lambda p, t: ["check", "--snapshot", p, "--format", "sarif"]),
        T("env_generate", _env_generate, SNAPSHOTS(), ".json",
          lambda p, t: ["env", "generate", "--snapshot", p, "--format", "sh"]),
        T("json", _json, SNAPSHOTS() + _files("tests/fixtures/**/*.json") + [ROOT / "rules" / "compiled.json"],
          ".json", lambda p, t: ["triage", p, "--json"]),
        T("rule_pack", _rule_pack, _files("rules/*.yaml"), ".yaml"),
        T("policy", _policy, _files("rules/policies/*.yaml"), ".yaml",
          lambda p, t: ["check", "--example", "dgx-h100", "--rules", p, "--no-config"]),
        T("config", _config, _inline(CONFIG_SEEDS), ".toml",
          lambda p, t: ["check", "--example", "dgx-h100", "--config", p]),
        T("tuner_space", _space, _files("tuners/spaces/*.yaml"), ".yaml"),
        T("tuner_profiles", _profiles, _files("tuners/profiles.yaml", "tuners/knowledge.yaml"), ".yaml"),
        T("env_file", _env_file, _inline(ENV_SEEDS) + _files("tests/fixtures/triage/launch.sh")
          + _corpus("env"), ".env", lambda p, t: ["check", "--example", "dgx-h100", "--env-file", p, "--no-config"]),
        T("launch_env", _launch_env, _files("tests/fixtures/triage/launch.sh") + _inline(ENV_SEEDS)
          + _corpus("env", "mpirun", "srun", "slurm", "docker"), ".sh", lambda p, t: ["triage", p]),
        T("rdma_listing", _node_evidence("rdma_listing"), _files("tests/fixtures/triage/ibstat.txt")
          + _corpus("ibv", "ibstat", "show-gids", "port"), ".txt", lambda p, t: ["topo", p, "--json"]),
        T("topo_matrix", _node_evidence("topo_matrix"), _files("tests/fixtures/nodes/*/nvidia-smi-topo-m.txt")
          + _corpus("topo"), ".txt", lambda p, t: ["topo", p]),
        T("topology_xml", _node_evidence("nccl_topo_xml"), _files("tests/fixtures/nodes/xml/*.xml"), ".xml",
          lambda p, t: ["topo", p, "--format", "dot"]),
        T("hwloc_xml", _node_evidence("hwloc_xml"), _files("tests/fixtures/nodes/xml/*.xml"), ".xml"),
        T("nccl_log", _nccl_log, LOGS(), ".log", lambda p, t: ["triage", p]),
        T("nccl_tests", _nccl_tests, TESTS_OUT(), ".txt", lambda p, t: ["triage", p, "--format", "markdown"]),
        T("detect", _detect, ALL_EVIDENCE(), ".txt", lambda p, t: ["triage", p, "-v"]),
        T("triage", _triage, ALL_EVIDENCE(), ".txt", lambda p, t: ["triage", p, "--format", "markdown"]),
        T("cluster_file", _cluster, [_cluster_samples] + SNAPSHOTS()[:2], ".json",
          lambda p, t: ["cluster", "check", p, "--format", "markdown"]),
        T("cluster_bom", _bom, [_cluster_samples], ".json"),
        T("hostfile", _hostfile, _inline(HOSTFILE_SEEDS), ""),
        T("fabric_spec", _fabric, _inline(FABRIC_SEEDS), ".yaml"),
        T("ras_report", _ras, _files("tests/fixtures/triage/ncclras*", "tests/fixtures/logs/*ras*"), ".txt",
          lambda p, t: ["triage", p]),
        T("nccl_diag", _lines_of("ncdoc.evidence.nccl_diag.parse_nccl_diag"), LOGS(), ".log"),
        T("framework_log", _framework, _files("tests/fixtures/triage/watchdog_timeout.log",
                                              "tests/fixtures/logs/torchrun*", "tests/fixtures/logs/h200_torchrun*"),
          ".log", lambda p, t: ["triage", p, "--json"]),
        T("host_output", _lines_of("ncdoc.evidence.host_output.parse_host_output"),
          _files("tests/fixtures/triage/host_limits_driver.txt", "tests/fixtures/nodes/*/nvidia-smi-q.txt"), ".txt"),
        T("machine_spec", _machine_spec, _files("ncdoc/examples/specs/*.yaml") + _inline(SPEC_SEEDS), ".yaml",
          lambda p, t: ["snapshot", "--example", p]),
    ]
    return {t.name: t for t in ts}


def _probe(path, tmp, i):
    """The harness's own check (tests/fuzz/test_fuzz_readers.py): the input says what to do."""
    from ncdoc.errors import InputError
    text = open(path, encoding="utf-8").read()
    if text == "raise":
        raise KeyError("a bug")
    if text == "ncdoc":
        raise InputError("one clean line", path=path)
    if text == "hang":
        while True:
            os.sched_yield()


def probes() -> dict[str, Target]:
    """Targets that exist only to prove the harness sees an uncaught exception and a hang."""
    return {"harness_probe": Target("harness_probe", _probe, [("probe.txt", "ok")])}


def call(target: Target, path: str, tmp: str, index: int) -> None:
    """Run one input through `target`; raise Uncaught (or let the exception out) when it is not clean."""
    from ncdoc.errors import NcdocError
    try:
        target.call(path, tmp, index)
    except NcdocError:       # ncdoc's own error: one bounded line by construction (ncdoc.errors.one_line)
        pass


def input_name(target: Target, seed_name: str | None) -> str:
    """The file name an input is written under: its seed's (the suffix tells readers JSON, TOML or YAML)."""
    return seed_name if seed_name else "input" + target.suffix


__all__ = ["Target", "Uncaught", "targets", "probes", "call", "run_main", "input_name", "CORPUS", "MAX_MESSAGE"]

if __name__ == "__main__":     # list the readers and how many seeds each has here
    for t in targets().values():
        print(f"{t.name:16} {len(t.seed_samples()):3} seeds", file=sys.stdout)
