"""Reading triage inputs: run files (NCCL logs, nccl-tests output, with a launch line or node listings
pasted in), nccl-tests -J JSON, and files too large to hold, which are streamed."""

from __future__ import annotations

from typing import Any, Sequence

from ncdoc.checks.evidence_common import NodeEvidence
from ncdoc.errors import InputError


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
    """An NCCL log and/or an nccl-tests table from one text: nccl-tests output carries NCCL INFO
    lines, and a log often has a results table inside it, so both parsers read both kinds."""
    from ncdoc.evidence.nccl_log import parse_nccl_log
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    from ncdoc.evidence.nccl_log_patterns import bare_line
    # message bodies pasted without their prefix read as NCCL printed them (same line numbers: quotes stay verbatim)
    log = parse_nccl_log([bare_line(x) for x in lines], source=path)
    tests = parse_nccl_tests(lines, source=path)
    return (log if _has_log(log) else None), (tests if _has_tests(tests) else None)


def _launch_of_run(lines: Sequence[str], path: str, launch: list[Any]) -> tuple[str, ...]:
    """The settings on a launch line pasted with a run (`mpirun -x NCCL_IB_DISABLE=1 ./all_reduce_perf`):
    appended to `launch` as one more launch file; ("env",) when there were any."""
    from ncdoc.evidence.launch_env import parse_launch_env_in_run
    found = parse_launch_env_in_run(lines, path)
    if not found.values:
        return ()
    launch.append(found)
    return ("env",)


def _tests_json(text: str | None) -> dict | None:
    """The object of an nccl-tests -J file (results + config, JSON_FILE_VERSION 3), else None."""
    if text is None or not text.lstrip().startswith("{"):
        return None
    import json
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and isinstance(data.get("results"), list) and "schema_version" not in data \
            and ("config" in data or "nccl_version" in data or "average_bus_bandwidth" in data):
        return data
    return None


def _parse_run_file(path: str) -> tuple[Any | None, Any | None]:
    """The same for a file too large to hold: each parser streams it."""
    from ncdoc.evidence.nccl_log import parse_nccl_log_file
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    log = parse_nccl_log_file(path)
    tests = parse_nccl_tests(_stream_lines(path), source=path)
    return (log if _has_log(log) else None), (tests if _has_tests(tests) else None)


# Above this size a log is streamed through the parsers instead of read whole (NCCL INFO logs of
# large jobs reach gigabytes); its kind is told from its head.
STREAM_BYTES = 64 << 20
HEAD_BYTES = 1 << 20


def _read(path: str) -> tuple[str | None, str]:
    """(the whole text, or None for a file to stream; the text to tell its kind from)."""
    from pathlib import Path

    from ncdoc.evidence.textfile import binary_reason
    from ncdoc.importers.detect import read_input
    p = Path(path)
    try:
        big = path != "-" and p.is_file() and p.stat().st_size > STREAM_BYTES
    except OSError:
        big = False
    if not big:
        text = read_input(path)
        return text, text
    with p.open("rb") as f:
        head = f.read(HEAD_BYTES)
    reason = binary_reason(head[:65536])
    if reason:
        raise InputError(f"cannot be used: {reason}", path=path)
    return None, head.decode("utf-8", "replace").rsplit("\n", 1)[0]


def _stream_lines(path: str):
    with open(path, encoding="utf-8", errors="replace") as f:
        yield from f


def _embedded_node(text: str, path: str, lines: tuple[str, ...], snaps: list, node_ev: list) -> tuple[str, ...]:
    """ibv_devinfo / ibstat / topo -m output pasted inside a run file: read it as node evidence too."""
    from ncdoc.importers import import_text
    from ncdoc.importers.detect import embedded_node_kinds

    read = []
    for kind in embedded_node_kinds(text):
        try:
            imp = import_text(text, source=path, kind=kind)
        except InputError:
            continue                    # a look-alike line, not a listing
        snap = imp.snapshot
        if not (snap.hcas.hcas or snap.paths.labels):
            continue
        snaps.append(snap)
        hs = snap.hcas.status
        node_ev.append(NodeEvidence(path, kind, imp.tool, tuple(imp.notes), hs.state, hs.reason, lines))
        read.append(imp.tool or kind)
    return tuple(read)
