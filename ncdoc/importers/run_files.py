"""Reading run evidence and launch material: NCCL logs and nccl-tests output (text or -J JSON),
with a launch line or node listings pasted in; env and launch files. Each function takes a
Source and returns a Reading; the parsing is ncdoc.evidence's.

A run file too large to hold is streamed once, block by block, through both the NCCL log
scanner and the nccl-tests parser (a log often holds a results table and nccl-tests output
NCCL lines, so both read both).
"""

from __future__ import annotations

from ncdoc.errors import InputError
from ncdoc.importers.inputs import Reading, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence


def _has_log(facts: Any) -> bool:
    return bool(getattr(facts, "recognised_lines", 0) or getattr(facts, "problems", ())
                or getattr(facts, "nccl_version", None)
                or getattr(facts, "transport", None))       # channel lines alone ("... via NET/IB/0")


def _has_tests(facts: Any) -> bool:
    # A paste of the summary lines alone ("# Out of bounds values : 3 FAILED", "# Avg bus bandwidth")
    # still says whether the results were wrong and what the run averaged.
    return bool(getattr(facts, "rows", ()) or getattr(facts, "headers", 0) or getattr(facts, "devices", ())
                or getattr(facts, "failures", ()) or getattr(facts, "summaries", 0)
                or getattr(facts, "out_of_bounds", None) is not None)


def _parse_run_text(lines: Sequence[str], path: str) -> tuple[Any | None, Any | None]:
    """An NCCL log and/or an nccl-tests table from one text."""
    from ncdoc.evidence.nccl_log import parse_nccl_log
    from ncdoc.evidence.nccl_log_patterns import bare_line
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    # message bodies pasted without their prefix read as NCCL printed them (same line numbers: quotes stay verbatim)
    log = parse_nccl_log([bare_line(x) for x in lines], source=path)
    tests = parse_nccl_tests(lines, source=path)
    return (log if _has_log(log) else None), (tests if _has_tests(tests) else None)


def _markers() -> dict[str, tuple[bytes, ...]]:
    """What a text must hold for each report parser beside the log and nccl-tests parsers to find anything (the
    parsers' own markers): a block without one is not handed to it, so a large log costs one find per block."""
    from ncdoc.evidence.host_output import MARKERS as HOST
    from ncdoc.evidence.nccl_diag import MARKERS as DIAG
    from ncdoc.evidence.ras_report import MARKERS as RAS
    return {k: tuple(m.encode() for m in v) for k, v in (("ras", RAS), ("diag", DIAG), ("host", HOST))}


def _reports(numbered_by_kind: dict[str, list], path: str) -> dict[str, tuple]:
    """The RAS report, NCCL DIAG lines and host output among the lines given for each, when there is any."""
    from ncdoc.evidence.host_output import parse_host_numbered
    from ncdoc.evidence.nccl_diag import parse_diag_numbered
    from ncdoc.evidence.ras_report import parse_ras_numbered
    parse = {"ras": parse_ras_numbered, "diag": parse_diag_numbered, "host": parse_host_numbered}
    out: dict[str, tuple] = {}
    for kind, numbered in numbered_by_kind.items():
        if numbered:
            got = parse[kind](numbered, path)
            if not got.empty:
                out[kind] = (got,)
    return out


def _report_lines(text: str, lines: Sequence[str]) -> dict[str, list]:
    """Each report parser's input from a held text, for the kinds the text has a marker of: the lines that hold
    one of its markers (every line a DIAG or host parser reads does; a RAS report's sections need all lines)."""
    out: dict[str, list] = {}
    for kind, markers in _markers().items():
        words = [m.decode() for m in markers]
        if not any(w in text for w in words):
            continue
        if kind == "ras" and _ras_report_in(text):
            out[kind] = list(enumerate(lines, 1))
        else:
            out[kind] = [(n, x) for n, x in enumerate(lines, 1) if any(w in x for w in words)]
    return out


def _ras_report_in(text: str) -> bool:
    """Whether the text holds an ncclras report's sections (not only RAS lines of a log)."""
    from ncdoc.evidence.ras_report import REPORT_MARKERS
    return any(m in text for m in REPORT_MARKERS)


def _stream_run_file(path: str) -> tuple[Any | None, Any | None, dict[str, tuple]]:
    """The same for a file too large to hold, read once: each block goes to the log scanner, and its
    lines on to the nccl-tests parser (and to the report parsers, for blocks with their markers)."""
    from ncdoc.evidence.nccl_log_scan import LogScanner
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    from ncdoc.evidence.textfile import iter_file_blocks
    scanner = LogScanner()
    markers_of = _markers()
    kept: dict[str, list] = {k: [] for k in markers_of}
    base = [0]

    def lines():
        for block in iter_file_blocks(path):
            scanner.feed(block)
            text = block.decode("utf-8", "replace").splitlines()
            for kind, markers in markers_of.items():
                if len(kept[kind]) < _MAX_STREAMED_REPORT_LINES and any(m in block for m in markers):
                    words = [m.decode() for m in markers]
                    whole = kind == "ras" and _ras_report_in(block.decode("utf-8", "replace"))
                    kept[kind].extend((n, x) for n, x in enumerate(text, base[0] + 1)
                                      if whole or any(w in x for w in words))
            base[0] += len(text)
            yield from text

    tests = parse_nccl_tests(lines(), source=path)
    log = scanner.result(path)
    return (log if _has_log(log) else None), (tests if _has_tests(tests) else None), _reports(kept, path)


_MAX_STREAMED_REPORT_LINES = 1 << 20     # lines of a large file kept for the report parsers


def _launch_of_run(lines: Sequence[str], path: str) -> tuple[Any, ...]:
    """The settings on a launch line pasted with a run (`mpirun -x NCCL_IB_DISABLE=1 ./all_reduce_perf`)."""
    from ncdoc.evidence.launch_env import parse_launch_env_in_run
    found = parse_launch_env_in_run(lines, path)
    return (found,) if found.values else ()


def _embedded_nodes(source: Source) -> tuple:
    """ibv_devinfo / ibstat / ibstatus / show_gids listings and `nvidia-smi topo -m` matrices pasted inside
    a run file (one file holding everything a user ran), read as node evidence too."""
    from ncdoc.importers import nodes
    from ncdoc.importers.detect import embedded_node_kinds
    parse = {"ibv_devinfo": nodes.rdma_listing, "topo_matrix": nodes.topo_matrix}
    found = []
    for kind in embedded_node_kinds(source.text):
        try:
            imp = parse[kind](source.text, source.path)
        except InputError:
            continue                    # a look-alike line, not a listing
        if imp.snapshot.hcas.hcas or imp.snapshot.paths.labels:
            found.append(imp)
    return tuple(found)


def read_run(kind: str, source: Source) -> Reading:
    """An NCCL log or nccl-tests text (either parser finds what it can in either), with what is pasted in."""
    path = source.path
    if source.streamed:
        log, table, reports = _stream_run_file(path)
        launch = _launch_of_run(source.lines, path)           # the launch line sits at the top
        read_as = tuple(k for k, v in (("nccl_log", log), ("nccl_tests", table)) if v is not None)
        read_as += tuple(_REPORT_NAMES[k] for k in reports)
        return Reading(kind, read_as + (("env",) if launch else ()), ("large file: read as a stream",),
                       logs=tuple(x for x in (log,) if x is not None),
                       tests=tuple(x for x in (table,) if x is not None), launch=launch, **reports)
    log, table = _parse_run_text(source.lines, path)
    reports = _reports(_report_lines(source.text, source.lines), path)
    launch = _launch_of_run(source.lines, path)
    nodes = _embedded_nodes(source)
    read_as = tuple(k for k, v in (("nccl_log", log), ("nccl_tests", table)) if v is not None)
    read_as += tuple(_REPORT_NAMES[k] for k in reports)
    read_as += ("env",) if launch else ()
    read_as += tuple(imp.tool or imp.kind for imp in nodes)
    notes = () if read_as else (f"nothing NCCL could be read from this {kind.replace('_', ' ')}",)
    return Reading(kind, read_as, notes, nodes=nodes, logs=tuple(x for x in (log,) if x is not None),
                   tests=tuple(x for x in (table,) if x is not None), launch=launch, **reports)


_REPORT_NAMES = {"ras": "ras_report", "diag": "nccl_diag", "host": "host_output"}


def read_ras(source: Source) -> Reading:
    """An ncclras report: its -f json form, else its text (read with the other run parsers: a job's output
    often holds the report beside the framework's or NCCL's lines)."""
    if source.sample.is_json:
        from ncdoc.evidence.ras_report import parse_ras_json
        return Reading("ras_report", ("ras_json",), ras=(parse_ras_json(source.sample.data, source.path),))
    return read_run("ras_report", source)


def read_nccl_tests(source: Source) -> Reading:
    """nccl-tests output: its -J JSON (results, config, the run's env), else its text."""
    if source.sample.is_json:
        from ncdoc.evidence.nccl_tests import parse_nccl_tests_json
        return Reading("nccl_tests", ("nccl_tests_json",),
                       tests=(parse_nccl_tests_json(source.sample.data, source.path),))
    return read_run("nccl_tests", source)


def read_env(source: Source) -> Reading:
    """An env file or launch script (shell, sbatch, mpirun/srun/docker lines, YAML/JSON)."""
    from ncdoc.evidence.launch_env import parse_launch_env
    return Reading("env", ("env",), launch=(parse_launch_env(source.whole_text(), source.path),))


__all__ = ["read_run", "read_ras", "read_nccl_tests", "read_env"]
