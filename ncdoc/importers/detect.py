"""The signs of each kind of input: the patterns and tests ncdoc tells an input's kind by.

The table of kinds (ncdoc/importers/kinds.py) walks these in its order, and that order
matters: an NCCL log often carries env lines, nccl-tests output carries NCCL INFO lines, so
the most specific signs are tested first. Each sign takes a Sample: the text (or the head of
a file too large to hold) and, when it is JSON, the parsed value.
"""

from __future__ import annotations

import re

from ncdoc.errors import InputError
from ncdoc.startup.json_load import load_data

_PATH_TOKEN = r"(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)"
_HOST = r"(?:[\w.-]+:[ \t]+)?"  # pdsh/clush put "node1: " before every line
_TOPO_ROW = re.compile(rf"^[ \t]*{_HOST}GPU\d+[ \t]+{_PATH_TOKEN}(?:[ \t]|$)", re.M)
_TOPO_HEADER = re.compile(rf"^[ \t]*{_HOST}GPU0(?:[ \t]+(?:GPU\d+|NIC\d+|mlx\w+))*[ \t]+"
                          r"(?:GPU\d+|NIC\d+|mlx\w+|CPU Affinity|NUMA)", re.M)
_TESTS_ROW = re.compile(r"^[ \t]*\d+[ \t]+\d+[ \t]+(?:float|double|half|bfloat16|b?float\d*|u?int\d+|"
                        r"fp8\w*|f8\w*)[ \t]", re.M)
_TESTS_HEAD = re.compile(r"^#[ \t]+size[ \t]+count[ \t]+type|Avg bus bandwidth|Collective test|"
                         r"^#[ \t]*Out of bounds values", re.M)
# the "#" is optional: pasted from a rendered issue, markdown turned these lines into headings
_TESTS_PREAMBLE = re.compile(r"^#?[ \t]*nThread[ \t]+\d+[ \t]+nGpus|^#[ \t]*Using devices|"
                             r"^#?[ \t]*Rank[ \t]+\d+[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid[ \t]+\d+[ \t]+on[ \t]", re.M)
# NCCL's own lines (INFO/WARN/TRACE, and 2.31's diagnostics "NCCL DIAG"), or a framework's report of an NCCL
# failure (PyTorch c10d, JAX/XLA: "ncclInternalError: ..." then "Last error:") when NCCL_DEBUG was not set
_NCCL_LOG = re.compile(r"NCCL (?:INFO|WARN|TRACE|DIAG)\b|NCCL version \d|NCCL error|"
                       r"\bnccl(?:[A-Z]\w*Error|InvalidArgument|InvalidUsage): |Last error:", re.M)
# NCCL message bodies pasted without the "host:pid:tid [dev] NCCL" prefix (each led by a literal)
# NCCL 2.3 and older: "host:pid:tid [dev] INFO ..." / "host:pid:tid [dev] file.cu:63 WARN ..." (no "NCCL")
_OLD_NCCL = re.compile(r"^[^\s:]+:\d+:\d+ \[\d+\] (?:[\w./+-]+\.\w+:\d+ )?(?:INFO|WARN) ", re.M)
_BARE_NCCL = re.compile(r"^[ \t]*(?:INFO|WARN) (?:NET/|NCCL_|Bootstrap|Using network|GPU Direct RDMA|Channel |Ring |"
                        r"comm 0x|Call to |[\w./+-]{1,80}\.(?:cc|cu|c|h):\d+ )"
                        r"|^[ \t]*(?:(?:Channel|Ring) \d+(?:/\d+)? : )?\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? "
                        r"(?:\[(?:send|receive)\] )?via (?:NET|P2P|SHM|COLLNET)/"
                        # a WARN body frameworks print on its own after "Last error:": the NVLS multicast bind (2.27+)
                        r"|^[ \t]*Failed to bind NVLink SHARP \(NVLS\) Multicast memory", re.M)
# ncclras (src/ras/client_support.cc): its section titles, table headers and error lines; RAS monitor events
_RAS_REPORT = re.compile(r"^(?:Job summary|Communicators\.\.\..*|Errors|Warnings)[ \t]*\n=+[ \t]*$|"
                         r"^[ \t]*Group[ \t]+Comms[ \t]+Nodes[ \t]+Ranks|^No communicator data collected!|"
                         r"^NCCL version \S+ compiled with CUDA \d|^CUDA runtime version \d+, driver version \d+|"
                         r"^[ \t]+Missing communicator data from \d|considered dead \(unreachable via the RAS network\)|"
                         r"^#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|MISMATCH|ERROR)|"
                         r"^(?:\[[^\]]{4,40}\] )?PEER_(?:DEAD|NEW|CONNECTING): |^RAS Monitor Mode", re.M)
# PyTorch ProcessGroupNCCL / c10d and the frameworks around it (DeepSpeed, Lightning, vLLM) reporting on
# NCCL collectives: the watchdog, its work records, distributed errors
_FRAMEWORK = re.compile(r"ProcessGroupNCCL|Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=|"
                        r"torch\.distributed\.|DistBackendError|c10d::|NCCL communicator was aborted|"
                        r"TORCH_NCCL_\w+|ncclCommInitRank failed", re.M)
# What people paste about the host a job ran on: `ulimit -a`, nvidia-smi and NVML failures, the kernel
# module's /proc/driver/nvidia/version, `nvcc --version`, the driver's API-mismatch message
_HOST_OUTPUT = re.compile(r"^max locked memory[ \t]+\(kbytes, -l\)|^core file size[ \t]+\(blocks, -c\)|"
                          r"Failed to initialize NVML: |^NVRM version: |NVML library version: |"
                          r"^\|?[ \t]*NVIDIA-SMI \d[\d.]*[ \t]+Driver Version: |NVIDIA-SMI has failed|"
                          r"Driver/library version mismatch|^Cuda compilation tools, release \d|NVRM: API mismatch|"
                          r"NVIDIA driver on your system is too old|not compatible with the current PyTorch installation",
                          re.M)
# nccl-tests' own check lines (src/common.h CUDACHECK / NCCLCHECK / TESTCHECK; before 2019 without host and "Test")
_TESTS_FAILURE = re.compile(r"(?:^|: )(?:Test )?(?:CUDA|Cuda|NCCL) failure [\w./-]+\.cu:\d+ '|"
                            r"^ ?\.\. \S+ pid \d+: Test failure [\w./-]+:\d+", re.M)
_IBSTATUS = re.compile(r"^Infiniband device '[^']+' port \d+ status:", re.M)
# Every sign is searched over the whole sample: none may let \s (which spans line ends) run from a line's
# start, or 20 KB of blank lines cost seconds; [ \t] instead.
_IBSTAT = re.compile(r"^CA '[^'\n]+'[ \t\r]*$|^[ \t]+CA type:", re.M)
_SHOW_GIDS = re.compile(r"^[ \t]*DEV[ \t]+PORT[ \t]+INDEX[ \t]+GID\b", re.M)
# `ibv_devinfo -v` prints each port's GID table as "\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2"; people
# often paste those lines alone, without the hca_id line above them.
_IBV_GID_LINE = r"^[ \t]*GID\[[ \t]*\d+\]:[ \t]*[0-9A-Fa-f]*:[0-9A-Fa-f:.]*"
_IBV_DEVINFO = re.compile(r"^[ \t]*hca_id:[ \t]*\S|^[ \t]*\d+ HCAs? found|^[ \t]*No IB devices found|"
                          r"(?:^|[\s$#>])ibv_devinfo(?:\s|$)|" + _IBV_GID_LINE, re.M)
_ENV = re.compile(r"(?:^|[\s\"',;{\[])(?:export[ \t]+)?NCCL_[A-Z0-9_]+[ \t]*(?:=|:[ \t\"'0-9A-Za-z^])|"
                  r"-x[ \t]+NCCL_[A-Z0-9_]+|name:[ \t]*[\"']?NCCL_", re.M)


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
    controls = sum(1 for ch in text[:65536] if ord(ch) < 32 and ch not in "\t\n\r\f\v\x1b")
    if bad > 4 or controls > max(8, len(text[:65536]) // 100):
        raise InputError(f"{what} is binary or not UTF-8 text")


_EMBEDDED_IBV = re.compile(r"^[ \t]*hca_id:[ \t]*\S", re.M)


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

    __slots__ = ("text", "stripped", "data", "json_error", "_clean")
    NOT_JSON = object()

    def __init__(self, text: str):
        check_text(text)
        self.text = text.lstrip("\ufeff")
        self.stripped = self.text.lstrip()
        self.data = Sample.NOT_JSON
        self.json_error: str | None = None       # why text that looks like JSON is not
        self._clean: str | None = None
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

    @property
    def is_json(self) -> bool:
        return self.data is not Sample.NOT_JSON

    @property
    def clean(self) -> str:
        """The text, each line without what launchers and log shippers put in front of it."""
        if self._clean is None:
            from ncdoc.evidence.wrappers import unwrapped_text
            self._clean = unwrapped_text(self.text)
        return self._clean


# Text that is meant as JSON: an object, or an array of values; "[1,0]<stdout>:" and "[rank0]:" are
# launcher tags, not a broken array.
_LOOKS_JSON = re.compile(r'\{\s*(?:"|\}|$)|\[\s*(?:[\[{"\]]|-?\d+(?:\.\d+)?\s*(?:,\s*-?\d+\s*)*\]\s*(?:,|$))')

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


def _export_lines(text: str) -> int:
    """Lines with an `--export=...NCCL_...` (srun) list: found with str.find, each line looked at once."""
    n, at = 0, 0
    while n < _CAP:
        i = text.find("--export", at)
        if i < 0:
            break
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        if text[i + 8:i + 9] in ("=", " ") and text.find("NCCL_", i + 9, end) >= 0:
            n += 1
        at = end + 1
    return n


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
    return _count(_TESTS_ROW, s.clean) + _count(_TESTS_HEAD, s.clean)


def is_ras_report(s: Sample) -> int:
    """ncclras output: its text report (sections, communicator table, errors), or its -f json report."""
    if s.is_json:
        d = s.data
        return int(isinstance(d, dict) and isinstance(d.get("communicators"), list)
                   and bool({"nccl_version", "ras", "communicators_count"} & set(d)))
    return _count(_RAS_REPORT, s.clean)


def nccl_log_lines(s: Sample) -> int:
    return max(_count(_NCCL_LOG, s.clean), _count(_BARE_NCCL, s.clean) + _count(_OLD_NCCL, s.clean))


# A result row, or more table header lines than this, make a text nccl-tests output however many NCCL lines
# it holds; a header or two pasted among NCCL lines (the table's head, cut before its rows) do not
STRAY_TABLE_LINES = 2


def is_nccl_log(s: Sample) -> int:
    """NCCL's own lines, unless the text has an nccl-tests table (whose runs print NCCL lines too)."""
    table = _TESTS_ROW.search(s.clean) is not None or _count(_TESTS_HEAD, s.clean) > STRAY_TABLE_LINES
    return 0 if table else nccl_log_lines(s)


def is_nccl_tests(s: Sample) -> int:
    """nccl-tests output: a results table or its summary lines, its preamble, its failure lines; or its -J JSON."""
    if s.is_json:
        d = s.data       # JSON_FILE_VERSION 3: results + config
        return int(isinstance(d, dict) and isinstance(d.get("results"), list) and "schema_version" not in d
                   and ("config" in d or "nccl_version" in d or "average_bus_bandwidth" in d))
    return _tests_table(s) + _count(_TESTS_PREAMBLE, s.clean) + _count(_TESTS_FAILURE, s.clean)


def is_framework_log(s: Sample) -> int:
    """A framework's lines about NCCL collectives (PyTorch's ProcessGroupNCCL watchdog, c10d errors)."""
    return _count(_FRAMEWORK, s.clean)


def is_topo_matrix(s: Sample) -> int:
    return _count(_TOPO_ROW, s.clean) + _count(_TOPO_HEADER, s.clean)


def is_rdma_listing(s: Sample) -> int:
    return len(ibv_tools_present(s.clean))


def is_host_output(s: Sample) -> int:
    """Output of the commands people run on the job's host: ulimit -a, nvidia-smi, the driver's version."""
    return _count(_HOST_OUTPUT, s.clean)


def is_env(s: Sample) -> int:
    """Env or launch material: NCCL_ assignments, launcher options; or a JSON mapping naming NCCL_ variables."""
    if s.is_json:
        return int(_mentions_nccl_var(s.data))
    return min(_CAP, _count(_ENV, s.text) + _export_lines(s.text))


def _mentions_nccl_var(data, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(data, dict):
        return any((isinstance(k, str) and k.startswith("NCCL_")) or _mentions_nccl_var(v, depth + 1)
                   for k, v in data.items())
    if isinstance(data, list):
        return any(_mentions_nccl_var(x, depth + 1) for x in data)
    return isinstance(data, str) and data.startswith("NCCL_")
