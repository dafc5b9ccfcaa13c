"""The table of input kinds: every kind of file ncdoc reads from a user, in the order their kinds
are told apart. Detection, import_text (node evidence) and triage all walk this one table.

Each kind has a name, a role (node: Snapshot parts; run: what a job printed; env: what it was
launched with), what it is in words (for messages), its sign (ncdoc/importers/detect.py) and
`read(Source) -> Reading`. A new input kind is one row here, its sign in detect.py, and its
parser: ncdoc/importers/<format>.py for node evidence, ncdoc/evidence/ for run output.

The order matters: an NCCL log carries env lines and nccl-tests output carries NCCL INFO lines,
so the most specific signs come first; JSON is only ever read as a kind that says it can be JSON.
"""

from __future__ import annotations

from ncdoc.errors import InputError
from ncdoc.importers import detect, nodes, run_files
from ncdoc.importers.inputs import Reading, Source, named, open_source
from ncdoc.startup.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

NODE, RUN, ENV = "node", "run", "env"


@record
class InputKind:
    name: str
    role: str                                  # NODE | RUN | ENV
    what: str                                  # "an NCCL log": for messages
    detect: Callable[[detect.Sample], bool]    # its sign
    read: Callable[[Source], Reading]
    json: str = ""                             # what it is as JSON ("" when it is never JSON)
    signs: str = "line"                        # what its sign counts, for the reason detection gives
    weighed: bool = True                       # False: told by its structure alone (JSON schema, XML root)


def _node(kind: str, parse) -> Callable[[Source], Reading]:
    def read(source: Source) -> Reading:
        imp = parse(source.whole_text(), source.path)
        return Reading(kind, (imp.tool or kind,), tuple(imp.notes), nodes=(imp,))
    return read


def _run(kind: str) -> Callable[[Source], Reading]:
    return lambda source: run_files.read_run(kind, source)


KINDS: tuple[InputKind, ...] = (
    InputKind("snapshot_json", NODE, "an ncdoc snapshot", detect.is_snapshot_json,
              _node("snapshot_json", nodes.snapshot_json), json="an ncdoc snapshot", weighed=False),
    InputKind("nccl_topo_xml", NODE, "an NCCL topology XML", detect.is_nccl_topo_xml,
              _node("nccl_topo_xml", nodes.nccl_topo_xml), weighed=False),
    InputKind("hwloc_xml", NODE, "an hwloc topology XML", detect.is_hwloc_xml, _node("hwloc_xml", nodes.hwloc_xml),
              weighed=False),
    # before the NCCL log: the report starts with NCCL's version line, and a job's log may hold one
    InputKind("ras_report", RUN, "an ncclras report", detect.is_ras_report, run_files.read_ras,
              json="an ncclras -f json report", signs="report line"),
    InputKind("nccl_log", RUN, "an NCCL log", detect.is_nccl_log, _run("nccl_log"), signs="NCCL line"),
    InputKind("nccl_tests", RUN, "nccl-tests output", detect.is_nccl_tests, run_files.read_nccl_tests,
              json="nccl-tests -J output", signs="table or preamble line"),
    InputKind("framework_log", RUN, "a framework log (PyTorch ProcessGroupNCCL, c10d)", detect.is_framework_log,
              _run("framework_log"), signs="framework line"),
    InputKind("topo_matrix", NODE, "`nvidia-smi topo -m` output", detect.is_topo_matrix,
              _node("topo_matrix", nodes.topo_matrix), signs="matrix line"),
    InputKind("ibv_devinfo", NODE, "ibv_devinfo/ibstat/ibstatus/show_gids output", detect.is_rdma_listing,
              _node("ibv_devinfo", nodes.rdma_listing), signs="tool"),
    InputKind("host_output", RUN, "host command output (ulimit -a, nvidia-smi, the driver version)",
              detect.is_host_output, _run("host_output"), signs="host line"),
    InputKind("env", ENV, "an env file or launch script", detect.is_env, run_files.read_env,
              json="an env mapping with NCCL_ variables", signs="setting"),
)

BY_NAME = {k.name: k for k in KINDS}
NODE_KINDS = tuple(k.name for k in KINDS if k.role == NODE)
RUN_KINDS = tuple(k.name for k in KINDS if k.role == RUN)


def _words(items: list[str], last: str) -> str:
    return ", ".join(items[:-1]) + f" {last} " + items[-1] if len(items) > 1 else items[0]


UNKNOWN_KIND = "not a file ncdoc knows: expected " + _words([k.what for k in KINDS], "or")
UNKNOWN_JSON = "a JSON file that is neither " + _words([k.json for k in KINDS if k.json], "nor")


def kind_named(name: str) -> InputKind:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"no input kind {name!r} (kinds: {', '.join(BY_NAME)})") from None


@record
class Detection:
    """The kind an input was taken for, how many of its lines bear that kind's sign, and why."""
    kind: InputKind
    lines: int
    others: tuple[tuple[str, int], ...] = ()     # other kinds whose signs it bears: (name, lines)

    @property
    def why(self) -> str:
        k = self.kind
        said = (f"{self.lines} {k.signs}{'s' if self.lines != 1 else ''} of {k.what}" if k.weighed
                else f"its structure is {k.what}")
        if self.others:
            said += "; also " + ", ".join(f"{BY_NAME[n].what} ({c} {BY_NAME[n].signs}{'s' if c != 1 else ''})"
                                          for n, c in self.others)
        return said


# A kind whose sign only a line or two bear gives way to a later kind with this many times more.
OUTWEIGH = 10
_FEW = 2


def detection(sample: detect.Sample) -> Detection:
    """The kind `sample` is: the first in the table whose sign it bears, unless that sign rests on a stray line
    or two and a later kind's sign on many more lines (a launch line above a log, a shell prompt naming a tool);
    InputError when it bears none."""
    counts = []
    for kind in KINDS:
        if sample.is_json and not kind.json:
            continue
        n = int(kind.detect(sample))
        if n:
            counts.append((kind, n))
    if not counts:
        if sample.is_json:
            raise InputError(UNKNOWN_JSON)
        raise InputError(sample.json_error or UNKNOWN_KIND)
    chosen, n = counts[0]
    if chosen.weighed and n <= _FEW:
        heavier = [(k, c) for k, c in counts[1:] if k.weighed and c >= OUTWEIGH * n]
        if heavier:
            chosen, n = max(heavier, key=lambda kc: kc[1])
    return Detection(chosen, n, tuple((k.name, c) for k, c in counts if k is not chosen))


def detect_sample(sample: detect.Sample) -> InputKind:
    """The kind `sample` is (see detection); InputError when it bears no kind's sign."""
    return detection(sample).kind


def detect_kind(text: str) -> str:
    """The name of the kind `text` is; InputError when it is empty, binary or of no known kind."""
    return detect_sample(detect.Sample(text)).name


def detect_source(source: Source) -> InputKind:
    """The kind of an input (told from its head); InputError naming it when it has none."""
    try:
        return detect_sample(source.sample)
    except InputError as exc:
        raise named(exc, source.path) from None


def detect_source_why(source: Source) -> Detection:
    """detect_source, with how many lines bear the kind's sign and which other kinds' signs it bears."""
    try:
        return detection(source.sample)
    except InputError as exc:
        raise named(exc, source.path) from None


def read_source(kind: InputKind, source: Source) -> Reading:
    """`kind.read(source)`, every InputError naming the input."""
    try:
        return kind.read(source)
    except InputError as exc:
        raise named(exc, source.path) from None


def read_input(path: str) -> tuple[InputKind, Reading, Source]:
    """Open, detect and read one input: (its kind, what it gave, the Source as read)."""
    source = open_source(path)
    kind = detect_source(source)
    return kind, read_source(kind, source), source


__all__ = ["NODE", "RUN", "ENV", "InputKind", "Detection", "detection", "detect_source_why", "KINDS", "BY_NAME", "NODE_KINDS", "RUN_KINDS", "UNKNOWN_KIND",
           "UNKNOWN_JSON", "kind_named", "detect_sample", "detect_kind", "detect_source", "read_source", "read_input"]
