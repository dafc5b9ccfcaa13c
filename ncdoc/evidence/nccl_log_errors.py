"""Naming what an NCCL WARN (or a framework's error line) reports, with the code's meaning.

Formats from NCCL 2.4 to 2.30.7 (transport/net_ib*, misc/socket.cc, misc/ibvwrap.cc,
bootstrap.cc, init.cc, shm.cc, graph/*.cc) and PyTorch c10d's wrapping of them. Every pattern
starts with a literal (or is tried on a bounded slice), so a pathological line costs linear time.

The kinds are one table, LOG_PROBLEMS, tried in order (the first row that matches names the
problem): each row says which phrases or pattern identify its kind and what it keeps from the
message. A row whose answer needs real logic (an error code read and named, a kind that depends
on it) names a small function that gives the whole answer.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ncdoc.evidence.error_codes import (
    NCCL_RESULT, NCCL_RESULT_BY_NAME, NCCL_RESULT_BY_TEXT, cuda_error, errno_from_number, errno_from_text,
    ibv_wc_status,
)
from ncdoc.evidence.lazy_re import lazy
from ncdoc.startup.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

Details = tuple[tuple[str, str], ...]


@record
class Classified:
    kind: str
    meaning: str
    code: int | None = None
    code_name: str | None = None
    details: Details = ()


_COMPLETION = lazy(r"Got completion (?:from peer (\S+) )?with (?:error |status=)(?:([^(,]*?)\()?(\d{1,20}(?!\d))")
_VENDOR = lazy(r"vendor[ _]err[ =]?(\d{1,20}(?!\d))")
_OPCODE = lazy(r"opcode[ =](?:(\w+)\()?(\d{1,20}(?!\d))")
_HCA_NAME = lazy(r"\bhca (\S+)")
_MODIFY_QP = lazy(r"Call to ibv_modify_qp failed with (\d{1,20}(?!\d)) ([^,]+)(?:, (.*))?")
# greedy to the line's end (a lazy group before "\s*$" retries the whole blank run at every character of it);
# the " errno N" at its end is split off in _ibv_call
_IBV_CALL = lazy(r"(?:Call to )?(ibv_\w+)(?:\(\))? failed(?: with (?:error )?([^,\n]*))?$")
_ERRNO_TAIL = lazy(r"(?:^| )errno (\d{1,20}(?!\d))\s*$")
_CONNECT = lazy(r"[Cc]onnect to (\S+) (?:failed : (.+)|returned ([^,]+?)(?:,|$))")
_FUNC = lazy(r"(\w+):? $")
# 2.6-2.11 also say "Call to connect returned Connection timed out, retrying" at INFO (no colon)
_OLD_CONNECT = lazy(r"Call to connect (?:timeout|returned|failed)? ?:? ?(.+)")
_EXCEEDED = lazy(r": exceeded (retries|timeouts) \((\d{1,20}(?!\d))\)")
_IO = lazy(r"Call to (recv|send) (?:from|to) (\S+) failed : (.+)")
# "Cuda failure N 'text'" (CUDACHECK/CUCHECK) and, from 2.27, "CUDA error N 'text'" (NVLS multicast binds)
_CUDA = lazy(r"(?:Cuda failure|CUDA error) (?:(\d{1,20}(?!\d)) )?'([^']*)'?")
_ALLOC = lazy(r"Failed to CUDA (?:calloc|malloc) (\d{1,20}(?!\d)) bytes")
_SHM = lazy(r"shared memory (?:segment|file) (\S+)")
_VMISMATCH = lazy(r"rank (\d{1,20}(?!\d)) version (\d{1,20}(?!\d)) rank (\d{1,20}(?!\d)) version (\d{1,20}(?!\d))")
_GPU_PAIR = lazy(r"GPUs (\d{1,20}(?!\d)) and (\d{1,20}(?!\d))")
_FAMILY = lazy(r"with family (\d{1,20}(?!\d))")
# aws-ofi-nccl (NCCL_OFI_WARN, "NET/OFI " in front): fi_av_insert of a peer's EFA address, and error
# completions ("Request %p [seq %d ]completed with error. RC: %d. [Flags: %ld. ]Error: [%d (]%s[)]. Completed ...")
_OFI_AV = lazy(r"Unable to insert remote address into address vector for device (\d{1,20}(?!\d))(?:\. RC: (-?\d{1,20}(?!\d)))?")
_OFI_CQ = lazy(r"completed with error\. RC: (-?\d{1,20}(?!\d))\.(?: Flags: \d+\.)? Error: (?:(-?\d{1,20}(?!\d)) \()?")
_OFI_DEV = lazy(r"\bdev: (\d{1,20}(?!\d))")
_OFI_DIR = lazy(r"direction: (\w+)")
# graph/xml.cc getPciPath (the GPU's /sys/class/pci_bus/... path: fatal) and the net transports' NIC
# paths ("of mlx5_0 (/sys/class/infiniband/mlx5_0/device)": NCCL goes on with the NIC placed nowhere)
_REAL_PATH = lazy(r"Could not find real path of (\S+)(?: \(([^)\s]*)\))?")
_QP_FIELDS = (("state", lazy(r"curr state (\w+)")), ("next_state", lazy(r"next state (\w+)")),
              ("device", lazy(r"on dev ([^,\s]+)")), ("gid_index", lazy(r"GID index (\d{1,20}(?!\d))")),
              ("local_gid", lazy(r"local GID (?!index)([^,\s]+)")),
              ("remote_gid", lazy(r"remote GID ([^,\s]+)")))


def _d(**kw: object) -> Details:
    return tuple((k, str(v)) for k, v in kw.items() if v not in (None, ""))


# Kinds that describe what a probe found (a library absent, a value ignored, a slower search), not a
# failure of the job: a WARN of these kinds is no observed failure.
NOT_FAILURE_KINDS = frozenset({"ibverbs_missing", "env_invalid_value", "topo_search_fallback", "p2p_disabled_nvlink"})


def is_failure_kind(kind: str) -> bool:
    """True when a problem of this kind is a failure (a connect error, a timeout, a failed init...)."""
    return kind not in NOT_FAILURE_KINDS


MAX_MESSAGE = 2048       # NCCL formats a debug line into 1024 bytes; longer text is not its message


def classify_error(msg: str) -> Classified | None:
    """Name the problem an NCCL WARN message (or a framework's error line) reports, or None."""
    return _classify(msg[:MAX_MESSAGE])


# ---------------------------------------------------------------- the table

@record
class ProblemKind:
    """One kind of problem a log message reports, and how it is told from the message.

    A row matches when every test it has passes: one of `phrases` is in the message, one of `also`
    too, the message starts with `starts`, `pattern` is found (its match goes to `extract` or
    `decide`). Then the problem is `kind` with `meaning`, the fixed `code`/`code_name` and the
    details `extract` keeps, or, for a row with `decide`, whatever that function answers (None: the
    message is not of this row after all, and the next rows are tried)."""
    kind: str
    meaning: str = ""
    phrases: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    starts: str = ""
    pattern: re.Pattern | None = None
    extract: Callable[[str, re.Match | None], Details] | None = None
    code: int | None = None
    code_name: str | None = None
    decide: Callable[[str, re.Match | None], Classified | None] | None = None


# ---- rows whose answer needs logic

def _ib_completion(msg: str, m: re.Match) -> Classified:
    """The ibv_wc_status of an error completion, named, with the peer, vendor error, opcode and HCA."""
    code = int(m.group(3))
    name, meaning = ibv_wc_status(code)
    v, op, h = _VENDOR.search(msg), _OPCODE.search(msg), _HCA_NAME.search(msg)
    return Classified("ib_completion_error", meaning, code, name, _d(
        peer=m.group(1), status_text=(m.group(2) or "").strip(), vendor_err=v and v.group(1),
        opcode=op and (op.group(1) or op.group(2)), hca=h and h.group(1)))


def _qp_failure(num: int | None, sym: str | None, meaning: str, error: str, rest: str = "") -> Classified:
    """A failed QP transition: a timeout (ETIMEDOUT) is an unreachable peer GID, anything else a setup error."""
    fields = {k: p.search(rest) for k, p in _QP_FIELDS} if rest else {}
    kind = "qp_connect_timeout" if num == 110 else "ib_qp_modify_failed"
    return Classified(kind, meaning or error or "ibv_modify_qp failed", num, sym, _d(
        error=error, **{k: v.group(1) for k, v in fields.items() if v}))


def _modify_qp(msg: str, m: re.Match) -> Classified:
    """2.24 and later: "Call to ibv_modify_qp failed with <errno> <strerror>, <QP state and GIDs>"."""
    num = int(m.group(1))
    sym, meaning = errno_from_number(num)
    return _qp_failure(num, sym, meaning, m.group(2).strip(), m.group(3) or "")


def _ibv_call(msg: str, m: re.Match) -> Classified:
    """A failed verbs call, its errno read from the number or the strerror text."""
    err = (m.group(2) or "").strip()
    tail = _ERRNO_TAIL.search(err)
    num = int(tail.group(1)) if tail else None
    if tail:
        err = err[:tail.start()].strip()
    sym, meaning = errno_from_number(num) if num is not None else (None, "")
    if num is None and err:
        num, sym, meaning = errno_from_text(err)
    if m.group(1) == "ibv_modify_qp":         # before 2.24: "failed with error <strerror>[ errno N]"
        return _qp_failure(num, sym, meaning, err)
    return Classified("ibv_call_failed", meaning or f"{m.group(1)} failed", num, sym,
                      _d(call=m.group(1), error=err))


def _socket_error(addr: str | None, text: str, func: str | None, kind: str = "socket_connect_error") -> Classified:
    num, sym, meaning = errno_from_text(text)
    return Classified(kind, meaning or text.strip(), num, sym, _d(address=addr, error=text.strip(), func=func))


def _func_before(msg: str, at: int) -> str | None:
    """The "funcName: " just before position `at` (looked at over a few dozen characters only)."""
    m = _FUNC.search(msg[max(0, at - 64):at])
    return m.group(1) if m else None


def _connect(msg: str, m: re.Match) -> Classified:
    return _socket_error(m.group(1), m.group(2) or m.group(3) or "", _func_before(msg, m.start()))


def _old_connect(msg: str, m: re.Match) -> Classified:
    text = m.group(1)
    return _socket_error(None, text[:-len(", retrying")] if text.endswith(", retrying") else text, "connect")


def _exceeded(msg: str, m: re.Match) -> Classified:
    text = "Connection timed out" if m.group(1) == "timeouts" else "Connection refused"
    return _socket_error(None, text, _func_before(msg, m.start() + 2))


def _socket_io(msg: str, m: re.Match) -> Classified:
    return _socket_error(m.group(2), m.group(3), m.group(1), "socket_io_error")


def _cuda_failure(msg: str, m: re.Match) -> Classified:
    code = int(m.group(1)) if m.group(1) else None
    code, name, meaning = cuda_error(code, m.group(2))
    return Classified("cuda_failure", meaning or m.group(2), code, name, _d(error=m.group(2)))


def _ofi_completion(msg: str, m: re.Match) -> Classified:
    """The provider's return code and error text of an aws-ofi-nccl error completion."""
    text = msg[m.end():]
    cut = text.find(". Completed length")
    text = (text[:cut] if cut >= 0 else text)[:200].strip()
    if m.group(2) and text.endswith(")"):
        text = text[:-1]
    dev, direction = _OFI_DEV.search(msg), _OFI_DIR.search(msg)
    return Classified("ofi_completion_error", "an EFA (libfabric) transfer completed with an error", int(m.group(1)),
                      None, _d(prov_errno=m.group(2), error=text, device=dev and dev.group(1),
                               direction=direction and direction.group(1)))


def _real_path(msg: str, m: re.Match) -> Classified:
    """A GPU's missing PCI path stops topology detection; a NIC's leaves the NIC unplaced."""
    path, inner = m.group(1), m.group(2)
    sys_path = inner if inner and inner.startswith("/sys/") else path
    if "/pci_bus/" in sys_path:
        return Classified("topo_sysfs_path_missing", "NCCL could not find the GPU's PCI device in sysfs, so "
                                                     "topology detection fails", None, None,
                          _d(path=sys_path, device=sys_path.rstrip("/").rsplit("/", 1)[-1], what="gpu"))
    return Classified("topo_sysfs_path_missing", "NCCL could not find a device's PCI path in sysfs and cannot place "
                                                 "it in the topology", None, None,
                      _d(path=sys_path, device=path if inner else None,
                         what="nic" if "/infiniband/" in sys_path or "/net/" in sys_path else "device"))


def _nccl_error(msg: str, m: None) -> Classified | None:
    """An ncclResult_t named in the message (ncclSystemError) or its text ("unhandled system error")."""
    code = _nccl_result(msg)
    if code is None:
        return None
    name, text = NCCL_RESULT[code]
    return Classified("nccl_error", text, code, name)


def _nccl_result(msg: str) -> int | None:
    for name, code in NCCL_RESULT_BY_NAME.items():
        if code and name in msg:
            return code
    low = msg.lower()
    for text, code in NCCL_RESULT_BY_TEXT.items():
        if text in low:
            return code
    return None


# ---- what plain rows keep

def _first_120(msg: str, m: re.Match | None) -> Details:
    return _d(detail=msg[:120])


def _event(msg: str, m: re.Match | None) -> Details:
    return _d(event=msg.rsplit(":", 1)[-1].strip())


def _device_opened(msg: str, m: re.Match | None) -> Details:
    return _d(device=msg.rsplit(" ", 1)[-1] if "Unable to open device" in msg else None)


def _peer(msg: str, m: re.Match | None) -> Details:
    return _d(peer=msg.rsplit("peer", 1)[-1].strip() or None)


def _family(msg: str, m: re.Match | None) -> Details:
    f = _FAMILY.search(msg)
    return _d(family=f and f.group(1))


def _alloc_bytes(msg: str, m: re.Match | None) -> Details:
    a = _ALLOC.search(msg)
    return _d(bytes=a and a.group(1))


def _gpu_pair(msg: str, m: re.Match | None) -> Details:
    g = _GPU_PAIR.search(msg)
    return _d(gpus=g and f"{g.group(1)},{g.group(2)}")


def _xml_file(which: str) -> Callable[[str, re.Match | None], Details]:
    return lambda msg, m: _d(file=which, detail=msg[:120])


def _version_ranks(msg: str, m: re.Match | None) -> Details:
    v = _VMISMATCH.search(msg)
    return _d(ranks=v and f"{v.group(1)}:{v.group(2)},{v.group(3)}:{v.group(4)}")


def _shm_path(msg: str, m: re.Match | None) -> Details:
    s = _SHM.search(msg)
    return _d(path=s and s.group(1))


def _ofi_av(msg: str, m: re.Match) -> Details:
    return _d(device=m.group(1), rc=m.group(2))


_XML_MEANING = "NCCL could not read or match a topology/graph XML file"

LOG_PROBLEMS: tuple[ProblemKind, ...] = (
    # aws-ofi-nccl first: the provider's error text after "RC: " may read like anything below
    ProblemKind("ofi_av_insert_failed", "the EFA provider could not add a peer's address to its address vector: "
                "this node cannot reach that peer over EFA", phrases=("RC: ",), pattern=_OFI_AV, extract=_ofi_av),
    ProblemKind("ofi_completion_error", phrases=("RC: ",), pattern=_OFI_CQ, decide=_ofi_completion),
    ProblemKind("ib_completion_error", pattern=_COMPLETION, decide=_ib_completion),
    ProblemKind("ib_completion_error", "a work completion came back with an error", phrases=("Got CQE",),
                also=("error",), extract=_first_120),
    ProblemKind("ib_async_event", "the NIC reported an asynchronous error event (port or device error)",
                phrases=("async fatal event", "async event"), extract=_event),
    ProblemKind("ib_qp_modify_failed", pattern=_MODIFY_QP, decide=_modify_qp),
    ProblemKind("ibv_open_device_failed", "a verbs device is listed but cannot be opened (container without "
                "/dev/infiniband, missing rdma userspace provider, or driver mismatch)",
                phrases=("Unable to open device", "ibv_open_device"), extract=_device_opened),
    ProblemKind("ibv_call_failed", pattern=_IBV_CALL, decide=_ibv_call),
    # reading gid_attrs/types/<index> of an empty GID slot
    ProblemKind("roce_gid_type_unreadable", "NCCL could not read a RoCE GID's type: the port's GID table has "
                "empty slots (a sparse table, as in Kubernetes pods with macvlan NICs)",
                phrases=("ncclIbRoceGetVersionNum",)),
    ProblemKind("ib_incompatible_devices", "NICs of different link layers (IB and RoCE) were paired; select one "
                "kind with NCCL_IB_HCA", phrases=("incompatible devices",)),
    ProblemKind("ib_no_ip_interface", "IB needs an IP interface for its out-of-band connection and found none "
                "(NCCL_SOCKET_IFNAME matches nothing usable)", phrases=("No IP interface found",)),
    ProblemKind("socket_connect_error", pattern=_CONNECT, decide=_connect),
    ProblemKind("socket_connect_error", pattern=_OLD_CONNECT, decide=_old_connect),
    ProblemKind("socket_connect_error", pattern=_EXCEEDED, decide=_exceeded),
    ProblemKind("socket_io_error", pattern=_IO, decide=_socket_io),
    ProblemKind("socket_closed_by_peer", "the peer closed its socket: its process exited or failed first (look "
                "at the other ranks' logs)", phrases=("Connection closed by remote peer",), extract=_peer),
    ProblemKind("message_truncated", "a bootstrap message had an unexpected size: ranks run different NCCL "
                "versions or mismatched collectives", phrases=("Message truncated",)),
    # ncclSocketInit on an address nothing ever filled in
    ProblemKind("bootstrap_no_interface", "NCCL tried to connect to an address that was never set: no interface "
                "matched NCCL_SOCKET_IFNAME (or NCCL_SOCKET_FAMILY) on this host",
                phrases=("is neither AF_INET",), extract=_family),
    ProblemKind("bootstrap_no_interface", "no usable socket interface for the bootstrap (NCCL_SOCKET_IFNAME "
                "matches nothing that is up)",
                phrases=("Bootstrap : no socket interface found", "no device found matching NCCL_OOB")),
    # socket(AF_INET|AF_INET6) refused: the process's network namespace has no such family at all
    ProblemKind("bootstrap_no_interface", "NCCL could not create a socket of the address family it needs: the "
                "container's network namespace has no usable IPv4/IPv6 interface (run with host networking or "
                "give it one)", phrases=("Socket creation failed",), also=("Address family not supported",)),
    ProblemKind("socket_no_listen_interface", "no local interface is in the subnet of NCCL_COMM_ID / the root "
                "address", phrases=("No usable listening interface found",)),
    ProblemKind("socket_no_interface", "no local interface can reach the remote address",
                phrases=("No interface found in the same subnet", "NET/Socket : no interface found")),
    ProblemKind("bootstrap_root_mismatch", "ranks disagree on the communicator size or a rank joined twice "
                "(mixed jobs on one NCCL_COMM_ID/port)", phrases=("Bootstrap Root : ",)),
    ProblemKind("ibverbs_missing", "libibverbs could not be loaded: the rdma-core userspace is missing (often "
                "inside a container), so IB cannot be used", phrases=("Failed to open libibverbs",)),
    ProblemKind("env_invalid_value", "an NCCL variable has a value NCCL cannot read; it uses the default instead",
                starts="Invalid value ", phrases=(" for ",), extract=_first_120),
    ProblemKind("net_plugin_init_failed", "no network transport could start: NCCL_NET names an unavailable "
                "network or no device is usable", phrases=("Failed to initialize any NET plugin",)),
    # NVML (nvmlInit_v2) refusing to start: after a driver update without a reboot the kernel module and the
    # user-space libraries differ ("Driver/library version mismatch", NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    ProblemKind("driver_library_mismatch", "the NVIDIA kernel module and the user-space driver libraries (NVML, "
                "libcuda) are different versions", phrases=("Driver/library version mismatch", "RM version mismatch",
                                                           "API mismatch"), extract=_first_120),
    ProblemKind("nvml_init_failed", "NVML could not start: no usable NVIDIA driver for this process",
                phrases=("nvmlInit",), also=("failed",), extract=_first_120),
    ProblemKind("cuda_failure", pattern=_CUDA, decide=_cuda_failure),
    ProblemKind("cuda_alloc_failed", "GPU memory allocation failed",
                phrases=("Failed to CUDA calloc", "Failed to CUDA malloc"), extract=_alloc_bytes, code=2,
                code_name="cudaErrorMemoryAllocation"),
    ProblemKind("p2p_disabled_nvlink", "NVLink-connected GPUs report P2P disabled: a hardware, driver or Fabric "
                "Manager problem", phrases=("P2P is disabled between NVLINK connected GPUs",), extract=_gpu_pair),
    # graph/search.cc, graph/xml.cc, graph/topo.cc: reading NCCL_GRAPH_FILE / NCCL_TOPO_FILE (XML) and
    # matching it to the GPUs and NICs found
    ProblemKind("topo_xml_error", _XML_MEANING + " (the graph file)", extract=_xml_file("graph"),
                phrases=("XML Import Channel", "XML Graph has wrong version", "Could not open XML graph file")),
    ProblemKind("topo_xml_error", _XML_MEANING + " (the topology file)", extract=_xml_file("topology"),
                phrases=("XML Topology has wrong version", "Could not open XML topology file",
                         "system node not found in XML", "Add NVLink error : could not find",
                         "Add PCI Link error : could not find", "Add C2c error : could not find")),
    ProblemKind("topo_xml_error", _XML_MEANING, phrases=("XML Parse", "XML Mismatch", "XML Export Channel",
                                                         "too many XML", "XML parser is limited"),
                extract=_xml_file("")),
    # graph/xml.h xmlGetAttr*: a node of the topology XML lacks an attribute NCCL needs ("Attribute arch of node
    # cpu not found"): a hand-written or static topology file (NCCL_TOPO_FILE, a net plugin's own) that does not
    # describe this machine as NCCL reads it
    ProblemKind("topo_xml_error", _XML_MEANING + " (a node of the topology file lacks an attribute)",
                starts="Attribute ", phrases=(" of node ",), also=("not found",), extract=_xml_file("topology")),
    ProblemKind("topo_sysfs_path_missing", pattern=_REAL_PATH, decide=_real_path),
    ProblemKind("no_local_path_gpu_net", "the topology has no path from a GPU to any NIC (broken topology "
                "detection or NCCL_TOPO_FILE)", phrases=("Could not find any local path from gpu",)),
    ProblemKind("version_mismatch", "ranks load different NCCL versions", phrases=("Mismatched NCCL version",),
                extract=_version_ranks),
    ProblemKind("duplicate_gpu", "two ranks use the same GPU (CUDA_VISIBLE_DEVICES or local-rank mapping is "
                "wrong)", phrases=("Multiple Ranks are using the same GPU", "Duplicate GPU detected")),
    ProblemKind("shm_error", "a /dev/shm segment could not be created or mapped: /dev/shm is too small "
                "(containers default to 64 MB; use --shm-size or --ipc=host)", phrases=("shared memory",),
                also=("Error", "failed", "Could not map"), extract=_shm_path),
    ProblemKind("net_device_count_mismatch", "nodes see different numbers of NICs",
                phrases=("mixed local Net device counts",)),
    ProblemKind("algo_proto_invalid", "NCCL_ALGO / NCCL_PROTO leave no usable algorithm or do not parse",
                phrases=("No algorithm/protocol available", "Unrecognized element token",
                         "Unrecognized prefix token", "All entries except the first must have a prefix")),
    ProblemKind("comm_id_invalid", "NCCL_COMM_ID is not <ip>:<port> or <host>:<port>",
                phrases=("Invalid NCCL_COMM_ID",)),
    ProblemKind("collective_timeout", "a collective did not finish within the framework's timeout (a hang: a "
                "peer died, deadlock, or the network stalled)",
                phrases=("Watchdog caught collective operation timeout", "collective operation timeout")),
    ProblemKind("ofi_error", "the libfabric (aws-ofi-nccl) plugin reported an error", phrases=("NET/OFI",)),
    # last: any ncclResult_t named, by its enum name or its ncclGetErrorString text
    ProblemKind("nccl_error", decide=_nccl_error),
)


# (phrases, row) pairs: the loop below rejects most rows on their phrases alone, without an
# attribute lookup (it runs for every distinct WARN and error line).
_ROWS = tuple((r.phrases, r) for r in LOG_PROBLEMS)


@lru_cache(maxsize=4096)
def _classify(msg: str) -> Classified | None:
    for phrases, row in _ROWS:
        if phrases:
            for p in phrases:
                if p in msg:
                    break
            else:
                continue
        if row.also and not any(p in msg for p in row.also):
            continue
        if row.starts and not msg.startswith(row.starts):
            continue
        m = None
        if row.pattern is not None:
            m = row.pattern.search(msg)
            if m is None:
                continue
        if row.decide is not None:
            found = row.decide(msg, m)
            if found is not None:
                return found
            continue
        return Classified(row.kind, row.meaning, row.code, row.code_name,
                          row.extract(msg, m) if row.extract is not None else ())
    return None
