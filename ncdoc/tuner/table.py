"""nccl_tuner.conf: the rules NCCL's example tuner plugin reads, and how it applies them.

Format (plugins/tuner/example, nccl_facts.md 3.1): CSV `collective_type,min_bytes,max_bytes,
algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff`, lower-case names, inclusive byte
ranges (nBytes: the whole buffer for all_gather/reduce_scatter), -1 a wildcard. How the plugin
applies them is the hazard this module exists for:

* it sets *nChannels = 1 before matching, so a call no rule matches, or a rule with channels=-1,
  runs on ONE channel;
* a matching rule whose algorithm/protocol NCCL disabled (its cost is IGNORE) is skipped, and the
  search goes on; no later match means one channel again;
* the first usable match wins: its algorithm/protocol gets cost 0 and its channel count replaces
  the one NCCL would have chosen.

So ncdoc writes a table only as a whole: for every size of every collective of each covered
communicator shape, a rule with NCCL's own algorithm, protocol and channel count, except where a
measured, confirmed choice replaces them (ncdoc.tuner.table_build). `plugin_pick` is the
plugin's logic, used by the simulator to load a table and by the tests as an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

COLLECTIVES = {"broadcast": "broadcast", "reduce": "reduce", "all_gather": "allgather",
               "reduce_scatter": "reducescatter", "all_reduce": "allreduce"}
ALGOS = {"Tree": "tree", "Ring": "ring", "CollNetDirect": "collnet_direct", "CollNetChain": "collnet_chain",
         "NVLS": "nvls", "NVLSTree": "nvls_tree", "PAT": "pat"}
PROTOS = {"LL": "ll", "LL128": "ll128", "Simple": "simple"}
MAX_BYTES = 2**64 - 1        # strtoull's maximum: "every size above"
MAX_LINE = 255               # the plugin reads lines into a 256-byte buffer


@dataclass(frozen=True)
class Rule:
    collective: str            # nccl-tests name: all_reduce, all_gather, ...
    min_bytes: int
    max_bytes: int
    algo: str                  # NCCL's names: Ring, Tree, NVLSTree, ...
    proto: str                 # LL, LL128, Simple
    channels: int
    n_nodes: int
    n_ranks: int
    note: str = ""             # why this rule: "NCCL's choice" or the measurement behind it

    def csv(self) -> str:
        return (f"{COLLECTIVES[self.collective]},{self.min_bytes},{self.max_bytes},{ALGOS[self.algo]},"
                f"{PROTOS[self.proto]},{self.channels},{self.n_nodes},{self.n_ranks},-1,-1")


_BY_PLUGIN_COLL = {v: k for k, v in COLLECTIVES.items()}
_BY_PLUGIN_ALGO = {v: k for k, v in ALGOS.items()}
_BY_PLUGIN_PROTO = {v: k for k, v in PROTOS.items()}


def parse_conf(text: str) -> list[Rule]:
    """The rules as the example plugin reads them, with its fallbacks (an unknown collective is
    allreduce, an unknown algorithm ring, an unknown protocol simple) and its 255-character lines."""
    rules = []
    for raw in text.split("\n"):
        line = raw[:MAX_LINE]
        if not line or line.startswith("#"):
            continue
        fields = [f.strip(" \t") for f in line.split(",") if f != ""][:10]
        if len(fields) < 8:
            continue
        coll = _BY_PLUGIN_COLL.get(fields[0], "all_reduce")
        algo = _BY_PLUGIN_ALGO.get(fields[3], "Ring")
        proto = _BY_PLUGIN_PROTO.get(fields[4], "Simple")
        rules.append(Rule(coll, _ull(fields[1]), _ull(fields[2]), algo, proto, _atoi(fields[5]), _atoi(fields[6]),
                          _atoi(fields[7])))
    return rules


def _digits(text: str) -> str:
    """The leading ASCII digits of `text`."""
    n = 0
    while n < len(text) and "0" <= text[n] <= "9":
        n += 1
    return text[:n]


def _ull(text: str) -> int:
    digits = _digits(text)
    if len(digits.lstrip("0")) > 20:                # past 64 bits: strtoull saturates
        return MAX_BYTES
    return min(int(digits), MAX_BYTES) if digits else 0


def _atoi(text: str) -> int:
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text)
    digits = _digits(body)
    if len(digits.lstrip("0")) > 19:
        return sign * (2 ** 63 - 1)
    return sign * int(digits) if digits else 0


def plugin_pick(rules: Sequence[Rule], collective: str, nbytes: int, n_nodes: int, n_ranks: int,
                usable: Callable[[str, str], bool]) -> tuple[str, str, int] | None:
    """(algorithm, protocol, channels) the example plugin forces for one call, or None when no
    usable rule matches (NCCL then takes its own cheapest algorithm on ONE channel)."""
    for r in rules:
        if (r.collective == collective and r.min_bytes <= nbytes <= r.max_bytes
                and r.n_nodes in (-1, n_nodes) and r.n_ranks in (-1, n_ranks) and usable(r.algo, r.proto)):
            return r.algo, r.proto, (r.channels if r.channels != -1 else 1)
    return None


def render(rules: Iterable[Rule], header: Sequence[str] = ()) -> str:
    lines = ["# nccl_tuner.conf for NCCL's example tuner plugin (plugins/tuner/example), written by ncdoc tune.",
             "# Load it on EVERY rank of a job, the same file everywhere:",
             "#   NCCL_TUNER_PLUGIN=/path/to/libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE=/path/to/nccl_tuner.conf",
             "# Format: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff",
             "# The first matching rule wins. Every size of every collective has a rule, with the channel count",
             "# NCCL would choose: the example plugin runs a call that no rule matches on ONE channel."]
    from ncdoc.envfiles.formats import comment_lines    # one line each: a study's name may hold anything
    lines += comment_lines(header, "sh")
    last_note = None
    for r in rules:
        if r.note and r.note != last_note:
            lines += comment_lines([r.note], "sh")
            last_note = r.note
        lines.append(r.csv())
    return "\n".join(lines) + "\n"


def plugin_problem(plugin: str | None) -> str | None:
    """Why a backend with this --tuner-plugin cannot load tables (None: it can)."""
    from pathlib import Path
    if not plugin:
        return ("no tuner plugin to load a table with: pass --tuner-plugin PATH (NCCL's "
                "libnccl-tuner-example.so, built from NCCL's plugins/tuner/example)")
    if not Path(plugin).is_file():
        return f"the tuner plugin {plugin} does not exist"
    return None


def plugin_env(rules: Sequence[Rule], plugin: str, folder: str | None) -> dict[str, str]:
    """What makes an NCCL process load `rules` through the example plugin: NCCL_TUNER_PLUGIN and
    NCCL_TUNER_CONFIG_FILE naming the rules, written once (atomically) under `folder` (shared storage
    when the ranks run on other hosts)."""
    import hashlib
    import tempfile
    from pathlib import Path

    from ncdoc.envfiles.formats import write_atomic

    text = render(rules)
    where = Path(folder or tempfile.gettempdir()) / "ncdoc-tables"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"table-{hashlib.sha256(text.encode()).hexdigest()[:16]}.conf"
    if not path.is_file():
        write_atomic(path, text)
    return {"NCCL_TUNER_PLUGIN": plugin, "NCCL_TUNER_CONFIG_FILE": str(path)}
