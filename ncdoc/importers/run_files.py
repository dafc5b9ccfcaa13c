"""Reading run evidence and launch material: NCCL logs and nccl-tests output (text or -J JSON),
with a launch line or node listings pasted in; env and launch files. Each function takes a
Source and returns a Reading; the parsing is ncdoc.evidence's.

Every run file is read in one pass (ncdoc.evidence.run_scan): the NCCL log scanner and the
nccl-tests parser read every run file (a log often holds a results table and nccl-tests output
NCCL lines, so both read both), each given only the lines it can find something in.
"""

from __future__ import annotations

from ncdoc.errors import InputError
from ncdoc.importers.inputs import Reading, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence


def _reports(numbered_by_kind: dict[str, list], path: str) -> dict[str, tuple]:
    """The RAS report, NCCL DIAG lines and host output among the lines given for each, when there is any."""
    parse = {}
    if "ras" in numbered_by_kind:
        from ncdoc.evidence.ras_report import parse_ras_numbered
        parse["ras"] = parse_ras_numbered
    if "diag" in numbered_by_kind:
        from ncdoc.evidence.nccl_diag import parse_diag_numbered
        parse["diag"] = parse_diag_numbered
    if "host" in numbered_by_kind:
        from ncdoc.evidence.host_output import parse_host_numbered
        parse["host"] = parse_host_numbered
    out: dict[str, tuple] = {}
    for kind, numbered in numbered_by_kind.items():
        if numbered:
            got = parse[kind](numbered, path)
            if not got.empty:
                out[kind] = (got,)
    return out


def _embedded_nodes(numbered: Sequence[tuple[int, str]], path: str) -> tuple:
    """ibv_devinfo / ibstat / ibstatus / show_gids listings and `nvidia-smi topo -m` matrices pasted inside
    a run file (one file holding everything a user ran), read as node evidence too: from the lines that are
    not NCCL's own (a listing line never is)."""
    if not numbered:
        return ()
    from ncdoc.importers.detect import embedded_node_kinds
    text = "\n".join(line for _, line in numbered)
    kinds = embedded_node_kinds(text)
    if not kinds:
        return ()
    from ncdoc.importers import nodes
    parse = {"ibv_devinfo": nodes.rdma_listing, "topo_matrix": nodes.topo_matrix}
    found = []
    for kind in kinds:
        try:
            imp = parse[kind](text, path)
        except InputError:
            continue                    # a look-alike line, not a listing
        if imp.snapshot.hcas.hcas or imp.snapshot.paths.labels:
            found.append(imp)
    return tuple(found)


def read_run(kind: str, source: Source) -> Reading:
    """An NCCL log or nccl-tests text (either parser finds what it can in either), with what is pasted in:
    read in one pass (run_scan), whole when held, block by block when streamed."""
    from ncdoc.evidence.run_scan import scan_file, scan_lines
    path = source.path
    run = scan_file(path, source.plan) if source.streamed else scan_lines(source.lines, path)
    reports = _reports(run.report_lines, path)
    launch = (run.launch,) if run.launch.values else ()
    nodes = _embedded_nodes(run.other_lines, path)
    read_as = tuple(k for k, v in (("nccl_log", run.log), ("nccl_tests", run.tests)) if v is not None)
    read_as += tuple(_REPORT_NAMES[k] for k in reports)
    read_as += ("env",) if launch else ()
    read_as += tuple(imp.tool or imp.kind for imp in nodes)
    notes = ("large file: read as a stream",) if source.streamed else ()
    if not read_as:
        notes += (f"nothing NCCL could be read from this {kind.replace('_', ' ')}",)
    return Reading(kind, read_as, notes, nodes=nodes, logs=tuple(x for x in (run.log,) if x is not None),
                   tests=tuple(x for x in (run.tests,) if x is not None), launch=launch,
                   node_lines=run.other_lines if nodes else (), **reports)


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
