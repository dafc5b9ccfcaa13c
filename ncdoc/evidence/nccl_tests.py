"""Facts from nccl-tests output: every *_perf binary, text or -J JSON (nccl_facts.md section 5).

Reads both result groups (out-of-place, in-place), `#wrong` counts or the old `error`
column, the -I per-iteration and -S timestamp columns, -C cputime, device lines, headers and
summaries, with launcher tags on every line and NCCL INFO lines interleaved (skipped: the
log parser reads those). Several runs in one file, cut-off tables and missing headers are
recorded as facts, never guessed away.

The peak bus bandwidth is the largest busbw of any row, either group: never the `Avg bus
bandwidth` line, which averages in the small sizes (kept separately as avg_busbw_gbps).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from collections.abc import Iterable

from ncdoc.evidence.nccl_tests_model import Device, Failure, GroupResult, NcclTestsFacts, Row

__all__ = ["Device", "Failure", "GroupResult", "NcclTestsFacts", "Row", "parse_nccl_tests", "parse_nccl_tests_file",
           "parse_nccl_tests_json"]


def parse_nccl_tests(lines: Iterable[str], source: str = "") -> NcclTestsFacts:
    """Facts from the text output of an nccl-tests binary (any iterable of lines)."""
    from ncdoc.evidence.nccl_tests_text import TextParser
    parser = TextParser()
    for number, line in enumerate(_split(lines), 1):
        parser.line(number, line)
    return parser.result(source)


def parse_nccl_tests_json(data: str | dict, source: str = "") -> NcclTestsFacts:
    """Facts from nccl-tests -J output (JSON_FILE_VERSION 3): the parsed object or its text."""
    from ncdoc.evidence.nccl_tests_json import facts_from_json
    return facts_from_json(data, source)


def parse_nccl_tests_file(path: str | Path) -> NcclTestsFacts:
    """Facts from a saved nccl-tests output, text or JSON; InputError when unusable."""
    from ncdoc.errors import InputError
    from ncdoc.readers.textfile import read_user_text
    text = read_user_text(path, "nccl-tests output")
    head = text.lstrip()
    if head.startswith("{"):
        from ncdoc.startup.json_load import load_data
        try:
            data = load_data(head)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", path=str(path)) from None
        return parse_nccl_tests_json(data, str(path))
    return parse_nccl_tests(text.splitlines(), str(path))


def _split(lines: Iterable[str]):
    """One line per item even when an item holds several (a whole text, or CRLF ends)."""
    for item in lines:
        if not isinstance(item, str):
            item = bytes(item).decode("utf-8", "replace") if isinstance(item, (bytes, bytearray)) else str(item)
        if "\n" in item.rstrip("\r\n"):
            yield from item.splitlines()
        else:
            yield item.rstrip("\r\n")
