"""The signs of each kind of input: the patterns and tests ncdoc tells an input's kind by.

The table of kinds (ncdoc/importers/kinds.py) walks these in its order, and that order
matters: an NCCL log often carries env lines, nccl-tests output carries NCCL INFO lines, so
the most specific signs are tested first. Each sign takes a Sample: the text (or the head of
a file too large to hold) and, when it is JSON, the parsed value.
"""

from __future__ import annotations

import re

from ncdoc.errors import InputError
from ncdoc.evidence.lazy_re import lazy
from ncdoc.startup.json_load import load_data
from ncdoc.startup.compiled_patterns import precompiled

class _Sign:
    """A pattern a kind's lines bear, compiled the first time a text holds one of the words every match of it
    holds (`needs`): most texts hold few kinds, and a pattern that cannot match is neither run nor compiled.

    Where it looks in a Sample: a pattern whose every alternative is anchored at a line start never matches a
    line of NCCL's own shape (`host:pid:tid [dev] NCCL INFO ...`), so it reads only the other lines
    (`free` is None); one with alternatives that may match anywhere reads every line when the text holds one
    of the words those need (`free`), else the other lines alone; `free` = ALL: every line always."""

    __slots__ = ("pattern", "flags", "needs", "free", "raw", "rx")

    def __init__(self, pattern: str, needs: tuple, flags: int = re.M, free: tuple | None = None, raw: bool = False):
        self.pattern, self.flags, self.needs, self.free, self.raw = pattern, flags, needs, free, raw
        self.rx = lazy(pattern, flags)

    def possible(self, text: str) -> bool:
        for need in self.needs:
            if need in text if isinstance(need, str) else need(text):
                return True
        return False

    def search(self, text: str):
        return self.rx.search(text) if self.possible(text) else None

    def count(self, text: str) -> int:
        return _count(self.rx, text) if self.possible(text) else 0

    def lines_bearing(self, sample: "Sample") -> int:
        """How many lines of `sample` bear this sign (up to _CAP). The words that tell whether the clean text is
        needed are looked for in the text as given (a clean line is part of its line): no clean text is made
        for a sign the text cannot bear."""
        if self.free is None:
            return self.count(sample.other)
        if self.free is ALL:
            if not self.possible(sample.text):
                return 0
            return self.count(sample.text if self.raw and sample.plain_breaks else sample.clean)
        if any(w in sample.text if isinstance(w, str) else w(sample.text) for w in self.free):
            return self.count(sample.clean)
        return self.count(sample.other)


ALL = ()      # a sign that may match any line


def _found(pattern: str):
    """A need that is a pattern starting with a literal (C skips to its candidates), compiled when first asked."""
    rx = lazy(pattern, re.M)

    def need(text: str) -> bool:
        return rx.search(text) is not None
    return need


def _both(word: str, need):
    """A need that holds when the text holds `word` and `need` holds (the cheap test first)."""
    return lambda text: word in text and need(text)


_PATH_TOKEN = r"(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)"
_HOST = r"(?:[\w.-]+:[ \t]+)?"  # pdsh/clush put "node1: " before every line
_TOPO_ROW = _Sign(rf"^[ \t]*{_HOST}GPU\d+[ \t]+{_PATH_TOKEN}(?:[ \t]|$)",
                  (_found(rf"GPU\d+[ \t]+{_PATH_TOKEN}(?:[ \t]|$)"),))
_TOPO_HEADER = _Sign(rf"^[ \t]*{_HOST}GPU0(?:[ \t]+(?:GPU\d+|NIC\d+|mlx\w+))*[ \t]+"
                     r"(?:GPU\d+|NIC\d+|mlx\w+|CPU Affinity|NUMA)", (_found(r"GPU0[ \t]"),))
_TESTS_ROW = _Sign(r"^[ \t]*\d+[ \t]+\d+[ \t]+(?:float|double|half|bfloat16|b?float\d*|u?int\d+|"
                   r"fp8\w*|f8\w*)[ \t]", ("float", "double", "half", "fp8", "f8", _found(r"int\d")))
_TESTS_HEAD = _Sign(r"^#[ \t]+size[ \t]+count[ \t]+type|Avg bus bandwidth|Collective test|"
                    r"^#[ \t]*Out of bounds values",
                    (_found(r"#[ \t]+size[ \t]+count"), "Avg bus bandwidth", "Collective test", "Out of bounds values"),
                    free=("Avg bus bandwidth", "Collective test"))
# the "#" is optional: pasted from a rendered issue, markdown turned these lines into headings
_TESTS_PREAMBLE = _Sign(r"^#?[ \t]*nThread[ \t]+\d+[ \t]+nGpus|^#[ \t]*Using devices|"
                        r"^#?[ \t]*Rank[ \t]+\d+[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid[ \t]+\d+[ \t]+on[ \t]",
                        ("nThread", "Using devices", _found(r"Rank[ \t]+\d+[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid")))
# NCCL's own lines (INFO/WARN/TRACE, and 2.31's diagnostics "NCCL DIAG"), or a framework's report of an NCCL
# failure (PyTorch c10d, JAX/XLA: "ncclInternalError: ..." then "Last error:") when NCCL_DEBUG was not set
# "nccl" at a word's start is said as a lookbehind after the literal, not as a \b before it: with every
# alternative led by a literal the search skips to their first letters instead of trying each position (a
# 1000-line count took twice as long)
_NCCL_LOG = _Sign(r"NCCL (?:INFO|WARN|TRACE|DIAG)\b|NCCL version \d|NCCL error|"
                  r"nccl(?<!\wnccl)(?:[A-Z]\w*Error|InvalidArgument|InvalidUsage): |Last error:",
                  ("NCCL", "nccl", "Last error:"),
                  free=ALL, raw=True)     # each alternative holds a space, which no wrapper of a line can hold
# NCCL message bodies pasted without the "host:pid:tid [dev] NCCL" prefix (each led by a literal)
# NCCL 2.3 and older: "host:pid:tid [dev] INFO ..." / "host:pid:tid [dev] file.cu:63 WARN ..." (no "NCCL")
_OLD_NCCL = _Sign(r"^[^\s:]+:\d+:\d+ \[\d+\] (?:[\w./+-]+\.\w+:\d+ )?(?:INFO|WARN) ", ("INFO ", "WARN "))
_BARE_NCCL = _Sign(r"^[ \t]*(?:INFO|WARN) (?:NET/|NCCL_|Bootstrap|Using network|GPU Direct RDMA|Channel |Ring |"
                   r"comm 0x|Call to |[\w./+-]{1,80}\.(?:cc|cu|c|h):\d+ )"
                   r"|^[ \t]*(?:(?:Channel|Ring) \d+(?:/\d+)? : )?\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? "
                   r"(?:\[(?:send|receive)\] )?via (?:NET|P2P|SHM|COLLNET)/"
                   # a WARN body frameworks print on its own after "Last error:": the NVLS multicast bind (2.27+)
                   r"|^[ \t]*Failed to bind NVLink SHARP \(NVLS\) Multicast memory",
                   ("INFO ", "WARN ", " via ", "Failed to bind NVLink"))
# ncclras (src/ras/client_support.cc): its section titles, table headers and error lines; RAS monitor events
_RAS_REPORT = _Sign(r"^(?:Job summary|Communicators\.\.\..*|Errors|Warnings)[ \t]*\n=+[ \t]*$|"
                    r"^[ \t]*Group[ \t]+Comms[ \t]+Nodes[ \t]+Ranks|^No communicator data collected!|"
                    r"^NCCL version \S+ compiled with CUDA \d|^CUDA runtime version \d+, driver version \d+|"
                    r"^[ \t]+Missing communicator data from \d|considered dead \(unreachable via the RAS network\)|"
                    r"^#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|MISMATCH|ERROR)|"
                    r"^(?:\[[^\]]{4,40}\] )?PEER_(?:DEAD|NEW|CONNECTING): |^RAS Monitor Mode",
                    ("\n=", "Comms", "No communicator data", "compiled with CUDA", "CUDA runtime version",
                     "Missing communicator data", "considered dead", ") INCOMPLETE", ") MISMATCH", ") ERROR", "PEER_",
                     "RAS Monitor Mode"), free=("considered dead (unreachable",))
# PyTorch ProcessGroupNCCL / c10d and the frameworks around it (DeepSpeed, Lightning, vLLM) reporting on
# NCCL collectives: the watchdog, its work records, distributed errors
_FRAMEWORK = _Sign(r"ProcessGroupNCCL|Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=|"
                   r"torch\.distributed\.|DistBackendError|c10d::|NCCL communicator was aborted|"
                   r"TORCH_NCCL_\w+|ncclCommInitRank failed",
                   ("ProcessGroupNCCL", "Watchdog caught", "WorkNCCL(", "torch.distributed.", "DistBackendError",
                    "c10d::", "NCCL communicator was aborted", "TORCH_NCCL_", "ncclCommInitRank failed"), free=ALL)
# What people paste about the host a job ran on: `ulimit -a`, nvidia-smi and NVML failures, the kernel
# module's /proc/driver/nvidia/version, `nvcc --version`, the driver's API-mismatch message
_HOST_OUTPUT = _Sign(r"^max locked memory[ \t]+\(kbytes, -l\)|^core file size[ \t]+\(blocks, -c\)|"
                     r"Failed to initialize NVML: |^NVRM version: |NVML library version: |"
                     r"^\|?[ \t]*NVIDIA-SMI \d[\d.]*[ \t]+Driver Version: |NVIDIA-SMI has failed|"
                     r"Driver/library version mismatch|^Cuda compilation tools, release \d|NVRM: API mismatch|"
                     r"NVIDIA driver on your system is too old|not compatible with the current PyTorch installation",
                     ("max locked memory", "core file size", "NVML", "NVRM", "NVIDIA-SMI", "Driver/library version",
                      "Cuda compilation tools", "NVIDIA driver on your system", "not compatible with the current PyTorch"),
                     free=("Failed to initialize NVML: ", "NVML library version: ", "NVIDIA-SMI has failed",
                           "Driver/library version mismatch", "NVRM: API mismatch", "NVIDIA driver on your system is too old",
                           "not compatible with the current PyTorch installation"))
# nccl-tests' own check lines (src/common.h CUDACHECK / NCCLCHECK / TESTCHECK; before 2019 without host and "Test")
_TESTS_FAILURE = _Sign(r"(?:^|: )(?:Test )?(?:CUDA|Cuda|NCCL) failure [\w./-]+\.cu:\d+ '|"
                       r"^ ?\.\. \S+ pid \d+: Test failure [\w./-]+:\d+", (" failure ",),
                       free=(_both(" failure ", _found(r": (?:Test )?(?:CUDA|Cuda|NCCL) failure ")),))
_IBSTATUS = _Sign(r"^Infiniband device '[^']+' port \d+ status:", ("Infiniband device '",))
# Every sign is searched over the whole sample: none may let \s (which spans line ends) run from a line's
# start, or 20 KB of blank lines cost seconds; [ \t] instead.
_IBSTAT = _Sign(r"^CA '[^'\n]+'[ \t\r]*$|^[ \t]+CA type:", ("CA '", "CA type:"))
_SHOW_GIDS = _Sign(r"^[ \t]*DEV[ \t]+PORT[ \t]+INDEX[ \t]+GID\b", ("INDEX",))
# `ibv_devinfo -v` prints each port's GID table as "\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2"; people
# often paste those lines alone, without the hca_id line above them.
_IBV_GID_LINE = r"^[ \t]*GID\[[ \t]*\d+\]:[ \t]*[0-9A-Fa-f]*:[0-9A-Fa-f:.]*"
_IBV_DEVINFO = _Sign(r"^[ \t]*hca_id:[ \t]*\S|^[ \t]*\d+ HCAs? found|^[ \t]*No IB devices found|"
                     r"(?:^|[\s$#>])ibv_devinfo(?:\s|$)|" + _IBV_GID_LINE,
                     ("hca_id:", "HCA found", "HCAs found", "No IB devices found", "ibv_devinfo", "GID["),
                     free=("ibv_devinfo",))
_ENV = _Sign(r"(?:^|[\s\"',;{\[])(?:export[ \t]+)?NCCL_[A-Z0-9_]+[ \t]*(?:=|:[ \t\"'0-9A-Za-z^])|"
             r"-x[ \t]+NCCL_[A-Z0-9_]+|name:[ \t]*[\"']?NCCL_",
             (_found(r"NCCL_[A-Z0-9_]+[ \t]*(?:=|:[ \t\"'0-9A-Za-z^])"), "-x", "name:"), free=ALL)


def _xml_root(text: str) -> str | None:
    m = re.match(r"\s*(?:<\?.*?\?>\s*|<!--.*?-->\s*|<!DOCTYPE[^>]*>\s*)*<([A-Za-z_][\w.-]*)", text, re.S)
    return m.group(1) if m else None


def ibv_tools_present(text: str) -> tuple[str, ...]:
    """Every RDMA tool whose output appears in `text` (people paste several), most specific first."""
    signs = (("show_gids", _SHOW_GIDS), ("ibstatus", _IBSTATUS), ("ibstat", _IBSTAT),
             ("ibv_devinfo", _IBV_DEVINFO))
    return tuple(tool for tool, sign in signs if sign.search(text))


def detect_ibv_tool(text: str) -> str:
    """Which RDMA tool printed `text`: "show_gids" | "ibstatus" | "ibstat" | "ibv_devinfo"."""
    tools = ibv_tools_present(text)
    if not tools:
        raise InputError("not ibv_devinfo, ibstat, ibstatus or show_gids output")
    return tools[0]


def check_text(text: str, what: str = "input") -> None:
    """Reject empty and binary text with one clear line."""
    if not text.strip():
        raise InputError(f"{what} is empty")
    if "\x00" in text:
        raise InputError(f"{what} is binary (it contains NUL bytes), not text")
    bad = text.count("\ufffd")
    controls = len(_CONTROLS.findall(text, 0, 65536))
    if bad > 4 or controls > max(8, len(text[:65536]) // 100):
        raise InputError(f"{what} is binary or not UTF-8 text")


_CONTROLS = precompiled("[\x00-\x08\x0e-\x1a\x1c-\x1f]")     # below a space, and no tab, line end or escape

_EMBEDDED_IBV = _Sign(r"^[ \t]*hca_id:[ \t]*\S", ("hca_id:",))


def embedded_node_kinds(text: str) -> tuple[str, ...]:
    """Node evidence pasted inside a log or nccl-tests output (one file holding everything a user ran):
    ibv_devinfo / ibstat / ibstatus / show_gids listings and `nvidia-smi topo -m` matrices."""
    kinds = []
    if _EMBEDDED_IBV.search(text) or _IBSTAT.search(text) or _IBSTATUS.search(text) or _SHOW_GIDS.search(text):
        kinds.append("ibv_devinfo")
    if _TOPO_HEADER.search(text) and _TOPO_ROW.search(text):
        kinds.append("topo_matrix")
    return tuple(kinds)


SIGN_CHARS = 1 << 20          # the head detection reads signs in, as streamed inputs have it (inputs.HEAD_BYTES)


class Sample:
    """What detection looks at: the text without a byte-order mark, the same lines without the launcher and
    log-shipper prefixes in front of them (`clean`, made when a sign first asks), and, when it is JSON,
    the value."""

    __slots__ = ("text", "stripped", "data", "json_error", "_clean", "_counts", "_other", "plain_breaks")
    NOT_JSON = object()

    def __init__(self, text: str):
        check_text(text)
        self.text = text.lstrip("\ufeff")
        self.stripped = self.text.lstrip()
        self.data = Sample.NOT_JSON
        self.json_error: str | None = None       # why text that looks like JSON is not
        self._clean: str | None = None
        self._counts: dict = {}
        self._other: str | None = None
        if self.stripped[:1] in ("{", "["):
            try:
                self.data = load_data(self.stripped)
            except ValueError as exc:
                where = f" at line {exc.lineno}" if getattr(exc, "lineno", None) else ""
                if _LOOKS_JSON.match(self.stripped):
                    self.json_error = f"looks like JSON but is not valid JSON ({getattr(exc, 'msg', exc)}{where})"
            except RecursionError:
                self.json_error = "looks like JSON but nests too deeply to read"
        if len(self.text) > SIGN_CHARS:
            # the signs are read in the head (a kind shows in its first lines; every sign is a search over
            # the whole sample, and a 64 MB text would take seconds per kind); JSON above was read whole
            self.text = self.text[:SIGN_CHARS].rsplit("\n", 1)[0]
            self.stripped = self.text.lstrip()
        # lines end at "\n" alone (so the text's lines are the lines of splitlines()) and no line ends with
        # Ray's folded count: then each clean line is its line without a prefix
        text = self.text
        self.plain_breaks = (text.isascii() and not any(c in text for c in _OTHER_BREAKS)
                             and "across cluster]" not in text)

    @property
    def is_json(self) -> bool:
        return self.data is not Sample.NOT_JSON

    def count(self, sign: _Sign) -> int:
        """How many lines of the clean text bear `sign` (up to _CAP), counted once per sample."""
        got = self._counts.get(sign)
        if got is None:
            got = self._counts[sign] = sign.lines_bearing(self)
        return got

    def has(self, sign: _Sign) -> bool:
        return self.count(sign) > 0

    @property
    def other(self) -> str:
        """The clean text without the lines of NCCL's own shape (what the line-anchored signs read). With plain
        line ends, the lines of that shape are told in the text as given (a launcher tag glued to the host
        token is part of it), and only the others are cleaned."""
        if self._other is None:
            if self.plain_breaks and self._clean is None:
                from ncdoc.evidence.wrappers import strip_wrappers
                text = self.text
                starts = [m.end() for m in _OTHER_LINE.finditer(text)]
                if _PLAIN_LINE.match(text) is None:
                    starts.insert(0, 0)
                out = []
                for at in starts:
                    end = text.find("\n", at)
                    out.append(strip_wrappers(text[at:end if end >= 0 else len(text)]))
                if out and not out[-1] and text.endswith("\n"):
                    out.pop()                   # the line after the last newline is not a line
                self._other = "\n".join(out)
            else:
                plain = _PLAIN_LINE.match
                self._other = "\n".join(x for x in self.clean.split("\n") if plain(x) is None)
        return self._other

    @property
    def clean(self) -> str:
        """The text, each line without what launchers and log shippers put in front of it."""
        if self._clean is None:
            from ncdoc.evidence.wrappers import unwrapped_text
            self._clean = unwrapped_text(self.text)
        return self._clean


# A line as NCCL prints it: a host token (a launcher tag without a space glued to it), the device, the level.
_PLAIN_LINE = precompiled(r"\S{1,200} \[\d+\] NCCL (?:INFO|WARN|TRACE) ")
_OTHER_LINE = precompiled(r"\n(?!\S{1,200} \[\d+\] NCCL (?:INFO|WARN|TRACE) )")   # a newline before another line
# what splitlines() also ends a line at, each looked for alone (a C character search; a regex class over a
# 1 MiB head took 7 ms)
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"

# Text that is meant as JSON: an object, or an array of values; "[1,0]<stdout>:" and "[rank0]:" are
# launcher tags, not a broken array. Compiled when first asked: only text that fails to parse as JSON is.
_LOOKS_JSON = lazy(r'\{\s*(?:"|\}|$)|\[\s*(?:[\[{"\]]|-?\d+(?:\.\d+)?\s*(?:,\s*-?\d+\s*)*\]\s*(?:,|$))')

_CAP = 1000          # sign lines counted per kind: enough to weigh one kind against another


def _count(rx: re.Pattern, text: str) -> int:
    """How many lines of `text` bear `rx` (a line with two matches counts once), up to _CAP. After a match the
    search goes on from the next line, so a line of a million matches is not searched a million times."""
    n, at, search = 0, 0, rx.search
    while n < _CAP:
        m = search(text, at)
        if m is None:
            break
        n += 1
        at = text.find("\n", m.end() if m.end() > m.start() else m.start())
        if at < 0:
            break
        at += 1
    return n


def _export_line_starts(text: str, starts: set) -> None:
    """Add the starts of lines with an `--export=...NCCL_...` (srun) list: found with str.find, each line looked
    at once (a regex running to the line's end from every "--export" is quadratic on a long line)."""
    at = 0
    while len(starts) < _CAP:
        i = text.find("--export", at)
        if i < 0:
            break
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        if text[i + 8:i + 9] in ("=", " ") and text.find("NCCL_", i + 9, end) >= 0:
            starts.add(text.rfind("\n", at, i) + 1 or at)
        at = end + 1


# ---------------------------------------------------------------- the signs, one per kind
# Each returns how many lines (or structures) of the sample bear it: 0, not this kind.

def is_snapshot_json(s: Sample) -> int:
    d = s.data
    return int(s.is_json and isinstance(d, dict) and "schema_version" in d and bool(
        {"host", "gpus", "hcas", "pci", "origin"} & set(d)))


def is_nccl_topo_xml(s: Sample) -> int:
    return int(s.stripped.startswith("<") and _xml_root(s.stripped) == "system")


def is_hwloc_xml(s: Sample) -> int:
    return int(s.stripped.startswith("<") and _xml_root(s.stripped) == "topology")


def _tests_table(s: Sample) -> int:
    return s.count(_TESTS_ROW) + s.count(_TESTS_HEAD)


def is_ras_report(s: Sample) -> int:
    """ncclras output: its text report (sections, communicator table, errors), or its -f json report."""
    if s.is_json:
        d = s.data
        return int(isinstance(d, dict) and isinstance(d.get("communicators"), list)
                   and bool({"nccl_version", "ras", "communicators_count"} & set(d)))
    return s.count(_RAS_REPORT)


def nccl_log_lines(s: Sample) -> int:
    return max(s.count(_NCCL_LOG), s.count(_BARE_NCCL) + s.count(_OLD_NCCL))


# A result row, or more table header lines than this, make a text nccl-tests output however many NCCL lines
# it holds; a header or two pasted among NCCL lines (the table's head, cut before its rows) do not
STRAY_TABLE_LINES = 2


def is_nccl_log(s: Sample) -> int:
    """NCCL's own lines, unless the text has an nccl-tests table (whose runs print NCCL lines too)."""
    table = s.count(_TESTS_ROW) > 0 or s.count(_TESTS_HEAD) > STRAY_TABLE_LINES
    return 0 if table else nccl_log_lines(s)


def is_nccl_tests(s: Sample) -> int:
    """nccl-tests output: a results table or its summary lines, its preamble, its failure lines; or its -J JSON."""
    if s.is_json:
        d = s.data       # JSON_FILE_VERSION 3: results + config
        return int(isinstance(d, dict) and isinstance(d.get("results"), list) and "schema_version" not in d
                   and ("config" in d or "nccl_version" in d or "average_bus_bandwidth" in d))
    return _tests_table(s) + s.count(_TESTS_PREAMBLE) + s.count(_TESTS_FAILURE)


def is_framework_log(s: Sample) -> int:
    """A framework's lines about NCCL collectives (PyTorch's ProcessGroupNCCL watchdog, c10d errors)."""
    return s.count(_FRAMEWORK)


def is_topo_matrix(s: Sample) -> int:
    return s.count(_TOPO_ROW) + s.count(_TOPO_HEADER)


def is_rdma_listing(s: Sample) -> int:
    return sum(1 for sign in (_SHOW_GIDS, _IBSTATUS, _IBSTAT, _IBV_DEVINFO) if s.has(sign))


def is_host_output(s: Sample) -> int:
    """Output of the commands people run on the job's host: ulimit -a, nvidia-smi, the driver's version."""
    return s.count(_HOST_OUTPUT)


def is_env(s: Sample) -> int:
    """Env or launch material: NCCL_ assignments, launcher options; or a JSON mapping naming NCCL_ variables."""
    if s.is_json:
        return int(_mentions_nccl_var(s.data))
    got = s._counts.get(_ENV)
    if got is None:
        got = s._counts[_ENV] = _env_lines(s.text)      # env lines are read as written, prefixes and all
    return got


# _ENV's alternatives, each led by a literal (so C skips to its candidates), and what may stand before an
# assignment's name: every alternative matches within one line, so a line bears _ENV when one of these
# matches on it
_ENV_ASSIGN = _Sign(r"NCCL_[A-Z0-9_]+[ \t]*(?:=|:[ \t\"'0-9A-Za-z^])", ("NCCL_",), 0)
_ENV_OPTIONS = (_Sign(r"-x[ \t]+NCCL_[A-Z0-9_]+", ("-x",), 0), _Sign(r"name:[ \t]*[\"']?NCCL_", ("name:",), 0))
_BEFORE_NAME = frozenset(" \t\n\r\f\v\"',;{[")


def _sign_line_starts(sign: _Sign, text: str, starts: set, keep=None) -> None:
    """Add the starts of lines bearing `sign` (matches `keep` accepts). After a line is counted the search goes
    on from the next one, and a line start is looked for only back to where the search began: linear in the
    text, however many matches a line holds."""
    if not sign.possible(text):
        return
    search, at = sign.rx.search, 0
    while len(starts) < _CAP:
        m = search(text, at)
        if m is None:
            return
        start = m.start()
        if keep is not None and not keep(text, start):
            at = start + 1
            continue
        starts.add(text.rfind("\n", at, start) + 1 or at)
        at = text.find("\n", max(m.end(), start + 1) - 1)
        if at < 0:
            return
        at += 1


def _assign_starts_a_name(text: str, at: int) -> bool:
    return at == 0 or text[at - 1] in _BEFORE_NAME or text[at - 1].isspace()


def _env_lines(text: str) -> int:
    """_count(_ENV, text), found through _ENV's literal-led alternatives and srun's --export lists."""
    starts: set[int] = set()
    _sign_line_starts(_ENV_ASSIGN, text, starts, _assign_starts_a_name)
    for sign in _ENV_OPTIONS:
        _sign_line_starts(sign, text, starts)
    _export_line_starts(text, starts)
    return min(len(starts), _CAP)


def _mentions_nccl_var(data, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(data, dict):
        return any((isinstance(k, str) and k.startswith("NCCL_")) or _mentions_nccl_var(v, depth + 1)
                   for k, v in data.items())
    if isinstance(data, list):
        return any(_mentions_nccl_var(x, depth + 1) for x in data)
    return isinstance(data, str) and data.startswith("NCCL_")
