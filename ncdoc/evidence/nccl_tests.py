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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncdoc.evidence.citation import Evidence
from ncdoc.evidence.error_codes import NCCL_RESULT, NCCL_RESULT_BY_TEXT, cuda_error

MAX_ROWS = 20000
MAX_FAILURES = 32          # failure lines kept; every process prints its own, up its call stack


@dataclass(frozen=True)
class GroupResult:
    time_us: float | None = None       # per op; "cputime" with -C
    algbw: float | None = None         # GB/s
    busbw: float | None = None         # GB/s
    wrong: float | None = None         # #wrong (count) or the old `error` column (max error); None = N/A
    per_iter: dict[str, float | None] | None = None   # -I: i_min, i_max, i_p99 (us), i_cv% (%)


@dataclass(frozen=True)
class Row:
    size: int                          # bytes
    count: int | None
    type: str | None
    redop: str | None                  # "sum", "none" (non-reducing tests); None in old outputs without it
    root: int | None                   # -1 for rootless tests; None in old outputs without it
    oop: GroupResult | None
    ip: GroupResult | None
    timestamp: str | None = None       # -S
    run: int = 0                       # which run (header) of the file it belongs to
    line: int = 0
    complete: bool = True              # False: the line was cut short

    @property
    def busbw(self) -> float | None:
        vals = [g.busbw for g in (self.oop, self.ip) if g is not None and g.busbw is not None]
        return max(vals) if vals else None


@dataclass(frozen=True)
class Device:
    rank: int
    host: str
    pid: int | None = None
    group: int | None = None
    device: int | None = None
    bus_id: str | None = None          # "0000:18:00" or old "0x18"
    name: str = ""                     # "NVIDIA H100 80GB HBM3"
    run: int = 0
    line: int = 0


@dataclass(frozen=True)
class Failure:
    """One failure line of nccl-tests (src/common.h CUDACHECK, NCCLCHECK, TESTCHECK)."""
    kind: str                          # "cuda" | "nccl" | "test" (TESTCHECK: relayed up the call stack)
    host: str                          # hostname up to its first dot, as getHostName gives it
    pid: int | None                    # TESTCHECK lines only
    file: str                          # nccl-tests source file: "common.cu"
    source_line: int                   # line in that source file
    error: str = ""                    # cudaGetErrorString / ncclGetErrorString text
    last_error: str = ""               # ncclGetLastError (NCCL >= 2.13), "" when empty or absent
    error_name: str | None = None      # "cudaErrorMemoryAllocation", "ncclSystemError" (error_codes tables)
    meaning: str = ""                  # a CUDA error's one-line meaning from error_codes, else ""
    line: int = 0                      # line in the output
    text: str = ""                     # the line, launcher tag removed

    @property
    def location(self) -> str:
        return f"{self.file}:{self.source_line}"


@dataclass(frozen=True)
class NcclTestsFacts:
    source: str = ""
    format: str = "text"               # "text" | "json"
    collective: str | None = None      # "all_reduce", "sendrecv", ...
    collective_source: str | None = None   # "header" | "footer" | "json" | None
    tests_version: str | None = None
    nccl_version: str | None = None    # from nccl-library=NNNNN (or the JSON's nccl_version)
    config: dict[str, Any] = field(default_factory=dict)
    nthread: int | None = None
    ngpus: int | None = None
    devices: tuple[Device, ...] = ()
    hosts: tuple[str, ...] = ()
    nranks: int | None = None          # distinct ranks listed in the device lines
    rows: tuple[Row, ...] = ()
    peak_busbw_gbps: float | None = None
    peak_size: int | None = None
    peak_group: str | None = None      # "oop" | "ip"
    peak_algbw_gbps: float | None = None
    wrong_kind: str | None = None      # "count" (#wrong) | "max_error" (old `error` column)
    wrong_total: float | None = None   # sum of #wrong over rows and groups; None when none was checked
    wrong_rows: int = 0
    max_error: float | None = None
    validation_off: bool = False       # #wrong printed N/A (-c 0)
    avg_busbw_gbps: float | None = None    # the "Avg bus bandwidth" line (small sizes included)
    avg_busbw_lines: tuple[float, ...] = ()
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    runs: int = 0                      # runs seen (a "# nThread" header, or a table with no header)
    headers: int = 0                   # "# nThread ..." lines
    table_headers: int = 0             # "#  size  count  type ..." lines
    summaries: int = 0                 # "# Avg bus bandwidth" lines
    device_listings: int = 0           # "# Using devices" lines
    duplicate_ranks: tuple[int, ...] = ()   # rank numbers listed more than once
    truncated: bool = False
    truncation: tuple[str, ...] = ()
    header_missing: bool = False       # result rows with no table header before them
    columns: tuple[str, ...] = ()
    per_iter_timing: bool = False
    timestamps: bool = False
    cputime: bool = False
    errors: tuple[str, ...] = ()       # "# error: ..." lines
    bus_factor: float | None = None    # median busbw/algbw: 2(n-1)/n all_reduce, (n-1)/n gathers, 1 bcast
    n_implied: dict[str, int] = field(default_factory=dict)   # {"all_reduce": 16}: ranks the factor implies
    nccl_lines: int = 0                # interleaved NCCL INFO/WARN lines, left to the log parser
    env: dict[str, str] = field(default_factory=dict)   # JSON output: the NCCL_* environment of the run
    run_summaries: tuple[dict[str, Any], ...] = ()      # per run: ranks, hosts, pids, rows, peak, average
    failures: tuple[Failure, ...] = ()  # "Test CUDA/NCCL failure" and " .. Test failure" lines, in order
    failures_seen: int = 0             # all failure lines, also those beyond MAX_FAILURES
    failure_note: Evidence | None = None   # the free-text line that explains the first failure
    evidence: dict[str, tuple[Evidence, ...]] = field(default_factory=dict)

    def to_facts(self) -> dict[str, Any]:
        from ncdoc.evidence.nccl_tests_facts import tests_facts_dict
        return tests_facts_dict(self)


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
    from ncdoc.evidence.textfile import read_text_file
    text = read_text_file(path, what="nccl-tests output")
    head = text.lstrip()
    if head.startswith("{"):
        import json
        try:
            data = json.loads(head)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", path=str(path)) from None
        return parse_nccl_tests_json(data, str(path))
    return parse_nccl_tests(text.splitlines(), str(path))


# src/common.h: CUDACHECK "%s: Test CUDA failure %s:%d '%s'", NCCLCHECK "%s: Test NCCL failure %s:%d '%s / %s'"
# (NCCL >= 2.13; '%s' before), TESTCHECK " .. %s pid %d: Test failure %s:%d". getHostName cuts the name at
# its first dot, so a host holds no ':'; searched, not matched, so a launcher prefix in front does not matter.
# nccl-tests before 2.x printed "NCCL failure common.cu:874 'unhandled system error'": no host, no "Test"
_CHECK_FAIL = re.compile(r"(?:([^\s:]+): )?(?:Test )?(CUDA|NCCL) failure (\S+?\.cu):(\d+) '(.*?)'?\s*$")
_TEST_FAIL = re.compile(r"\.\. (\S+) pid (\d+): Test failure (\S+?):(\d+)\s*$")


def parse_failure(text: str, line: int = 0) -> Failure | None:
    """A Failure from one output line (launcher tag removed), None when it is no failure line."""
    if "failure" not in text or ("Test " not in text and ".cu:" not in text):
        return None
    m = _TEST_FAIL.search(text)
    if m:
        return Failure("test", m.group(1), int(m.group(2)), m.group(3), int(m.group(4)), line=line,
                       text=text.strip())
    m = _CHECK_FAIL.search(text)
    if m is None:
        return None
    host, lib, file, src, msg = m.group(1), m.group(2), m.group(3), int(m.group(4)), m.group(5)
    if lib == "CUDA":
        _, name, meaning = cuda_error(None, msg)
        return Failure("cuda", host, None, file, src, msg.strip(), "", name, meaning, line, text.strip())
    # ncclGetErrorString texts hold no " / ", so the first one separates the last error
    error, _, last = msg.partition(" / ")
    code = next((c for t, c in NCCL_RESULT_BY_TEXT.items() if error.strip().lower().startswith(t.lower())), None)
    return Failure("nccl", host, None, file, src, error.strip(), last.strip(),
                   NCCL_RESULT[code][0] if code is not None else None, "", line, text.strip())


_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def _split(lines: Iterable[str]):
    """One line per item even when an item holds several (a whole text, or CRLF ends)."""
    for item in lines:
        if not isinstance(item, str):
            item = bytes(item).decode("utf-8", "replace") if isinstance(item, (bytes, bytearray)) else str(item)
        if "\n" in item.rstrip("\r\n"):
            yield from item.splitlines()
        else:
            yield item.rstrip("\r\n")


def number(token: str) -> float | None:
    return float(token) if _NUMBER.match(token) else None


def nccl_version_from_code(code: int) -> str | None:
    """NCCL_VERSION_CODE -> "2.30.7" (major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before)."""
    if code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
