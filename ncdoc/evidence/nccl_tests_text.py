"""Line-by-line reader of nccl-tests text output (src/util.cu `PRINT` formats, 2.x to 2.19.6).

Columns come from the table header when there is one; a table pasted without its header is
read by the shape of its rows (redop present or not, root present or not, -I groups of 8),
and a row cut short keeps the columns it has. Derived facts (peak, #wrong totals, bus factor)
are computed by `nccl_tests_derive.derive`, shared with the JSON reader.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence.citation import Citation, CitationBook
from ncdoc.evidence.error_codes import NCCL_RESULT, NCCL_RESULT_BY_TEXT, cuda_error
from ncdoc.evidence.nccl_tests_derive import collective_name, derive, nccl_version_from_code
from ncdoc.evidence.nccl_tests_model import Device, Failure, GroupResult, NcclTestsFacts, Row
from ncdoc.evidence.wrappers import drop_repeat_suffix, wrapper_end
from ncdoc.evidence.lazy_re import lazy
from ncdoc.readers.numbers import is_digits

MAX_ROWS = 20000
MAX_FAILURES = 32          # failure lines kept; every process prints its own, up its call stack

# pdsh/clush put "host: " before every line (launcher, shipper and viewer prefixes: evidence/wrappers.py)
_HOST_TAG = lazy(r"[\w.\-]+: (?=#|\s*\d)")
_VERSION = lazy(r"nccl-tests version (\S+)(?: nccl-headers=(\d{1,20}(?!\d)))?(?: nccl-library=(\d{1,20}(?!\d)))?")
_START = lazy(r"Collective test (starting|concluded): (\S+)")
_CONFIG = lazy(r"nThread (\d{1,20}(?!\d)) nGpus (\d{1,20}(?!\d)) minBytes (\d{1,20}(?!\d)) maxBytes (\d{1,20}(?!\d))(?: step: (\d{1,20}(?!\d))\((factor|bytes)\))?"
                     r"(?: warmup iters: (\d{1,20}(?!\d)))?(?: iters: (\d{1,20}(?!\d)))?(?: agg iters: (\d{1,20}(?!\d)))?(?: validation: (\d{1,20}(?!\d)))?"
                     r"(?: graph: (\d{1,20}(?!\d)))?(?: unalign: (\d{1,20}(?!\d)))?")
_DEVICE = lazy(r"^#\s*Rank\s+(\d{1,20}(?!\d))(?:\s+Group\s+(\d{1,20}(?!\d)))?\s+Pid\s+(\d{1,20}(?!\d))\s+on\s+(\S+)\s+device\s+(\d{1,20}(?!\d))"
                     r"(?:\s+\[([^\]]*)\])?\s*(.*)$")
_DEVICE_START = lazy(r"^#\s*Rank\s+\d+")
# nccl-tests' comment lines that a markdown renderer turns into headings, dropping the "#"
_HASHLESS = lazy(r"(?:nThread \d+ nGpus|Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+ on |Using devices$|"
                       r"Out of bounds values\s*:|Avg bus bandwidth\s*:|Collective test (?:starting|concluded)|"
                       r"nccl-tests version )")
_ROW = lazy(r"^\s*(\d{1,20}(?!\d))\s+(\d{1,20}(?!\d))\s+([A-Za-z_]\w*)(.*)$")
_OOB = lazy(r"Out of bounds values\s*:\s*(\d{1,20}(?!\d))\s*(OK|FAILED)?")
_AVG = lazy(r"Avg bus bandwidth\s*:\s*([-+\d.eE]+|nan|inf)")
_DATE, _TIME = lazy(r"^\d{4}-\d\d-\d\d$"), lazy(r"^\d\d:\d\d:\d\d$")
# "%6.0le" of old outputs; a large #wrong printed by "%6g" has a decimal point ("1.04858e+06") or a positive
# exponent with a non-zero digit ("1e+06").
_OLD_ERROR = lazy(r"^(?:0[eE][-+]\d\d|\d[eE]-\d\d)$")
# Messages such as util.cu's "Invalid number of GPUs: ..." go to stderr just before the TESTCHECK lines;
# of the free text right before the first failure, the first of its last few lines explains it.
_NOTE_LINES = 6
# words, and not a shell prompt or `set -x` trace of the command that was run
_NOTE = lazy(r"^(?![$>+] ).*[A-Za-z]{3}")


class TextParser:
    def __init__(self) -> None:
        self.book = CitationBook()
        self.f: dict[str, Any] = {"runs": 0, "headers": 0, "table_headers": 0, "summaries": 0, "device_listings": 0,
                                  "nccl_lines": 0, "config": {}, "errors": [], "avg": [], "truncation": []}
        self.rows: list[Row] = []
        self.devices: list[Device] = []
        self.run = -1
        self.columns: tuple[str, ...] = ()
        self.layout: dict[str, Any] = {"redop": None, "root": None, "wrong": None}
        self.per_iter = self.timestamps = self.cputime = False
        self.in_table = False
        self.last_partial: str | None = None
        self.failures: list[Failure] = []
        self.failures_seen = 0
        self.free_text: list[tuple[int, str]] = []   # free-text lines since the last table/comment line
        self.note: Citation | None = None
        self.command_part = ""                       # a command line being joined over its continuation lines
        self.command_line = 0

    def line(self, number_: int, raw: str) -> None:
        if "NCCL INFO" in raw or "NCCL WARN" in raw or "NCCL TRACE" in raw:
            # a failure line that another process's NCCL line ran into is still a failure line
            failure = parse_failure(raw, number_) if "Test " in raw else None
            if failure is not None:
                self._failure(failure)
            else:
                self.f["nccl_lines"] += 1
            return
        end = wrapper_end(raw)
        text = raw[end:] if raw[:end].strip() else raw      # a row's own indentation is kept
        m = _HOST_TAG.match(text)
        if m:
            text = text[m.end():]
        s = drop_repeat_suffix(text).strip()
        if not s:
            return
        if not s.startswith("#") and _HASHLESS.match(s):
            s = "# " + s            # pasted from a rendered issue: markdown ate the "#" of these lines
        if s.startswith("#"):
            self._comment(number_, s, text)
            self.last_partial = None
            self.free_text.clear()
            return
        failure = parse_failure(s, number_)
        if failure is not None:
            self._failure(failure)
            return
        if self.command_part or "_perf" in s or s.endswith("\\"):
            self._command(number_, s)
        if is_digits(s[0]):
            self._row(number_, text, s)
            self.free_text.clear()
        elif len(self.free_text) < _NOTE_LINES:
            self.free_text.append((number_, s))
        else:
            self.free_text = self.free_text[1:] + [(number_, s)]

    def count_nccl_lines(self, n: int) -> None:
        """NCCL's own lines left out by the one-pass reader (run_scan): counted, as line() would."""
        self.f["nccl_lines"] += n

    def _command(self, n: int, s: str) -> None:
        """The command line that ran the test (pasted above its output), continuation lines joined: how many
        GPUs each process drives (-g, -t) and how many processes each host runs."""
        self.command_part = (self.command_part + " " + s.rstrip("\\")) if self.command_part else s.rstrip("\\")
        if not self.command_line:
            self.command_line = n
        if s.endswith("\\"):
            return
        cmd, self.command_part = self.command_part, ""
        m = _BINARY.search(cmd)
        if m is None:
            self.command_line = 0
            return
        got: dict[str, Any] = {"test": m.group(1), "line": self.command_line, "text": cmd[:300]}
        self.command_line = 0
        for key, rx in _COMMAND_OPTIONS:
            v = rx.search(cmd, m.end())
            if v:
                got[key] = int(v.group(1))
        head = cmd[:m.start()]
        per = _PER_HOST.search(head) or (_MPI_PER_NODE.search(head) if _MPIRUN.search(head) else None)
        if per:
            got["per_host"] = int(per.group(1))
        else:
            slots = _HOST_SLOTS.findall(head)
            if slots and len(set(slots)) == 1:
                got["per_host"] = int(slots[0])
        self.f["command"] = got

    def _failure(self, failure: Failure) -> None:
        self.failures_seen += 1
        if not self.failures:
            note = next((x for x in self.free_text if _NOTE.match(x[1])), None)
            self.note = Citation.of(*note) if note else None
        if len(self.failures) < MAX_FAILURES:
            self.failures.append(failure)
        self.book.add("failure", failure.line, failure.text)

    # ------------------------------------------------------------ header and footer lines

    def _new_run(self) -> None:
        self.run += 1
        self.f["runs"] += 1
        self.layout = {"redop": None, "root": None, "wrong": None}

    def _comment(self, n: int, s: str, text: str) -> None:
        f = self.f
        if "nccl-tests version" in s:
            m = _VERSION.search(s)
            if m:
                f["tests_version"] = m.group(1)
                if m.group(3):
                    f["nccl_version"] = nccl_version_from_code(int(m.group(3)))
        elif "Collective test" in s:
            m = _START.search(s)
            if m:
                coll = collective_name(m.group(2))
                if m.group(1) == "starting" or not f.get("collective"):
                    f["collective"], f["collective_source"] = coll, "header" if m.group(1) == "starting" else "footer"
                if m.group(1) == "concluded":
                    self.in_table = False
        elif s.startswith("# nThread") or s.startswith("#nThread"):
            f["headers"] += 1
            self._new_run()
            m = _CONFIG.search(s)
            if m:
                keys = ("nthread", "ngpus", "minbytes", "maxbytes", "step", "step_kind", "warmup_iters", "iters",
                        "agg_iters", "validation", "graph", "unalign")
                cfg = {k: (v if k == "step_kind" else int(v)) for k, v in zip(keys, m.groups()) if v is not None}
                f["config"] = cfg
            self.book.add("header", n, text)
        elif s.startswith("# Using devices"):
            f["device_listings"] += 1
        elif _DEVICE_START.match(s):
            m = _DEVICE.match(s)
            if self.run < 0:
                self._new_run()
            if m:
                self.devices.append(Device(rank=int(m.group(1)), host=m.group(4), pid=int(m.group(3)),
                                           group=int(m.group(2)) if m.group(2) else None, device=int(m.group(5)),
                                           bus_id=m.group(6), name=m.group(7).strip(), run=self.run, line=n))
            else:
                f["truncation"].append(f"device line {n} cut short")
        elif "size" in s and "count" in s and "type" in s:
            f["table_headers"] += 1
            cols = tuple(s.lstrip("#").split())
            self.columns = cols
            self.per_iter = "i_min" in cols
            self.timestamps = "timestamp" in cols
            self.cputime = "cputime" in cols
            self.layout = {"redop": "redop" in cols, "root": "root" in cols,
                           "wrong": "error" if "error" in cols and "#wrong" not in cols else "count"}
            if self.run < 0 or self.in_table:
                if self.run < 0:
                    self._new_run()
            self.in_table = True
        elif s.startswith("# Out of bounds") or "Out of bounds values" in s:
            m = _OOB.search(s)
            if m:
                f["oob"] = int(m.group(1))
                f["oob_ok"] = (m.group(2) or "OK") == "OK"
                self.book.add("out_of_bounds", n, text)
        elif "Avg bus bandwidth" in s:
            f["summaries"] += 1
            m = _AVG.search(s)
            avg = number(m.group(1)) if m else None
            if avg is not None:
                f["avg"].append(avg)
                f.setdefault("avg_runs", {})[self.run] = avg
            self.book.add("summary", n, text)
            self.in_table = False
        elif s.startswith("# error:"):
            if len(f["errors"]) < 16:
                f["errors"].append(s[len("# error:"):].strip())
        elif s.startswith("# Per-Iteration Report"):
            self.per_iter = True

    # ------------------------------------------------------------ result rows

    def _row(self, n: int, text: str, s: str) -> None:
        m = _ROW.match(s)
        if m is None:
            self.last_partial = s
            return
        if not self.in_table and self.f["table_headers"] == 0:
            self.f["header_missing"] = True
        if self.run < 0:
            self._new_run()
        toks = m.group(4).split()
        ts = None
        if len(toks) >= 2 and _DATE.match(toks[-2]) and _TIME.match(toks[-1]):
            ts, toks = f"{toks[-2]} {toks[-1]}", toks[:-2]
            self.timestamps = True
        redop = root = None
        has_redop = self.layout["redop"]
        if has_redop is None:
            has_redop = bool(toks) and number(toks[0]) is None and toks[0] != "N/A"
        if has_redop and toks:
            redop = toks.pop(0)
        width = 8 if self.per_iter else 4
        has_root = self.layout["root"]
        if has_root is None:
            k = len(toks)
            if k and k % width == 1:
                has_root = True
            elif k and k % width == 0:
                has_root = bool(redop) and toks[0] == "-1"
            else:
                has_root = bool(toks) and toks[0] == "-1"
            if k in (2 * width, 2 * width + 1):
                self.layout["root"] = has_root       # a complete row settles the table's layout
                self.layout["redop"] = bool(redop)
        if has_root and toks:
            root_tok = toks.pop(0)
            root = int(root_tok) if is_digits(root_tok.lstrip("-")) else None
        if self.layout.get("wrong") is None and len(toks) >= 4 and _OLD_ERROR.match(toks[3]):
            self.layout["wrong"] = "error"          # old outputs print the max error ("5e-07", "0e+00")
        groups = [_group(toks[i:i + width], width) for i in (0, width)]
        complete = len(toks) >= 2 * width
        if not complete:
            self.f["truncation"].append(f"row at line {n} cut short")
        if groups[0] is not None and len(self.rows) < MAX_ROWS:     # a row cut before any value is dropped
            self.rows.append(Row(int(m.group(1)), int(m.group(2)), m.group(3), redop, root, groups[0], groups[1],
                                 ts, self.run, n, complete))
        if self.book.wants("rows"):
            self.book.add("rows", n, text)
        self.last_partial = None if complete else s

    def result(self, source: str) -> NcclTestsFacts:
        if self.last_partial is not None:
            self.f["truncation"].append("the output ends inside a result row")
        if self.rows and not self.f["summaries"]:
            self.f["truncation"].append("no summary after the last result row")
        self.f["failures"], self.f["failures_seen"], self.f["failure_note"] = (
            self.failures, self.failures_seen, self.note)
        return derive(self.f, self.rows, self.devices, self.columns, self.per_iter, self.timestamps, self.cputime,
                      self.book, source, "text", {"error": "max_error", "count": "count"}.get(self.layout.get("wrong")))


def has_tests(facts: Any) -> bool:
    """Whether nccl-tests output was read. A paste of the summary lines alone ("# Out of bounds values : 3
    FAILED", "# Avg bus bandwidth") still says whether the results were wrong and what the run averaged."""
    return bool(getattr(facts, "rows", ()) or getattr(facts, "headers", 0) or getattr(facts, "devices", ())
                or getattr(facts, "failures", ()) or getattr(facts, "summaries", 0)
                or getattr(facts, "out_of_bounds", None) is not None)


def _group(toks: list[str], width: int) -> GroupResult | None:
    if not toks:
        return None
    vals = [number(t) for t in toks]
    get = (lambda i: vals[i] if i < len(vals) else None)
    per_iter = None
    if width == 8 and len(toks) > 4:
        per_iter = {"i_min": get(4), "i_max": get(5), "i_p99": get(6), "i_cv%": get(7)}
    return GroupResult(get(0), get(1), get(2), get(3), per_iter)


# src/common.h: CUDACHECK "%s: Test CUDA failure %s:%d '%s'", NCCLCHECK "%s: Test NCCL failure %s:%d '%s / %s'"
# (NCCL >= 2.13; '%s' before), TESTCHECK " .. %s pid %d: Test failure %s:%d". getHostName cuts the name at
# its first dot, so a host holds no ':'; searched, not matched, so a launcher prefix in front does not matter.
# nccl-tests before 2.x printed "NCCL failure common.cu:874 'unhandled system error'": no host, no "Test"
# Led by its literal (a leading optional "host: " group would be retried from every character of a long
# token); the host and "Test " are read from the text before it, the message's closing quote after.
_CHECK_FAIL = lazy(r"(CUDA|Cuda|NCCL) failure (\S+?\.cu):(\d{1,20}(?!\d)) '(.*)$")
_CHECK_HOST = lazy(r"([^\s:]+): (?:Test )?$")
_TEST_FAIL = lazy(r"\.\. (\S+) pid (\d{1,20}(?!\d)): Test failure (\S+?):(\d{1,20}(?!\d))\s*$")


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
    before = _CHECK_HOST.search(text[max(0, m.start() - 300):m.start()])
    msg = m.group(4).rstrip()
    msg = msg[:-1] if msg.endswith("'") else msg
    host, lib, file, src = before.group(1) if before else None, m.group(1), m.group(2), int(m.group(3))
    if lib != "NCCL":
        _, name, meaning = cuda_error(None, msg)
        return Failure("cuda", host, None, file, src, msg.strip(), "", name, meaning, line, text.strip())
    # ncclGetErrorString texts hold no " / ", so the first one separates the last error
    error, _, last = msg.partition(" / ")
    code = next((c for t, c in NCCL_RESULT_BY_TEXT.items() if error.strip().lower().startswith(t.lower())), None)
    return Failure("nccl", host, None, file, src, error.strip(), last.strip(),
                   NCCL_RESULT[code][0] if code is not None else None, "", line, text.strip())


_NUMBER = lazy(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")

# the nccl-tests command line (src/common.cu options) and the launcher's processes per host
_BINARY = lazy(r"(?:^|[\s/])(\w+?)_perf(?:_mpi)?(?=\s|$)")
_COMMAND_OPTIONS = (("ngpus", lazy(r"\s(?:-g|--ngpus)(?:=|\s*)(\d{1,20}(?!\d))")),
                    ("nthreads", lazy(r"\s(?:-t|--nthreads)(?:=|\s*)(\d{1,20}(?!\d))")))
_PER_HOST = lazy(r"(?:-npernode|--npernode|--ntasks-per-node|--nproc[-_]per[-_]node|-ppn|--map-by\s+ppr:)"
                       r"(?:=|\s+)?(\d{1,20}(?!\d))")
_MPIRUN = lazy(r"\b(?:mpirun|mpiexec|orterun)\b")
_MPI_PER_NODE = lazy(r"\s-N\s+(\d{1,20}(?!\d))")          # Open MPI's -N is processes per node (srun's is nodes)
_HOST_SLOTS = lazy(r"(?<![\w.\-])[\w.\-]+:(\d{1,20}(?!\d))(?=[,\s]|$)")   # from a name's start only


def number(token: str) -> float | None:
    """A table cell's number; None for "N/A" and for what is no finite number (a 400-digit cell is inf)."""
    if len(token) > 64 or not _NUMBER.match(token):
        return None
    value = float(token)
    return value if value - value == 0 else None
