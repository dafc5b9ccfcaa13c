"""What NCCL's network lines add: devices, interfaces, plugins, GPUDirect RDMA decisions.

Also the per-rank re-application of cached facts (apply_cached): a message every rank prints
(`Using network IB`, `NET/IB : Using ...`) is parsed once and re-applied to each rank after.
"""

from __future__ import annotations

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.evidence.citation import Citation
from ncdoc.evidence.interfaces import classify
from ncdoc.evidence.nccl_log_state import RankTally, ScanState

SEEN = ("seen",)          # cache marker: a message whose facts do not depend on the rank printing it
_SMALL = 64


def apply_cached(st: ScanState, rank: RankTally | None, cached: tuple, n: int = 1) -> tuple:
    """Apply a fact (first read, or re-read from the message cache) `n` times, to `rank` if given."""
    kind = cached[0]
    if kind == "using":
        st.using[cached[1]] += n
        if rank is not None:
            rank.using = cached[1]
    elif kind == "version":
        st.versions[cached[1]] += n
        if rank is not None:
            rank.version = cached[1]
    elif kind == "algo":
        if cached[1] in st.algo_picks or len(st.algo_picks) < 256:
            st.algo_picks[cached[1]] += n
    elif kind == "qp":
        st.mtu[cached[1]] += n
        if cached[2]:
            st.gid_index[cached[2]] += n
    elif rank is None:
        pass
    elif kind == "assigned":
        rank.assigned = cached[1]
    elif kind == "ib_using":
        for name in cached[1]:
            d = st.ib_devices.get(name)
            if d is not None and len(d["hosts"]) < _SMALL:
                d["hosts"].setdefault(rank.host, None)
            if name not in rank.ib_devices and len(rank.ib_devices) < 32:
                rank.ib_devices.append(name)
        _touch(st, cached[2], rank.host)
    elif kind == "no_device":
        st.no_device += 1
        if len(st.no_device_hosts) < 4096:
            st.no_device_hosts.setdefault(rank.host, None)
        rank.no_device = True
    elif kind == "socket":
        for name in cached[1]:
            d = st.socket_devices.get(name)
            if d is not None and len(d["hosts"]) < _SMALL:
                d["hosts"].setdefault(rank.host, None)
        rank.socket = True
        _touch(st, cached[2], rank.host)
    elif kind == "bootstrap":
        rank.bootstrap = cached[1]
        _touch(st, cached[2], rank.host)
    elif kind == "ifaces":
        _touch(st, cached[1], rank.host)
    return cached


def _touch(st: ScanState, keys: tuple, host: str) -> None:
    for key in keys:
        d = st.ifaces.get(key)
        if d is not None and len(d["hosts"]) < _SMALL:
            d["hosts"].setdefault(host, None)


def remember(d: dict, key: str) -> None:
    if key and len(d) < _SMALL:
        d.setdefault(key, None)


def remember_iface(st: ScanState, name: str, addr: str | None, role: str, pre: P.Prefix, lineno: int,
                   text: str) -> tuple | None:
    key = (name, addr, role)
    d = st.ifaces.get(key)
    if d is None:
        if len(st.ifaces) >= 256:
            return None
        cls, kind = classify(name, addr)
        d = st.ifaces[key] = {"class": cls, "kind": kind, "hosts": {}, "evidence": Citation.of(lineno, text)}
    if pre.host and len(d["hosts"]) < _SMALL:
        d["hosts"].setdefault(pre.host, None)
    return key


def net_ib_line(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int, text: str):
    if "GPU Direct RDMA" in msg:
        return gdr_line(st, msg, lineno, text)
    using = P.split_ib_using(msg)
    if using:
        part, oob = using
        st.relaxed = bool(st.relaxed) or "[RO]" in part
        names = []
        for idx, dev, port, link in P.IB_DEV.findall(part):
            name = f"{dev}:{port}"
            if name not in st.ib_devices and len(st.ib_devices) < 128:
                st.ib_devices[name] = {"index": int(idx), "link": link, "hosts": {}}
            names.append(name)
        keys = tuple(k for k in (remember_iface(st, n, a, "oob", pre, lineno, text)
                                 for n, a, _ in P.IFACE.findall(oob or "")) if k)
        st.book.add("net_devices", lineno, text)
        return apply_cached(st, rank, ("ib_using", tuple(names), keys))
    if "No device found" in msg:
        st.book.add("ib_no_device", lineno, text)
        if rank is None:
            st.no_device += 1
            return None
        return apply_cached(st, rank, ("no_device",))
    m = P.IB_DEV_DETAIL.match(msg)
    detail = m is not None
    m = m or P.IB_VDEV.search(msg)
    if m:
        name, speed = (m.group(2), m.group(5)) if detail else (m.group(2), m.group(3))
        if len(st.ib_speed) < 128:
            st.ib_speed[name] = int(speed)      # Mb/s, per verbs device name
        return SEEN
    m = P.IB_QP.search(msg)
    if m:
        return apply_cached(st, None, ("qp", m.group(1), m.group(2)))
    cls = P.classify_error(msg)
    if cls:
        st.problem(cls, msg, "INFO", pre, rank, lineno, text)
    return None


def socket_line(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int,
                    text: str) -> tuple:
    found = P.IFACE.findall(msg.split("Using", 1)[1])
    for name, addr, _port in found:
        if name not in st.socket_devices and len(st.socket_devices) < 128:
            st.socket_devices[name] = {"address": addr, "hosts": {}}
    keys = tuple(k for k in (remember_iface(st, n, a, "net", pre, lineno, text) for n, a, _ in found) if k)
    if not found:
        return SEEN
    st.book.add("socket_devices", lineno, text)
    return apply_cached(st, rank, ("socket", tuple(n for n, _, _ in found), keys))


def bootstrap_line(st: ScanState, pre: P.Prefix, rank: RankTally | None, msg: str, lineno: int,
               text: str) -> tuple:
    rest = msg.split("Using", 1)[1].strip() if "Using" in msg else ""
    found = P.IFACE.findall(rest)
    keys = tuple(k for k in (remember_iface(st, n, a, "bootstrap", pre, lineno, text) for n, a, _ in found) if k)
    st.book.add("bootstrap", lineno, text)
    value = f"{found[0][0]}:{found[0][1]}" if found else rest[:64]
    return apply_cached(st, rank, ("bootstrap", value, keys))


def plugin_line(st: ScanState, msg: str, lineno: int, text: str) -> tuple:
    pl = st.plugin
    body = msg.split(":", 1)[1].strip() if ":" in msg else msg
    if "Could not find" in body or "No plugin found" in body or "Plugin load" in body:
        if "libnccl-net" in body or "No plugin found" in body or "Plugin load" in body:
            if len(pl["missing"]) < 8 and body[:160] not in pl["missing"]:
                pl["missing"].append(body[:160])
            if "internal" in body:
                pl["internal"] = True
            st.book.add("plugin_missing", lineno, text)
        return SEEN
    m = P.PLUGIN_LOADED.search(body)
    if m:
        remember(pl["loaded"] if m.group(1) == "net" else pl["collnet"], m.group(2).strip())
        st.book.add("plugin", lineno, text)
    elif body.startswith("Plugin name set by env to"):
        pl["requested"] = pl["requested"] or body.rsplit(" ", 1)[-1]
    elif body.startswith("Using internal"):
        pl["internal"] = True
    return SEEN


def ofi_line(st: ScanState, msg: str, lineno: int, text: str) -> tuple:
    m = P.OFI_VERSION.search(msg)
    if m:
        st.plugin["ofi_version"] = m.group(1)
    m = P.OFI_PROVIDER.search(msg)
    if m:
        st.plugin["ofi_provider"] = m.group(1)
        if m.group(2):
            st.plugin["ofi_nics"] = int(m.group(2))
    st.book.add("ofi", lineno, text)
    return SEEN


def gdr_line(st: ScanState, msg: str, lineno: int, text: str) -> tuple:
    """Per NIC (does it take GPU memory at all?) or per GPU/NIC pair (is it close enough?).

    Cached as SEEN, so pairs count distinct decisions, not the lines repeating them."""
    found = P.GDR_ON.search(msg)
    on = found is not None
    dist = P.GDR_DISTANCE.search(msg)
    if dist is None and ("for GPU " in msg or "for GPU/" in msg) and not msg.rstrip().endswith(")"):
        # a per GPU/NIC pair line cut before its "(distance N > M)": a pair decision whose reason is lost,
        # not the per-NIC verdict (no GPU memory support) that the HCA form and 2.4's "(no module ...)" give
        if len(st.pairs_seen) < 65536:
            st.pairs_seen[msg] = on
    elif dist is None:
        hca = P.GDR_HCA.search(msg)
        name = (hca.group(2) or hca.group(1)) if hca else msg[-24:]
        # NCCL's own "NET/<net> : GPU Direct RDMA Enabled|Disabled for HCA" is its decision; a plugin's
        # "GPU Direct RDMA (DMABUF) enabled" says what the NIC supports, and counts only without a decision
        book = st.hca_gdr_claimed if found is not None and found.group(1) else st.hca_gdr
        if len(book) < 256:
            book[name] = book.get(name, False) or on
        if not on:
            tail = msg.rstrip()
            why = tail[tail.rfind("(") + 1:-1] if tail.endswith(")") and "(" in tail else ""
            st.off_reasons.setdefault(
                "the NIC reports no GPU memory support: no nvidia-peermem/nv_peer_mem registration and no "
                "DMA-BUF" + (f" ({why})" if why else ""), None)
    else:
        if len(st.pairs_seen) < 65536:
            st.pairs_seen[msg] = on
        if not on:
            st.off_reasons.setdefault(f"distance {dist.group(1)} > {dist.group(3)}", None)
    st.book.add("gdr_on" if on else "gdr_off", lineno, text)
    return SEEN
