"""What each kind of NCCL INFO line adds to the scan state (nccl_log_state.ScanState).

One handler per message family, chosen by the message's first words. Every rank prints the
same init messages, so a handler also says how the scanner may skip re-reading a message it
has already seen: SEEN (nothing depends on who printed it), a small tuple re-applied to the
next rank that prints it (apply_cached), or None (read every time: counts and errors).
"""

from __future__ import annotations

import re
from collections import Counter

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.nccl_log_net import (
    SEEN, apply_cached, bootstrap_line, gdr_line, net_ib_line, ofi_line, plugin_line, remember, remember_iface,
    socket_line,
)
from ncdoc.evidence.nccl_log_state import CommTally, RankTally, ScanState
from ncdoc.evidence.wrappers import drop_repeat_suffix
from ncdoc.evidence.lazy_re import lazy
from ncdoc.readers.numbers import is_digits

_CROSS_NIC = lazy(r"crossNic (\d{1,20}(?!\d))")
MAX_SMALL = 64            # small sets: ranks and directions without GDR


def handle_info(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int,
                text: str) -> tuple | None:
    if "cluster]" in msg:           # Ray folded this line from several workers: read what NCCL printed
        msg = drop_repeat_suffix(msg)
    if " -> " in msg:
        tr = P.parse_trace(msg)
        if tr:
            st.trace(pre, tr)
            if tr[2] and ("bootstrap" in tr[0] or "socket.cc" in tr[0]):     # quoted when no WARN names it
                st.book.add("bootstrap_trace" if "bootstrap" in tr[0] else "socket_trace", lineno, text)
            return ("trace", tr)             # re-read for the next process by the scanner (it needs the prefix)
        m = P.ALGO_PICK.match(msg)
        if m:
            return _algo_pick(st, m, lineno, text)
    c = msg[:1]
    if c == "N":
        if msg.startswith("NCCL version"):
            m = P.VERSION.search(msg)
            if m:
                st.version(rank, m, lineno, text)
                return ("version", m.group(1))
            return SEEN
        if msg.startswith("NCCL_"):
            return _env(st, msg, lineno, text)
        if msg.startswith("NET/IB"):
            return net_ib_line(st, pre, rank, msg, lineno, text)
        if "GPU Direct RDMA" in msg:
            return gdr_line(st, msg, lineno, text)
        if msg.startswith("NET/Socket") or msg.startswith("NET : Using interface"):
            return socket_line(st, pre, rank, msg, lineno, text) if "Using" in msg else SEEN
        if msg.startswith("NET/Plugin"):
            return plugin_line(st, msg, lineno, text)
        if msg.startswith("NET/OFI"):
            return ofi_line(st, msg, lineno, text)
        if msg.startswith("NVLS multicast"):
            st.nvls = bool(st.nvls) or "not available" not in msg
            st.book.add("nvls", lineno, text)
        return SEEN
    if c == "B":
        return bootstrap_line(st, pre, rank, msg, lineno, text)
    if c == "c":
        if msg.startswith("cudaDriverVersion"):
            m = P.CUDA_DRIVER.search(msg)
            if m and not st.cuda_driver:
                code = int(m.group(1))
                st.cuda_driver = f"{code // 1000}.{code % 1000 // 10}"
            return SEEN
        if msg.startswith("comm "):
            _comm(st, rank, msg, lineno, text)
        return None
    if c == "[" or msg.startswith("ncc"):
        _comm(st, rank, msg, lineno, text)
        return None
    if c == "G":
        return gdr_line(st, msg, lineno, text) if msg.startswith("GPU Direct RDMA") else SEEN
    if msg.startswith("Using network"):
        name = msg[len("Using network"):].strip()
        if not name:
            return None
        st.book.add("transport", lineno, text)
        return apply_cached(st, rank, ("using", name))
    if msg.startswith("Initialized NET plugin"):
        remember(st.plugin["initialized"], msg[len("Initialized NET plugin"):].strip())
        st.book.add("plugin", lineno, text)
        return SEEN
    if msg.startswith("Assigned NET plugin"):
        name = msg[len("Assigned NET plugin"):].replace(" to comm", "").strip()
        remember(st.plugin["assigned"], name)
        return apply_cached(st, rank, ("assigned", name))
    if msg.startswith("Successfully loaded external"):
        remember(st.plugin["paths"], msg.rsplit(" ", 1)[-1])
        st.book.add("plugin", lineno, text)
        return SEEN
    if msg.startswith("Failed to initialize NET plugin"):          # 2.27+: a plugin NCCL tried and dropped
        remember(st.plugin["failed"], msg[len("Failed to initialize NET plugin"):].strip())
        st.book.add("plugin_failed", lineno, text)
        return SEEN
    if c == "P":
        return _p_lines(st, pre, rank, msg, lineno, text)
    if c == "D":
        st.dma_buf = True
        st.book.add("dma_buf", lineno, text)
        return SEEN
    if msg.startswith("Enabled NCCL Func"):
        st.algo_matrix = True
        return SEEN
    if c == "C":
        return _c_lines(st, pre, rank, msg, lineno, text)
    if c == "H":
        entry = st.last_problem.get((pre.host, pre.pid, pre.tid))
        if entry is not None:
            entry["details"].setdefault("hint", msg[:200])
        return None
    if is_digits(c):
        m = P.CHANNEL_SUMMARY.match(msg)
        if m:
            st.channel_summary = tuple(int(g) if g else None for g in m.groups())
        return SEEN
    cls = P.classify_error(msg)
    if cls:
        st.problem(cls, msg, "INFO", pre, rank, lineno, text)
    return None


def _env(st: ScanState, msg: str, lineno: int, text: str) -> tuple:
    m = P.ENV.match(msg)
    if not m:
        return SEEN
    name, value = m.group(1), m.group(2)
    if value.endswith(".") and is_digits(value[:-1].lstrip("-")):
        value = value[:-1]                       # "%s set by environment to %lld." ends with a full stop
    st.env[name] = value
    seen = st.env_values.setdefault(name, {})
    if len(seen) < 8:
        seen.setdefault(value, None)
    if name == "NCCL_NET_PLUGIN" and not st.plugin["requested"]:
        st.plugin["requested"] = value
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        st.algo_env[name] = value
    st.book.add("env:" + name, lineno, text)
    return SEEN


def _comm(st: ScanState, rank: RankTally | None, msg: str, lineno: int, text: str) -> None:
    m = P.COMM.search(msg)
    if not m:
        return
    r, nranks = int(m.group(2)), int(m.group(3))
    cid = P.COMM_ID.search(msg)
    ptr = (rank.host, rank.pid, m.group(1)) if rank is not None else None
    if cid:
        key = cid.group(1)
        if ptr is not None:
            if len(st.comm_ptrs) > 65536:
                st.comm_ptrs.clear()
            st.comm_ptrs[ptr] = key         # later lines name the comm by its pointer only
    else:
        key = st.comm_ptrs.get(ptr) or f"nranks={nranks}"
    comm = st.comms.get(key)
    if comm is None:
        if len(st.comms) >= 256:
            return
        comm = st.comms[key] = CommTally(nranks)
    if rank is not None and len(rank.ranks) < 16:
        rank.ranks.add(r)
    nodes = P.COMM_NODES.search(msg)
    if nodes:
        comm.nnodes, comm.local_ranks = int(nodes.group(1)), int(nodes.group(2))
        st.book.add("comm_summary", lineno, text)
    if "Init START" in msg:
        comm.start += 1
        if len(comm.started) < 65536:
            comm.started.add(r)
        if rank:
            rank.init_start += 1
    elif "Init COMPLETE" in msg:
        comm.complete += 1
        if len(comm.completed) < 65536:
            comm.completed.add(r)
        if rank:
            rank.init_complete += 1
        st.book.add("init_complete", lineno, text)
    elif "Destroy COMPLETE" in msg:
        comm.destroyed += 1


def _p_lines(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int, text: str):
    if msg.startswith("Plugin Path"):
        remember(st.plugin["paths"], msg.split(":", 1)[-1].strip())
    elif msg.startswith("P2P plugin"):
        remember(st.plugin["loaded"], msg[len("P2P plugin"):].strip())
        st.book.add("plugin", lineno, text)
    elif msg.startswith("P2P is disabled"):
        st.problem(P.Classified("p2p_disabled", "P2P between these GPUs is disabled; NCCL goes through host "
                                 "memory instead"), msg, "INFO", pre, rank, lineno, text)
        return None
    elif msg.startswith("Pattern"):
        m = _CROSS_NIC.search(msg)
        if m:
            st.cross_nic.add(int(m.group(1)))
    return SEEN


def _c_lines(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int, text: str):
    if msg.startswith("Channel"):
        m = P.RING_LIST.match(msg)
        if m:
            st.nchannels = max(st.nchannels or 0, int(m.group(2)))
        return SEEN
    if msg.startswith("Connected all rings"):
        m = P.RING_GDR.search(msg)
        if m:
            st.ring_gdr[f"GDR {m.group(2)}"] += 1
        return SEEN
    if msg.startswith("CUDA Dev"):
        m = P.OLD_IFACES.search(msg)
        keys = tuple(k for k in (remember_iface(st, item.split("(")[0], None, "candidate", pre, lineno, text)
                                 for item in (m.group(1).split() if m else ())) if k)
        return ("ifaces", keys)
    if msg.startswith("Could not find a path"):
        st.problem(P.Classified("topo_search_fallback", "the topology search found no path for a pattern "
                                 "and fell back to a simple order (slow)"), msg, "INFO", pre, rank, lineno, text)
        return None
    cls = P.classify_error(msg)
    if cls:
        st.problem(cls, msg, "INFO", pre, rank, lineno, text)
    return None


def _algo_pick(st: ScanState, m: re.Match, lineno: int, text: str) -> tuple:
    """`AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE ...` (NCCL_DEBUG_SUBSYS=TUNING, rank 0)."""
    key = f"{m.group(1) or '?'}/{P.algo_name(m.group(3), P.ALGORITHMS)}/{P.algo_name(m.group(4), P.PROTOCOLS)}"
    st.book.add("algo", lineno, text)
    return apply_cached(st, None, ("algo", key))


# ---------------------------------------------------------------- channel lines (counted by VIA)

def channel_tails(st: ScanState, tails: Counter, first_line, off_channels, base: int) -> None:
    """Per-channel transport lines, counted by their "via" tail: what each tail means, GDR per rank/direction.
    `first_line(tail)` gives (line in the block, text) of a tail's first channel line; `off_channels()` the
    ranks and directions of the block's NET channels without GDRDMA (nccl_log_classify)."""
    st.tails.update(tails)
    off_here = False
    for tail in tails:
        info = st.tail_info.get(tail)
        if info is None:
            info = st.tail_info[tail] = P.tail_info(tail)
            if info[0] == "NET" and info[2] != "Socket":
                kind = "gdr_channel_on" if info[3] else "gdr_channel_off"
                if st.book.wants(kind):
                    got = first_line(tail)
                    if got is not None:
                        st.book.add(kind, base + got[0] + 1, got[1].decode("utf-8", "replace"))
        if info[0] == "NET" and info[2] != "Socket" and not info[3]:
            off_here = True
    if off_here and len(st.gdr_ranks_off) < MAX_SMALL:
        keys, dirs = off_channels()
        for key in keys:
            if len(st.gdr_ranks_off) >= MAX_SMALL:
                break
            st.gdr_ranks_off.setdefault(key, None)
        for d in dirs:
            st.gdr_dirs_off.setdefault(d, None)
