"""Naming what an NCCL WARN (or a framework's error line) reports, with the code's meaning.

Formats from NCCL 2.4 to 2.30.7 (transport/net_ib*, misc/socket.cc, misc/ibvwrap.cc,
bootstrap.cc, init.cc, shm.cc, graph/*.cc) and PyTorch c10d's wrapping of them. Every pattern
starts with a literal (or is tried on a bounded slice), so a pathological line costs linear time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ncdoc.evidence.error_codes import (
    NCCL_RESULT, NCCL_RESULT_BY_NAME, NCCL_RESULT_BY_TEXT, cuda_error, errno_from_number, errno_from_text,
    ibv_wc_status,
)

@dataclass(frozen=True)
class Classified:
    kind: str
    meaning: str
    code: int | None = None
    code_name: str | None = None
    details: tuple[tuple[str, str], ...] = ()


_COMPLETION = re.compile(r"Got completion (?:from peer (\S+) )?with (?:error |status=)(?:([^(,]*?)\()?(\d+)")
_VENDOR = re.compile(r"vendor[ _]err[ =]?(\d+)")
_OPCODE = re.compile(r"opcode[ =](?:(\w+)\()?(\d+)")
_HCA_NAME = re.compile(r"\bhca (\S+)")
_MODIFY_QP = re.compile(r"Call to ibv_modify_qp failed with (\d+) ([^,]+)(?:, (.*))?")
_IBV_CALL = re.compile(r"(?:Call to )?(ibv_\w+)(?:\(\))? failed(?: with (?:error )?([^,]*?))?(?: errno (\d+))?\s*$")
_CONNECT = re.compile(r"[Cc]onnect to (\S+) (?:failed : (.+)|returned ([^,]+?)(?:,|$))")
_FUNC = re.compile(r"(\w+):? $")
# 2.6-2.11 also say "Call to connect returned Connection timed out, retrying" at INFO (no colon)
_OLD_CONNECT = re.compile(r"Call to connect (?:timeout|returned|failed)? ?:? ?(.+)")
_EXCEEDED = re.compile(r": exceeded (retries|timeouts) \((\d+)\)")
_IO = re.compile(r"Call to (recv|send) (?:from|to) (\S+) failed : (.+)")
# "Cuda failure N 'text'" (CUDACHECK/CUCHECK) and, from 2.27, "CUDA error N 'text'" (NVLS multicast binds)
_CUDA = re.compile(r"(?:Cuda failure|CUDA error) (?:(\d+) )?'([^']*)'?")
_ALLOC = re.compile(r"Failed to CUDA (?:calloc|malloc) (\d+) bytes")
_SHM = re.compile(r"shared memory (?:segment|file) (\S+)")
_VMISMATCH = re.compile(r"rank (\d+) version (\d+) rank (\d+) version (\d+)")
_GPU_PAIR = re.compile(r"GPUs (\d+) and (\d+)")
_FAMILY = re.compile(r"with family (\d+)")
# aws-ofi-nccl (NCCL_OFI_WARN, "NET/OFI " in front): fi_av_insert of a peer's EFA address, and error
# completions ("Request %p [seq %d ]completed with error. RC: %d. [Flags: %ld. ]Error: [%d (]%s[)]. Completed ...")
_OFI_AV = re.compile(r"Unable to insert remote address into address vector for device (\d+)(?:\. RC: (-?\d+))?")
_OFI_CQ = re.compile(r"completed with error\. RC: (-?\d+)\.(?: Flags: \d+\.)? Error: (?:(-?\d+) \()?")
_OFI_DEV = re.compile(r"\bdev: (\d+)")
_OFI_DIR = re.compile(r"direction: (\w+)")
# graph/xml.cc getPciPath (the GPU's /sys/class/pci_bus/... path: fatal) and the net transports' NIC
# paths ("of mlx5_0 (/sys/class/infiniband/mlx5_0/device)": NCCL goes on with the NIC placed nowhere)
_REAL_PATH = re.compile(r"Could not find real path of (\S+)(?: \(([^)\s]*)\))?")
# graph/search.cc, graph/xml.cc, graph/topo.cc: reading NCCL_GRAPH_FILE / NCCL_TOPO_FILE (XML) and
# matching it to the GPUs and NICs found. message start (or phrase) -> which file it concerns.
_XML_WARNS = (("XML Import Channel", "graph"), ("XML Graph has wrong version", "graph"),
              ("Could not open XML graph file", "graph"), ("XML Topology has wrong version", "topology"),
              ("Could not open XML topology file", "topology"), ("system node not found in XML", "topology"),
              ("Add NVLink error : could not find", "topology"), ("Add PCI Link error : could not find", "topology"),
              ("Add C2c error : could not find", "topology"), ("XML Parse", ""), ("XML Mismatch", ""))
_QP_FIELDS = (("state", re.compile(r"curr state (\w+)")), ("next_state", re.compile(r"next state (\w+)")),
              ("device", re.compile(r"on dev ([^,\s]+)")), ("gid_index", re.compile(r"GID index (\d+)")),
              ("local_gid", re.compile(r"local GID (?!index)([^,\s]+)")),
              ("remote_gid", re.compile(r"remote GID ([^,\s]+)")))


def _d(**kw: object) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in kw.items() if v not in (None, ""))


def _socket_error(addr: str | None, text: str, func: str | None, kind: str = "socket_connect_error") -> Classified:
    num, sym, meaning = errno_from_text(text)
    return Classified(kind, meaning or text.strip(), num, sym, _d(address=addr, error=text.strip(), func=func))


# Kinds that describe what a probe found (a library or device absent, a value ignored, a slower search),
# not a failure of the job: a WARN of these kinds is no observed failure.
NOT_FAILURE_KINDS = frozenset({"ibverbs_missing", "ib_no_device", "net_plugin_missing", "plugin_not_found",
                               "env_invalid_value", "topo_search_fallback", "p2p_disabled_nvlink"})


def is_failure_kind(kind: str) -> bool:
    """True when a problem of this kind is a failure (a connect error, a timeout, a failed init...)."""
    return kind not in NOT_FAILURE_KINDS


MAX_MESSAGE = 2048       # NCCL formats a debug line into 1024 bytes; longer text is not its message


def classify_error(msg: str) -> Classified | None:
    """Name the problem an NCCL WARN message (or a framework's error line) reports, or None."""
    return _classify(msg[:MAX_MESSAGE])


@lru_cache(maxsize=4096)
def _classify(msg: str) -> Classified | None:
    if "RC: " in msg:             # aws-ofi-nccl: the provider's error text after it may read like anything
        ofi = _ofi(msg)
        if ofi is not None:
            return ofi
    m = _COMPLETION.search(msg)
    if m:
        code = int(m.group(3))
        name, meaning = ibv_wc_status(code)
        v, op, h = _VENDOR.search(msg), _OPCODE.search(msg), _HCA_NAME.search(msg)
        return Classified("ib_completion_error", meaning, code, name, _d(
            peer=m.group(1), status_text=(m.group(2) or "").strip(), vendor_err=v and v.group(1),
            opcode=op and (op.group(1) or op.group(2)), hca=h and h.group(1)))
    if "Got CQE with error" in msg or "Got CQE" in msg and "error" in msg:
        return Classified("ib_completion_error", "a work completion came back with an error", None, None,
                          _d(detail=msg[:120]))
    if "async fatal event" in msg or "async event" in msg:
        return Classified("ib_async_event", "the NIC reported an asynchronous error event (port or device "
                                            "error)", None, None, _d(event=msg.rsplit(":", 1)[-1].strip()))
    m = _MODIFY_QP.search(msg)
    if m:
        num = int(m.group(1))
        sym, meaning = errno_from_number(num)
        return _qp_failure(num, sym, meaning, m.group(2).strip(), m.group(3) or "")
    if "Unable to open device" in msg or "ibv_open_device" in msg:
        dev = msg.rsplit(" ", 1)[-1] if "Unable to open device" in msg else None
        return Classified("ibv_open_device_failed", "a verbs device is listed but cannot be opened (container "
                                                    "without /dev/infiniband, missing rdma userspace provider, "
                                                    "or driver mismatch)", None, None, _d(device=dev))
    m = _IBV_CALL.search(msg)
    if m:
        err = (m.group(2) or "").strip()
        num = int(m.group(3)) if m.group(3) else None
        sym, meaning = errno_from_number(num) if num is not None else (None, "")
        if num is None and err:
            num, sym, meaning = errno_from_text(err)
        if m.group(1) == "ibv_modify_qp":         # before 2.24: "failed with error <strerror>[ errno N]"
            return _qp_failure(num, sym, meaning, err)
        return Classified("ibv_call_failed", meaning or f"{m.group(1)} failed", num, sym,
                          _d(call=m.group(1), error=err))
    if "ncclIbRoceGetVersionNum" in msg:     # reading gid_attrs/types/<index> of an empty GID slot
        return Classified("roce_gid_type_unreadable", "NCCL could not read a RoCE GID's type: the port's GID "
                                                      "table has empty slots (a sparse table, as in Kubernetes "
                                                      "pods with macvlan NICs)")
    if "incompatible devices" in msg:
        return Classified("ib_incompatible_devices", "NICs of different link layers (IB and RoCE) were "
                                                     "paired; select one kind with NCCL_IB_HCA")
    if "No IP interface found" in msg:
        return Classified("ib_no_ip_interface", "IB needs an IP interface for its out-of-band connection "
                                                "and found none (NCCL_SOCKET_IFNAME matches nothing usable)")
    m = _CONNECT.search(msg)
    if m:
        return _socket_error(m.group(1), m.group(2) or m.group(3) or "", _func_before(msg, m.start()))
    m = _OLD_CONNECT.search(msg)
    if m:
        text = m.group(1)
        return _socket_error(None, text[:-len(", retrying")] if text.endswith(", retrying") else text, "connect")
    m = _EXCEEDED.search(msg)
    if m:
        text = "Connection timed out" if m.group(1) == "timeouts" else "Connection refused"
        return _socket_error(None, text, _func_before(msg, m.start() + 2))
    m = _IO.search(msg)
    if m:
        return _socket_error(m.group(2), m.group(3), m.group(1), "socket_io_error")
    if "Connection closed by remote peer" in msg:
        peer = msg.rsplit("peer", 1)[-1].strip() or None
        return Classified("socket_closed_by_peer", "the peer closed its socket: its process exited or failed "
                                                   "first (look at the other ranks' logs)", None, None,
                          _d(peer=peer))
    if "Message truncated" in msg:
        return Classified("message_truncated", "a bootstrap message had an unexpected size: ranks run "
                                               "different NCCL versions or mismatched collectives")
    if "is neither AF_INET" in msg:            # ncclSocketInit on an address nothing ever filled in
        f = _FAMILY.search(msg)
        return Classified("bootstrap_no_interface", "NCCL tried to connect to an address that was never set: no "
                                                    "interface matched NCCL_SOCKET_IFNAME (or NCCL_SOCKET_FAMILY) "
                                                    "on this host", None, None, _d(family=f and f.group(1)))
    if "Bootstrap : no socket interface found" in msg or "no device found matching NCCL_OOB" in msg:
        return Classified("bootstrap_no_interface", "no usable socket interface for the bootstrap "
                                                    "(NCCL_SOCKET_IFNAME matches nothing that is up)")
    if "Socket creation failed" in msg and "Address family not supported" in msg:
        # socket(AF_INET|AF_INET6) refused: the process's network namespace has no such family at all
        return Classified("bootstrap_no_interface", "NCCL could not create a socket of the address family it "
                                                    "needs: the container's network namespace has no usable "
                                                    "IPv4/IPv6 interface (run with host networking or give it one)")
    if "No usable listening interface found" in msg:
        return Classified("socket_no_listen_interface", "no local interface is in the subnet of NCCL_COMM_ID "
                                                        "/ the root address")
    if "No interface found in the same subnet" in msg or "NET/Socket : no interface found" in msg:
        return Classified("socket_no_interface", "no local interface can reach the remote address")
    if "Bootstrap Root : " in msg:
        return Classified("bootstrap_root_mismatch", "ranks disagree on the communicator size or a rank "
                                                     "joined twice (mixed jobs on one NCCL_COMM_ID/port)")
    if "Failed to open libibverbs" in msg:
        return Classified("ibverbs_missing", "libibverbs could not be loaded: the rdma-core userspace is "
                                             "missing (often inside a container), so IB cannot be used")
    if msg.startswith("Invalid value ") and " for " in msg:
        return Classified("env_invalid_value", "an NCCL variable has a value NCCL cannot read; it uses the "
                                               "default instead", None, None, _d(detail=msg[:120]))
    if "Failed to initialize any NET plugin" in msg:
        return Classified("net_plugin_init_failed", "no network transport could start: NCCL_NET names an "
                                                    "unavailable network or no device is usable")
    m = _CUDA.search(msg)
    if m:
        code = int(m.group(1)) if m.group(1) else None
        code, name, meaning = cuda_error(code, m.group(2))
        return Classified("cuda_failure", meaning or m.group(2), code, name, _d(error=m.group(2)))
    m = _ALLOC.search(msg)
    if m or "Failed to CUDA calloc" in msg or "Failed to CUDA malloc" in msg:
        return Classified("cuda_alloc_failed", "GPU memory allocation failed", 2, "cudaErrorMemoryAllocation",
                          _d(bytes=m and m.group(1)))
    if "P2P is disabled between NVLINK connected GPUs" in msg:
        g = _GPU_PAIR.search(msg)
        return Classified("p2p_disabled_nvlink", "NVLink-connected GPUs report P2P disabled: a hardware, "
                                                 "driver or Fabric Manager problem", None, None,
                          _d(gpus=g and f"{g.group(1)},{g.group(2)}"))
    xml = _topo_xml(msg)
    if xml is not None:
        return xml
    m = _REAL_PATH.search(msg)
    if m:
        return _real_path(m.group(1), m.group(2))
    if "Could not find any local path from gpu" in msg:
        return Classified("no_local_path_gpu_net", "the topology has no path from a GPU to any NIC "
                                                   "(broken topology detection or NCCL_TOPO_FILE)")
    if "Mismatched NCCL version" in msg:
        v = _VMISMATCH.search(msg)
        return Classified("version_mismatch", "ranks load different NCCL versions", None, None, _d(
            ranks=v and f"{v.group(1)}:{v.group(2)},{v.group(3)}:{v.group(4)}"))
    if "Multiple Ranks are using the same GPU" in msg or "Duplicate GPU detected" in msg:
        return Classified("duplicate_gpu", "two ranks use the same GPU (CUDA_VISIBLE_DEVICES or local-rank "
                                           "mapping is wrong)")
    if "shared memory" in msg and ("Error" in msg or "failed" in msg or "Could not map" in msg):
        s = _SHM.search(msg)
        return Classified("shm_error", "a /dev/shm segment could not be created or mapped: /dev/shm is too "
                                       "small (containers default to 64 MB; use --shm-size or --ipc=host)",
                          None, None, _d(path=s and s.group(1)))
    if "mixed local Net device counts" in msg:
        return Classified("net_device_count_mismatch", "nodes see different numbers of NICs")
    if ("No algorithm/protocol available" in msg or "Unrecognized element token" in msg
            or "Unrecognized prefix token" in msg or "All entries except the first must have a prefix" in msg):
        return Classified("algo_proto_invalid", "NCCL_ALGO / NCCL_PROTO leave no usable algorithm or do not "
                                                "parse")
    if "Invalid NCCL_COMM_ID" in msg:
        return Classified("comm_id_invalid", "NCCL_COMM_ID is not <ip>:<port> or <host>:<port>")
    if "Watchdog caught collective operation timeout" in msg or "collective operation timeout" in msg:
        return Classified("collective_timeout", "a collective did not finish within the framework's timeout "
                                                "(a hang: a peer died, deadlock, or the network stalled)")
    if "NET/OFI" in msg:
        return Classified("ofi_error", "the libfabric (aws-ofi-nccl) plugin reported an error")
    code = _nccl_result(msg)
    if code is not None:
        name, text = NCCL_RESULT[code]
        return Classified("nccl_error", text, code, name)
    return None


def _qp_failure(num: int | None, sym: str | None, meaning: str, error: str, rest: str = "") -> Classified:
    """A failed QP transition: a timeout (ETIMEDOUT) is an unreachable peer GID, anything else a setup error."""
    fields = {k: p.search(rest) for k, p in _QP_FIELDS} if rest else {}
    kind = "qp_connect_timeout" if num == 110 else "ib_qp_modify_failed"
    return Classified(kind, meaning or error or "ibv_modify_qp failed", num, sym, _d(
        error=error, **{k: v.group(1) for k, v in fields.items() if v}))


def _ofi(msg: str) -> Classified | None:
    m = _OFI_AV.search(msg)
    if m:
        return Classified("ofi_av_insert_failed", "the EFA provider could not add a peer's address to its address "
                                                  "vector: this node cannot reach that peer over EFA", None, None,
                          _d(device=m.group(1), rc=m.group(2)))
    m = _OFI_CQ.search(msg)
    if m is None:
        return None
    text = msg[m.end():]
    cut = text.find(". Completed length")
    text = (text[:cut] if cut >= 0 else text)[:200].strip()
    if m.group(2) and text.endswith(")"):
        text = text[:-1]
    dev, direction = _OFI_DEV.search(msg), _OFI_DIR.search(msg)
    return Classified("ofi_completion_error", "an EFA (libfabric) transfer completed with an error", int(m.group(1)),
                      None, _d(prov_errno=m.group(2), error=text, device=dev and dev.group(1),
                               direction=direction and direction.group(1)))


def _real_path(path: str, inner: str | None) -> Classified:
    sys_path = inner if inner and inner.startswith("/sys/") else path
    if "/pci_bus/" in sys_path:
        return Classified("topo_sysfs_path_missing", "NCCL could not find the GPU's PCI device in sysfs, so "
                                                     "topology detection fails", None, None,
                          _d(path=sys_path, device=sys_path.rstrip("/").rsplit("/", 1)[-1], what="gpu"))
    return Classified("topo_sysfs_path_missing", "NCCL could not find a device's PCI path in sysfs and cannot place "
                                                 "it in the topology", None, None,
                      _d(path=sys_path, device=path if inner else None,
                         what="nic" if "/infiniband/" in sys_path or "/net/" in sys_path else "device"))


def _topo_xml(msg: str) -> Classified | None:
    for phrase, which in _XML_WARNS:
        if phrase in msg:
            return Classified("topo_xml_error", "NCCL could not read or match a topology/graph XML file"
                              + (f" (the {which} file)" if which else ""), None, None,
                              _d(file=which, detail=msg[:120]))
    return None


def _func_before(msg: str, at: int) -> str | None:
    """The "funcName: " just before position `at` (looked at over a few dozen characters only)."""
    m = _FUNC.search(msg[max(0, at - 64):at])
    return m.group(1) if m else None


def _nccl_result(msg: str) -> int | None:
    for name, code in NCCL_RESULT_BY_NAME.items():
        if code and name in msg:
            return code
    low = msg.lower()
    for text, code in NCCL_RESULT_BY_TEXT.items():
        if text in low:
            return code
    return None
