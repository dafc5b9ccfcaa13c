"""What kind of evidence a pasted or saved text is, and reading it safely from a file.

The order of the tests matters: an NCCL log often carries env lines, nccl-tests output
carries NCCL INFO lines, so the most specific signs are tested first.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ncdoc.errors import InputError

KINDS = ("snapshot_json", "nccl_topo_xml", "hwloc_xml", "topo_matrix", "ibv_devinfo",
         "nccl_log", "nccl_tests", "env")

UNKNOWN_KIND = ("not a file ncdoc knows: expected an NCCL log, nccl-tests output, `nvidia-smi topo -m`, "
                "ibv_devinfo/ibstat/ibstatus/show_gids output, an NCCL or hwloc topology XML, "
                "an env file or an ncdoc snapshot")

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
# NCCL's own lines, or a framework's report of an NCCL failure (PyTorch c10d, JAX/XLA: "ncclInternalError:
# ..." then "Last error:") when NCCL_DEBUG was not set
_NCCL_LOG = re.compile(r"NCCL (?:INFO|WARN|TRACE)\b|NCCL version \d|NCCL error|\bnccl(?:[A-Z]\w*Error|InvalidArgument|InvalidUsage): |Last error:",
                       re.M)
# NCCL message bodies pasted without the "host:pid:tid [dev] NCCL" prefix (each led by a literal)
# NCCL 2.3 and older: "host:pid:tid [dev] INFO ..." / "host:pid:tid [dev] file.cu:63 WARN ..." (no "NCCL")
_OLD_NCCL = re.compile(r"^[^\s:]+:\d+:\d+ \[\d+\] (?:[\w./+-]+\.\w+:\d+ )?(?:INFO|WARN) ", re.M)
_BARE_NCCL = re.compile(r"^[ \t]*(?:INFO|WARN) (?:NET/|NCCL_|Bootstrap|Using network|GPU Direct RDMA|Channel |Ring |"
                        r"comm 0x|Call to |[\w./+-]{1,80}\.(?:cc|cu|c|h):\d+ )"
                        r"|^[ \t]*(?:(?:Channel|Ring) \d+(?:/\d+)? : )?\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? "
                        r"(?:\[(?:send|receive)\] )?via (?:NET|P2P|SHM|COLLNET)/", re.M)
_IBSTATUS = re.compile(r"^Infiniband device '[^']+' port \d+ status:", re.M)
_IBSTAT = re.compile(r"^CA '[^']+'\s*$|^\s+CA type:", re.M)
_SHOW_GIDS = re.compile(r"^[ \t]*DEV[ \t]+PORT[ \t]+INDEX[ \t]+GID\b", re.M)
# `ibv_devinfo -v` prints each port's GID table as "\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2"; people
# often paste those lines alone, without the hca_id line above them.
_IBV_GID_LINE = r"^[ \t]*GID\[[ \t]*\d+\]:[ \t]*[0-9A-Fa-f]*:[0-9A-Fa-f:.]*"
_IBV_DEVINFO = re.compile(r"^\s*hca_id:\s*\S|^\s*\d+ HCAs? found|^\s*No IB devices found|"
                          r"(?:^|[\s$#>])ibv_devinfo(?:\s|$)|" + _IBV_GID_LINE, re.M)
_ENV = re.compile(r"(?:^|[\s\"',;{\[])(?:export[ \t]+)?NCCL_[A-Z0-9_]+[ \t]*(?:=|:[ \t\"'0-9A-Za-z^])|"
                  r"-x[ \t]+NCCL_[A-Z0-9_]+|--export[= ][^\n]*NCCL_|name:[ \t]*[\"']?NCCL_", re.M)


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


_EMBEDDED_IBV = re.compile(r"^\s*hca_id:\s*\S", re.M)


def embedded_node_kinds(text: str) -> tuple[str, ...]:
    """Node evidence pasted inside a log or nccl-tests output (one file holding everything a user ran):
    ibv_devinfo / ibstat / ibstatus / show_gids listings and `nvidia-smi topo -m` matrices."""
    kinds = []
    if _EMBEDDED_IBV.search(text) or _IBSTAT.search(text) or _IBSTATUS.search(text) or _SHOW_GIDS.search(text):
        kinds.append("ibv_devinfo")
    if _TOPO_HEADER.search(text) and _TOPO_ROW.search(text):
        kinds.append("topo_matrix")
    return tuple(kinds)


def detect_kind(text: str) -> str:
    """The kind of evidence `text` is (one of KINDS); InputError when none fits."""
    check_text(text)
    head = text.lstrip("\ufeff")
    stripped = head.lstrip()
    json_error = None
    if stripped[:1] in "{[":
        kind, json_error = _json_kind(stripped)
        if kind:
            return kind
    if stripped.startswith("<"):
        root = _xml_root(stripped)
        if root == "system":
            return "nccl_topo_xml"
        if root == "topology":
            return "hwloc_xml"
    if _TESTS_ROW.search(head) or _TESTS_HEAD.search(head):
        return "nccl_tests"
    if _NCCL_LOG.search(head) or _BARE_NCCL.search(head) or _OLD_NCCL.search(head):
        return "nccl_log"
    if _TESTS_PREAMBLE.search(head):
        return "nccl_tests"
    if _TOPO_ROW.search(head) or _TOPO_HEADER.search(head):
        return "topo_matrix"
    if (_SHOW_GIDS.search(head) or _IBSTATUS.search(head) or _IBSTAT.search(head)
            or _IBV_DEVINFO.search(head)):
        return "ibv_devinfo"
    if _ENV.search(head):
        return "env"
    raise InputError(json_error or UNKNOWN_KIND)


def _json_kind(text: str) -> tuple[str | None, str | None]:
    """(kind, None) for JSON ncdoc reads; (None, why) when it is not valid JSON."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = f" at line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        return None, f"looks like JSON but is not valid JSON ({getattr(exc, 'msg', exc)}{where})"
    except RecursionError:
        return None, "looks like JSON but nests too deeply to read"
    if isinstance(data, dict) and "schema_version" in data and (
            {"host", "gpus", "hcas", "pci", "origin"} & set(data)):
        return "snapshot_json", None
    if _mentions_nccl_var(data):
        return "env", None
    raise InputError("a JSON file that is neither an ncdoc snapshot nor an env mapping with NCCL_ variables")


def _mentions_nccl_var(data, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(data, dict):
        return any((isinstance(k, str) and k.startswith("NCCL_")) or _mentions_nccl_var(v, depth + 1)
                   for k, v in data.items())
    if isinstance(data, list):
        return any(_mentions_nccl_var(x, depth + 1) for x in data)
    return isinstance(data, str) and data.startswith("NCCL_")


def read_input(path: str | Path) -> str:
    """The text of an evidence file ("-" is stdin), or an InputError saying why it cannot be used."""
    name = str(path)
    if name == "-":
        raw = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        p = Path(path)
        try:
            if p.is_dir():
                raise InputError("is a directory, not a file", path=name)
            raw = p.read_bytes()
        except FileNotFoundError:
            raise InputError("no such file", path=name) from None
        except PermissionError:
            raise InputError("cannot read file (permission denied)", path=name) from None
        except IsADirectoryError:
            raise InputError("is a directory, not a file", path=name) from None
        except OSError as exc:
            raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None
    if not raw.strip():
        raise InputError("file is empty", path=name)
    if b"\x00" in raw[:65536]:
        raise InputError("binary file (it contains NUL bytes), not text", path=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        if text.count("\ufffd") > 4:
            raise InputError("binary file or not UTF-8 text", path=name) from None
    try:
        check_text(text, "file")
    except InputError as exc:
        raise InputError(exc.message, path=name) from None
    return text
