"""What NCCL log lines look like, NCCL 2.4 to 2.30, and how to pick them out fast.

Formats are NCCL's own format strings (src/debug.cc, init.cc, bootstrap.cc, transport/*.cc,
graph/*.cc, plugin/*.cc; see nccl_facts.md section 6). Two kinds of pattern live here:

* block patterns (bytes) that run over a few MiB at a time in C: SCAN finds the few lines
  worth reading in Python, VIA counts the per-channel transport lines without reading them;
* message parsers (str) that turn one such line into a small fact.
"""

from __future__ import annotations

import re
from ncdoc.startup.record import record
from functools import lru_cache

# Re-exported: the scanner reads result names and classifies through this module.
from ncdoc.evidence.error_codes import NCCL_RESULT  # noqa: F401
from ncdoc.evidence.nccl_log_errors import MAX_MESSAGE, Classified, classify_error  # noqa: F401
from ncdoc.evidence.wrappers import strip_wrappers, wrapper_end
from ncdoc.nccl.parse import version_tuple
from ncdoc.evidence.lazy_re import lazy
from ncdoc.readers.numbers import is_digits

# ---------------------------------------------------------------- block patterns (bytes)

# INFO messages whose facts do not depend on which rank printed them: counted per distinct
# message in C (AGG), so a 4096-rank log reads each distinct message once.
_AGG_KEYS = rb"|".join([
    rb"N(?:CCL_[A-Z0-9_]+ set |ET(?:/IB ?: ?(?:GPU Direct|\[\d|Made virtual|ncclIbConnect|NCCL Dev|Data Direct)"
    rb"|/Plugin ?: ?(?![ F])|/OFI |/(?!IB|Plugin|Socket)[^:\r\n]{1,40}: GPU Direct"
    rb"|/IBext\w{0,8} ?: GPU Direct)|VLS multicast)",
    rb"cudaDriverVersion",
    rb"GPU Direct RDMA",
    rb"Initialized NET plugin",
    rb"S(?:uccessfully loaded external)",
    rb"P(?:lugin Path|2P plugin|attern \d+, crossNic)",
    rb"DMA-BUF is available",
    rb"Enabled NCCL Func",
    rb"C(?:hannel \d+/\d\d : |onnected all rings)",
    rb"(?:All(?:Reduce|Gather|ToAll)|Reduce(?:Scatter)?|Broadcast|Send(?:Recv)?|Recv|Gather|Scatter): \d+ Bytes",
    rb"\d+ (?:Bytes -> Algo|coll channels)",
])
# INFO messages read line by line, with the rank that printed them (grouped by first
# character so the regex engine rejects the hot INFO lines after a byte or two).
_RANK_KEYS = rb"|".join([
    rb"N(?:CCL version |ET(?:/IB ?: ?(?:Using|No |Unable|Failed)|/Socket ?: (?:Using \[|[Nn]o )"
    rb"| : Using interface))",
    rb"Bootstrap ?: Using",
    rb"comm (?:0x|\(nil\))",
    rb"U(?:sing network|nrecognized)",
    rb"Invalid",
    rb"A(?:ssigned NET plugin|ll entries)",
    rb"P2P is disabled",
    rb"Error",
    rb"C(?:ould not find (?:a path|any|real path)|UDA Dev \d+, IP|uda failure|all to )",
    rb"HINT",
    rb"Failed to ",
    rb"\[Rank \d+\] nccl",
    rb"nccl\w+ comm ",
    rb"[a-z][\w./+-]*\.(?:cc|cu|c|h|cpp|hpp):\d+ ",
])
# SCAN starts at the "L" of "NCCL" ("L" is rarer than "N" in these logs, and the regex engine skips
# ahead to its first literal character at memchr speed; SCAN checks the "NCC" itself); AGG's literal
# prefix is the whole "NCCL INFO ", which the engine searches for as fast.
AGG = lazy(rb"NCCL INFO ((?:" + _AGG_KEYS + rb")[^\r\n]*)")
# Every WARN, the per-rank INFO lines, version banners without a prefix, the framework lines
# (PyTorch c10d) that carry NCCL's error text, and any framework's "Last error:" (ncclGetLastError).
SCAN = lazy(
    rb"L(?:ast error:| (?:WARN |INFO (?:" + _RANK_KEYS + rb")|version \d|error|communicator)"
    rb"|\.cpp:\d+\]|\(SeqNum)")
# "ncclInternalError: Internal check failed." as frameworks print an ncclResult_t, right after their
# "NCCL error" line and before "Last error:". Read only next to those: as an alternative of SCAN it
# would cost SCAN its one-literal start (10x slower), and a pass of its own costs 5% of the parse.
RESULT_NAME = lazy(r"\b(nccl(?:[A-Z]\w{0,40}?Error|InvalidArgument|InvalidUsage)):")
# Per-channel transport lines: counted in C by their "via" tail (P2P/IPC, NET/IB/0/GDRDMA...).
# A net plugin's name may hold a space ("NET/AWS Libfabric/0/GDRDMA"): a NET tail runs to its device number.
VIA = lazy(rb" via ((?:NET|COLLNET)/[^/\r\n]{1,40}/\d[^ \r\n]*|(?:NET|P2P|SHM|COLLNET)/[^ \r\n]*|"
                 rb"direct shared memory)")
# The same lines in full, read only in blocks where NET channels mix GDR and non-GDR.
NET_CHANNEL = lazy(
    rb"(?:Channel|Ring) \d+(?:/\d+)? : (\d{1,20}(?!\d))(?:\[\w+\])? -> (\d{1,20}(?!\d))(?:\[\w+\])? \[(send|receive)\] "
    rb"via NET/([^/\r\n]{1,40}?)/(\d{1,20}(?!\d))([^ \r\n]*)")


def tail_info(tail: bytes) -> tuple:
    """(transport, kind, net name, gdr, proxied) for a channel line's "via ..." tail (as VIA found it)."""
    text = tail.decode("utf-8", "replace")
    if text.startswith("NET/") or text.startswith("COLLNET/"):
        transport, _, rest = text.partition("/")
        parts = rest.split("/")
        net = parts[0]
        gdr = "/GDRDMA" in text
        proxied = len(parts) > 1 and "(" in parts[1]
        return transport, f"{transport}/{net}" + ("/GDRDMA" if gdr else ""), net, gdr, proxied
    if text.startswith("P2P/"):
        kind = text.split("/")[1] if "/" in text else ""
        kind = {"direct": "direct pointer"}.get(kind, kind)
        return "P2P", f"P2P/{kind}", None, False, False
    return "SHM", "SHM", None, False, False


# Lines following a framework "NCCL error" line that say which error and why.
FOLLOW_UP = 6
def untag(line: str) -> str:
    """`line` without the launcher tags and log-shipper prefixes in front of it ("[trainer0|0]:",
    "[1,0]<stdout>:", "[default0]:", srun's "0: ", Ray's "(pid=42) ", timestamps...)."""
    return strip_wrappers(line)

# ---------------------------------------------------------------- the line prefix

_ID = lazy(r"^[A-Za-z0-9_.\-]+(?::[\w\-]+){0,2}$")
_SRC_FILE = lazy(r"^[\w./+-]+\.(?:cc|cu|c|h|cpp|hpp|cxx|py):(\d{1,20}(?!\d))$")
# Net plugins log through NCCL's logger with their function name where NCCL puts its file
# (aws-ofi-nccl: "host:pid:tid [0] ofi_process_cq:1039 NCCL WARN NET/OFI ..."): read after a [dev] only.
_FUNC_LINE = lazy(r"^[A-Za-z_]\w*:\d+$")
_DEV_END = lazy(r"\[\d+\]$")


@record
class Prefix:
    host: str | None = None
    pid: str | None = None
    tid: str | None = None
    dev: int | None = None
    file: str | None = None          # WARN only: "transport/net_ib.cc:840"
    func: str | None = None          # WARN only, NCCL >= 2.30.7

    @property
    def rank_key(self) -> str | None:
        """host:pid:dev, the process and GPU a line came from (host:pid, host, or None)."""
        if not self.host:
            return None
        key = self.host if self.pid is None else f"{self.host}:{self.pid}"
        return key if self.dev is None else f"{key}:{self.dev}"


# The plain shape NCCL prints, `host:pid:tid [dev] `, read in one step; anything else (tags,
# timestamps, file:line, (func), no dev) goes the long way below, which gives the same answer here.
_PLAIN = lazy(r"([A-Za-z0-9_.\-]+):([\w\-]+):([\w\-]+) \[([0-9]{1,20})\]\s*", re.ASCII)


@lru_cache(maxsize=8192)
def parse_prefix(pre: str) -> Prefix:
    """Read `host:pid:tid [dev] [file:line] [(func)] ` from the text before "NCCL INFO|WARN".

    Anything before the host token (timestamps, mpirun/srun/torchrun tags) is ignored.
    """
    m = _PLAIN.fullmatch(pre)
    if m:
        return Prefix(m.group(1), m.group(2), m.group(3), int(m.group(4)))
    return parse_prefix_long(pre)


def parse_prefix_long(pre: str) -> Prefix:
    """parse_prefix for any shape (also the reference the plain-shape shortcut is tested against)."""
    text = pre.rstrip()
    func = file = None
    if text.endswith(")"):
        i = text.rfind(" (")
        if i >= 0:
            func, text = text[i + 2:-1], text[:i].rstrip()
    if text:
        j = text.rfind(" ")
        last = text[j + 1:]
        if _SRC_FILE.match(last) or (_FUNC_LINE.match(last) and _DEV_END.search(text, 0, max(j, 0))):
            file, text = last, text[:j + 1].rstrip() if j >= 0 else ""
    dev = None
    if text.endswith("]"):
        k = text.rfind("[")
        if k >= 0 and is_digits(text[k + 1:-1]):
            dev, text = int(text[k + 1:-1]), text[:k].rstrip()
    token = text[text.rfind(" ") + 1:] if text else ""
    for tag_end in (">:", "]:"):                 # [1,0]<stdout>:host..., [default0]:host...
        cut = token.rfind(tag_end)
        if cut >= 0:
            token = token[cut + len(tag_end):]
    if not token or not _ID.match(token):
        return Prefix(dev=dev, file=file, func=func)
    parts = token.split(":")
    host = parts[0]
    if is_digits(host) and len(parts) == 1:       # "0: " srun label without a host
        return Prefix(dev=dev, file=file, func=func)
    return Prefix(host, parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None,
                  dev, file, func)


# ---------------------------------------------------------------- message parsers (str)

VERSION = lazy(r"NCCL version (\d+\.\d+\.\d+)([^\s+,]*)(?:\+cuda([\d.]*\d))?")
ENV = lazy(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*\S|)\s*$")
# Names start at a word boundary (the lookbehind): a long run of name characters is tried once, not
# once per character.
IFACE = lazy(r"(?:\[\d+\])?(?<![A-Za-z0-9_.@\-])([A-Za-z0-9_.@\-]+):(\S+?)<(\d{1,20}(?!\d))>")
IB_DEV = lazy(r"\[(\d{1,20}(?!\d))\] ?([\w.\-]+):(\d{1,20}(?!\d))(?::-?\d*){0,2}/(\w+)")
IB_DEV_DETAIL = lazy(r"^NET/IB ?: ?\[(\d{1,20}(?!\d))\] ([\w.\-]+):[\w\-]*:(\d{1,20}(?!\d))/(\w+).*?\bspeed=(\d{1,20}(?!\d))")
IB_VDEV = lazy(r"Made virtual device \[(\d{1,20}(?!\d))\] name=([\w.\-]+) speed=(\d{1,20}(?!\d))")
IB_QP = lazy(r"qp_num \d+ mtu (\d{1,20}(?!\d))(?: (?:GID (\d{1,20}(?!\d))|LID \d+))?")
GDR_DISTANCE = lazy(r"distance (\d{1,20}(?!\d)) ?(<=|>=|<|>) ?(\d{1,20}(?!\d))")
# "for HCA 0 'mlx5_0'"; net plugins print the name without its closing quote ("for HCA 0 'mlx5_0")
GDR_HCA = lazy(r"HCA (\w+)(?: '([^'\s]*)'?)?")
# "GPU Direct RDMA Enabled", and the plugins' "GPU Direct RDMA (DMABUF) enabled" / "(nvidia-peermem) enabled"
GDR_ON = lazy(r"GPU Direct RDMA (?:\(([\w-]{1,20})\) )?[Ee]nabled")
COMM = lazy(r"comm (0x[0-9a-fA-F]+|\(nil\)) rank (\d{1,20}(?!\d)) n[Rr]anks (\d{1,20}(?!\d))")
COMM_ID = lazy(r"commId (0x[0-9a-fA-F]+)")
COMM_NODES = lazy(r"nNodes (\d{1,20}(?!\d)) localRanks (\d{1,20}(?!\d))")
CHANNEL_SUMMARY = lazy(r"^(\d{1,20}(?!\d)) coll channels, (?:(\d{1,20}(?!\d)) collnet channels, )?(?:(\d{1,20}(?!\d)) nvls channels, )?"
                             r"(\d{1,20}(?!\d)) p2p channels")
RING_LIST = lazy(r"^Channel (\d{1,20}(?!\d))/(\d{1,20}(?!\d)) :")
RING_GDR = lazy(r"use ring PXN (\d) GDR (\d)")
ALGO_PICK = lazy(r"^(?:(\w+): )?(\d{1,20}(?!\d)) Bytes -> Algo (\w+) proto (\w+)")
PLUGIN_LOADED = lazy(r"Loaded (net|coll|collnet) plugin (.+?) \(v(\d{1,20}(?!\d))\)")
OFI_PROVIDER = lazy(r"Selected [Pp]rovider is (\S+?)(?:,| \(found (\d{1,20}(?!\d)) nics?\)|$)")
OFI_VERSION = lazy(r"Using aws-ofi-nccl ([\w.\-]+)")
OLD_IFACES = lazy(r"IP Interfaces : (.*)$")
CUDA_DRIVER = lazy(r"cudaDriverVersion (\d{1,20}(?!\d))")

ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")

# topoPathTypeStr by release (NCCL's GDR/P2P "distance" numbers index into these).
_PATHS = (
    ((2, 27), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")),
    ((2, 26), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS")),
    ((2, 21), ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS")),
    ((2, 12), ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "DIS")),
    ((2, 8), ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS")),
)


def path_name(distance: int, version: str | None) -> str | None:
    """The path type a GDR "distance" number stands for in `version`, or None when unknown."""
    vt = version_tuple(version)
    if not vt:
        return None
    for since, names in _PATHS:
        if vt >= since:
            return names[distance] if 0 <= distance < len(names) else None
    return None


def algo_name(token: str, table: tuple[str, ...]) -> str:
    if is_digits(token):
        i = int(token)
        return table[i] if i < len(table) else token
    for name in table:
        if name.lower() == token.lower():
            return name
    return token


def parse_trace(msg: str) -> tuple[str, int, int] | None:
    """`transport/net.cc:1301 -> 6`: (file, line, ncclResult_t), read without a backtracking regex."""
    head, sep, tail = msg.partition(" -> ")
    if not sep or not is_digits(tail.strip()):
        return None
    path, _, line = head.rpartition(":")
    if not is_digits(line) or "." not in path or " " in path or not path:
        return None
    return path, int(line), int(tail.strip())


def split_ib_using(msg: str) -> tuple[str, str] | None:
    """"NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>" -> (device part, OOB part)."""
    if not msg.startswith("NET/IB"):
        return None
    _, sep, rest = msg.partition("Using")
    if not sep:
        return None
    part, _, oob = rest.partition("; OOB ")
    return part, oob.strip()




# ---------------------------------------------------------------- pasted excerpts

# Lines pasted without NCCL's "host:pid:tid [dev] NCCL" prefix: "INFO NET/IB : ...", and channel lines
# cut down to "9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA" or "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC".
# Both start with a literal or an anchored digit run, so they cost linear time.
BARE_LEVEL = lazy(r"(?:INFO|WARN) (?=\S)")
BARE_CHANNEL = lazy(r"(?:(?:Channel|Ring) \d+(?:/\d+)? : )?\d+(?:\[\w+\])? -> \d+(?:\[\w+\])? "
                          r"(?:\[(?:send|receive)\] )?via (?:NET|P2P|SHM|COLLNET)/")


# NCCL 2.3 and older print no "NCCL" after the prefix: "host:pid:tid [dev] INFO ..." and
# "host:pid:tid [dev] misc/ibvwrap.cu:63 WARN ...".
OLD_PREFIX = lazy(r"[^\s:]+:\d+:\d+ \[\d+\] (?:[\w./+-]+\.\w+:\d+ )?(?=(?:INFO|WARN) )")


# WARN bodies pasted on their own, as frameworks show them after "Last error:" or people quote them: a CUDA
# failure in NCCL's words ("Cuda failure 1 'invalid argument'", 2.27+'s "CUDA error 401 '...'"), the NVLS bind
BARE_WARN = lazy(r"(?:Cuda failure (?:\d+ )?'|CUDA error \d+ '|Failed to bind NVLink SHARP \(NVLS\))")


_WRAPPED_START = "[( |\t\x1b"


def bare_line(line: str) -> str:
    """A pasted NCCL message body written as NCCL prints it ("NCCL INFO ..."), or the line unchanged.
    The scanner keys on "NCCL INFO|WARN" and on "Channel N : " for channel lines."""
    # behind a launcher's or shipper's prefix ("[1,0]<stdout>:", " 0: ", "[pod/x] 2024-..Z "), the line starts later
    start = wrapper_end(line) if line[:1] in _WRAPPED_START or line[:1].isdigit() else 0
    m = OLD_PREFIX.match(line, start)
    if m and "NCCL " not in line[:m.end() + 5]:
        return line[:m.end()] + "NCCL " + line[m.end():]
    body = line[start:].lstrip()
    if not body or "NCCL " in line[:len(line) - len(body) + 5] or body[:1] not in "IWCRF0123456789":
        return line
    if BARE_LEVEL.match(body):
        return "NCCL " + body
    if BARE_CHANNEL.match(body):
        return "NCCL INFO " + (body if body[:1] in "CR" else "Channel 00 : " + body)
    if BARE_WARN.match(body):
        return "NCCL WARN " + body
    return line
