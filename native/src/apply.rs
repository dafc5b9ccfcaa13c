//! LogScanner._events (ncdoc/evidence/nccl_log_scan.py) in Rust: a block's SCAN events (block_scan's
//! tuples, made by classify.rs or by the Python classifier, here or in a worker) applied in order,
//! with the same calls into the Python scanner in the same order.
//!
//! The loop does itself what the hot INFO lines need: a cached message re-applied to the rank that
//! printed it (apply_cached), its citation, and the communicator lines (`comm 0x... rank N nranks M`,
//! `ncclCommInitRank ... Init START|COMPLETE`, read by nccl_log_info._comm). Every other line goes to
//! the Python scanner's own methods (_info, _warn, _framework, _prefix, _last_error, ...), so the
//! facts, their order and their line numbers are the Python scanner's. Each branch below names the
//! Python statement it stands for.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::AsPyPointer;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::{ffi, intern};

use crate::cache::{decode_message, rank_ref, read_prefix, BytesCache, Dec, MsgEntry, PreEntry, RankRef};
use crate::config::{self, Config};
use crate::find::{is_digit, starts, sub};
use crate::netlines::{ib_devs, ifaces, long_prefix, strip, PrefixFields};
use crate::classify::{event_tuple, sl, Event, Events, FRAMEWORK, INFO, LAST_ERROR, WARN};
use crate::py::*;

const SMALL: isize = 64; // nccl_log_net._SMALL
const RANK_IB_DEVICES: isize = 32; // apply_cached: len(rank.ib_devices) < 32
const NO_DEVICE_HOSTS: isize = 4096; // apply_cached: len(st.no_device_hosts) < 4096
const ALGO_PICKS: isize = 256; // apply_cached: len(st.algo_picks) < 256
const RANK_RANKS: isize = 16; // _comm: len(rank.ranks) < 16
const COMM_PTRS: isize = 65536; // _comm: len(st.comm_ptrs) > 65536 -> clear
const COMMS: isize = 256; // _comm: len(st.comms) >= 256 -> not kept
const COMM_SET: isize = 65536; // _comm: len(comm.started|completed) < 65536
const MAX_DIGITS: usize = 18; // longer numbers go to Python (its ints have no size)

/// The ScanState containers the hot lines write (bound once per block: the state never rebinds them).
struct St<'py> {
    st: &'py PyAny,
    book: &'py PyAny,
    using: &'py PyAny,
    versions: &'py PyAny,
    algo_picks: &'py PyAny,
    mtu: &'py PyAny,
    gid_index: &'py PyAny,
    ib_devices: &'py PyAny,
    socket_devices: &'py PyAny,
    ifaces: &'py PyAny,
    no_device_hosts: &'py PyAny,
    comms: &'py PyAny,
    comm_ptrs: &'py PyAny,
    ranks: &'py PyAny,
    hosts: &'py PyAny,
    procs: &'py PyAny,
    trace_seen: &'py PyAny,
    results: &'py PyAny,
    result_sources: &'py PyAny,
    last_problem: &'py PyAny,
    max_ranks: isize,
    max_hosts: isize,
    /// citation kinds seen full in this block (a full kind stays full: CitationBook never drops one)
    full: Vec<&'static str>,
}

impl<'py> St<'py> {
    fn new(py: Python<'py>, cfg: &Config, st: &'py PyAny) -> PyResult<Self> {
        let g = |n: &PyString| st.getattr(n);
        let module = cfg.state_module.as_ref(py);
        Ok(St {
            ranks: g(intern!(py, "ranks"))?,
            hosts: g(intern!(py, "hosts"))?,
            procs: g(intern!(py, "procs"))?,
            trace_seen: g(intern!(py, "trace_seen"))?,
            results: g(intern!(py, "results"))?,
            result_sources: g(intern!(py, "result_sources"))?,
            last_problem: g(intern!(py, "last_problem"))?,
            max_ranks: module.getattr(intern!(py, "MAX_RANKS"))?.extract()?,
            max_hosts: module.getattr(intern!(py, "MAX_HOSTS"))?.extract()?,
            st,
            book: g(intern!(py, "book"))?,
            using: g(intern!(py, "using"))?,
            versions: g(intern!(py, "versions"))?,
            algo_picks: g(intern!(py, "algo_picks"))?,
            mtu: g(intern!(py, "mtu"))?,
            gid_index: g(intern!(py, "gid_index"))?,
            ib_devices: g(intern!(py, "ib_devices"))?,
            socket_devices: g(intern!(py, "socket_devices"))?,
            ifaces: g(intern!(py, "ifaces"))?,
            no_device_hosts: g(intern!(py, "no_device_hosts"))?,
            comms: g(intern!(py, "comms"))?,
            comm_ptrs: g(intern!(py, "comm_ptrs"))?,
            full: Vec::new(),
        })
    }

    /// `st.book.add(kind, lineno, text)`, where the text is made only when the book still wants the kind.
    fn cite(&mut self, py: Python<'py>, kind: &'static str, lineno: i64, text: impl FnOnce() -> PyResult<PyObject>)
        -> PyResult<()> {
        if self.full.contains(&kind) {
            return Ok(());
        }
        let k = PyString::new(py, kind);
        if !self.book.call_method1(intern!(py, "wants"), (k,))?.is_true()? {
            self.full.push(kind);
            return Ok(());
        }
        self.book.call_method1(intern!(py, "add"), (k, lineno, text()?))?;
        Ok(())
    }
}

/// `d = dict.get(name); if d is not None and len(d["hosts"]) < _SMALL: d["hosts"].setdefault(host, None)`
fn add_host(py: Python<'_>, devices: &PyAny, name: &PyObject, host: &PyObject) -> PyResult<()> {
    let d = dget(devices.as_ptr(), name.as_ptr());
    if d.is_null() || is_none(d) {
        return Ok(());
    }
    let hosts = own(py, unsafe { ffi::PyObject_GetItem(d, intern!(py, "hosts").as_ptr()) })?;
    if unsafe { ffi::PyObject_Size(hosts.as_ptr()) } < SMALL {
        setdefault_none(py, hosts.as_ptr(), host.as_ptr())?;
    }
    Ok(())
}

/// nccl_log_net._touch
fn touch(py: Python<'_>, s: &St<'_>, keys: &[PyObject], host: &PyObject) -> PyResult<()> {
    for k in keys {
        add_host(py, s.ifaces, k, host)?;
    }
    Ok(())
}

/// nccl_log_net.apply_cached(st, rank, cached) with n = 1, for the values read apart.
fn apply(py: Python<'_>, cfg: &Config, s: &St<'_>, rank: Option<&RankRef>, c: &MsgEntry) -> PyResult<()> {
    match &c.dec {
        Dec::Other | Dec::Seen | Dec::Trace { .. } => {
            let rk = rank.map_or_else(|| py.None(), |r| r.obj.clone_ref(py));
            cfg.apply_cached.call1(py, (s.st, rk, c.obj.clone_ref(py)))?;
        }
        Dec::Using(v) => {
            counter_add(py, s.using.as_ptr(), v.as_ptr(), 1)?;
            if let Some(r) = rank {
                setattr(py, r.obj.as_ptr(), intern!(py, "using"), v.as_ptr())?;
            }
        }
        Dec::Version(v) => {
            counter_add(py, s.versions.as_ptr(), v.as_ptr(), 1)?;
            if let Some(r) = rank {
                setattr(py, r.obj.as_ptr(), intern!(py, "version"), v.as_ptr())?;
            }
        }
        Dec::Algo(v) => {
            let d = s.algo_picks.as_ptr();
            if !dget(d, v.as_ptr()).is_null() || dlen(d) < ALGO_PICKS {
                counter_add(py, d, v.as_ptr(), 1)?;
            }
        }
        Dec::Qp(mtu, gid) => {
            counter_add(py, s.mtu.as_ptr(), mtu.as_ptr(), 1)?;
            if truthy(py, gid.as_ptr())? {
                counter_add(py, s.gid_index.as_ptr(), gid.as_ptr(), 1)?;
            }
        }
        _ if rank.is_none() => {}
        Dec::Assigned(v) => {
            let r = rank.unwrap();
            setattr(py, r.obj.as_ptr(), intern!(py, "assigned"), v.as_ptr())?;
        }
        Dec::IbUsing(names, keys) => {
            let r = rank.unwrap();
            let mine = getattr(py, r.obj.as_ptr(), intern!(py, "ib_devices"))?;
            for name in names {
                add_host(py, s.ib_devices, name, &r.host)?;
                let has = unsafe { ffi::PySequence_Contains(mine.as_ptr(), name.as_ptr()) };
                ok(py, has)?;
                if has == 0 && unsafe { ffi::PyObject_Size(mine.as_ptr()) } < RANK_IB_DEVICES {
                    ok(py, unsafe { ffi::PyList_Append(mine.as_ptr(), name.as_ptr()) })?;
                }
            }
            touch(py, s, keys, &r.host)?;
        }
        Dec::NoDevice => {
            let r = rank.unwrap();
            attr_add(py, s.st.as_ptr(), intern!(py, "no_device"), 1)?;
            if dlen(s.no_device_hosts.as_ptr()) < NO_DEVICE_HOSTS {
                setdefault_none(py, s.no_device_hosts.as_ptr(), r.host.as_ptr())?;
            }
            setattr(py, r.obj.as_ptr(), intern!(py, "no_device"), unsafe { ffi::Py_True() })?;
        }
        Dec::Socket(names, keys) => {
            let r = rank.unwrap();
            for name in names {
                add_host(py, s.socket_devices, name, &r.host)?;
            }
            setattr(py, r.obj.as_ptr(), intern!(py, "socket"), unsafe { ffi::Py_True() })?;
            touch(py, s, keys, &r.host)?;
        }
        Dec::Bootstrap(v, keys) => {
            let r = rank.unwrap();
            setattr(py, r.obj.as_ptr(), intern!(py, "bootstrap"), v.as_ptr())?;
            touch(py, s, keys, &r.host)?;
        }
        Dec::Ifaces(keys) => {
            let r = rank.unwrap();
            touch(py, s, keys, &r.host)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- communicator lines (_comm)

/// The digits of `\d+` at `at`, as i64 when short enough (else None: Python reads the line).
fn digits(m: &[u8], at: usize) -> Option<(usize, Option<i64>)> {
    let e = crate::find::run(m, at, is_digit);
    if e == at {
        return None;
    }
    let v = if e - at <= MAX_DIGITS { std::str::from_utf8(&m[at..e]).ok()?.parse::<i64>().ok() } else { None };
    Some((e, v))
}

fn hex_end(m: &[u8], at: usize) -> usize {
    crate::find::run(m, at, |b| b.is_ascii_hexdigit())
}

/// COMM.search: `comm (0x[0-9a-fA-F]+|\(nil\)) rank (\d+) n[Rr]anks (\d+)` -> (pointer, rank, nranks).
#[allow(clippy::type_complexity)]
fn comm_search(m: &[u8]) -> Option<((usize, usize), Option<i64>, Option<i64>)> {
    let mut from = 0;
    // candidates: "comm 0x" and "comm (nil)" (searched by their rare bytes), leftmost first
    let next = |from: usize| match (sub(m, b"comm 0x", from, m.len()), sub(m, b"comm (nil)", from, m.len())) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    while let Some(i) = next(from) {
        from = i + 1;
        let j = i + 5;
        let pe = if starts(m, j, b"0x") {
            let e = hex_end(m, j + 2);
            if e == j + 2 {
                continue;
            }
            e
        } else if starts(m, j, b"(nil)") {
            j + 5
        } else {
            continue;
        };
        if !starts(m, pe, b" rank ") {
            continue;
        }
        let Some((e, r)) = digits(m, pe + 6) else { continue };
        if !(starts(m, e, b" nranks ") || starts(m, e, b" nRanks ")) {
            continue;
        }
        let Some((_, nr)) = digits(m, e + 8) else { continue };
        return Some(((j, pe), r, nr));
    }
    None
}

/// COMM_ID.search: `commId (0x[0-9a-fA-F]+)`.
fn comm_id_search(m: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = sub(m, b"commId 0x", from, m.len()) {
        from = i + 1;
        let e = hex_end(m, i + 9);
        if e > i + 9 {
            return Some((i + 7, e));
        }
    }
    None
}

/// COMM_NODES.search: `nNodes (\d+) localRanks (\d+)`; Some(None) when a number is too long.
#[allow(clippy::type_complexity)]
fn nodes_search(m: &[u8]) -> Option<Option<(i64, i64)>> {
    let mut from = 0;
    while let Some(i) = sub(m, b"nNodes ", from, m.len()) {
        from = i + 1;
        let Some((e, a)) = digits(m, i + 7) else { continue };
        if !starts(m, e, b" localRanks ") {
            continue;
        }
        let Some((_, b)) = digits(m, e + 12) else { continue };
        return Some(match (a, b) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        });
    }
    None
}

/// nccl_log_info._comm for an ASCII message; false (and nothing done) when Python must read it.
#[allow(clippy::too_many_arguments)]
fn comm_line<'py>(py: Python<'py>, cfg: &Config, s: &mut St<'py>, rank: Option<&RankRef>, m: &[u8], lineno: i64,
             text: &dyn Fn() -> PyResult<PyObject>) -> PyResult<bool> {
    let Some(((pa, pb), r, nr)) = comm_search(m) else { return Ok(true) };
    let (Some(r), Some(nr)) = (r, nr) else { return Ok(false) };
    let nodes = nodes_search(m);
    if let Some(None) = nodes {
        return Ok(false);
    }
    let ptr = match rank {
        Some(rk) => {
            let p = ascii_str(py, &m[pa..pb])?;
            Some(tuple(py, &[rk.host.as_ptr(), rk.pid.as_ptr(), p.as_ptr()])?)
        }
        None => None,
    };
    let ptrs = s.comm_ptrs.as_ptr();
    let key: PyObject = match comm_id_search(m) {
        Some((a, b)) => {
            let k = ascii_str(py, &m[a..b])?;
            if let Some(t) = &ptr {
                if dlen(ptrs) > COMM_PTRS {
                    unsafe { ffi::PyDict_Clear(ptrs) };
                }
                dset(py, ptrs, t.as_ptr(), k.as_ptr())?;
            }
            k
        }
        None => {
            let got = match &ptr {
                Some(t) => dget(ptrs, t.as_ptr()),
                None => std::ptr::null_mut(),
            };
            if !got.is_null() && truthy(py, got)? {
                unsafe { PyObject::from_borrowed_ptr(py, got) }
            } else {
                PyString::new(py, &format!("nranks={nr}")).into_py(py)
            }
        }
    };
    let comms = s.comms.as_ptr();
    let found = dget(comms, key.as_ptr());
    let comm: PyObject = if found.is_null() {
        if dlen(comms) >= COMMS {
            return Ok(true);
        }
        let c = cfg.comm_tally.call1(py, (nr,))?;
        dset(py, comms, key.as_ptr(), c.as_ptr())?;
        c
    } else {
        unsafe { PyObject::from_borrowed_ptr(py, found) }
    };
    let cp = comm.as_ptr();
    let rv = long(py, r)?;
    if let Some(rk) = rank {
        let ranks = getattr(py, rk.obj.as_ptr(), intern!(py, "ranks"))?;
        if unsafe { ffi::PySet_Size(ranks.as_ptr()) } < RANK_RANKS {
            ok(py, unsafe { ffi::PySet_Add(ranks.as_ptr(), rv.as_ptr()) })?;
        }
    }
    if let Some(Some((a, b))) = nodes {
        setattr(py, cp, intern!(py, "nnodes"), long(py, a)?.as_ptr())?;
        setattr(py, cp, intern!(py, "local_ranks"), long(py, b)?.as_ptr())?;
        s.cite(py, "comm_summary", lineno, text)?;
    }
    let has = |lit: &[u8]| sub(m, lit, 0, m.len()).is_some();
    let phase = if has(b"Init START") {
        Some((intern!(py, "start"), intern!(py, "started"), intern!(py, "init_start")))
    } else if has(b"Init COMPLETE") {
        Some((intern!(py, "complete"), intern!(py, "completed"), intern!(py, "init_complete")))
    } else {
        if has(b"Destroy COMPLETE") {
            attr_add(py, cp, intern!(py, "destroyed"), 1)?;
        }
        None
    };
    if let Some((count, set, per_rank)) = phase {
        attr_add(py, cp, count, 1)?;
        let members = getattr(py, cp, set)?;
        if unsafe { ffi::PySet_Size(members.as_ptr()) } < COMM_SET {
            ok(py, unsafe { ffi::PySet_Add(members.as_ptr(), rv.as_ptr()) })?;
        }
        if let Some(rk) = rank {
            attr_add(py, rk.obj.as_ptr(), per_rank, 1)?;
        }
        if set.to_str()? == "completed" {
            s.cite(py, "init_complete", lineno, text)?;
        }
    }
    Ok(true)
}

// ---------------------------------------------------------------- prefixes (_prefix, rank_of)

const PRE_CACHE: usize = 8192; // LogScanner._prefix: len(self.pre_cache) > 8192 -> clear

/// `_PLAIN.fullmatch(raw)` (nccl_log_patterns: `host:pid:tid [dev] `, re.ASCII): host, pid, tid, dev.
pub fn plain_prefix(raw: &[u8]) -> Option<(&[u8], &[u8], &[u8], i64)> {
    let host_c = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let id_c = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-');
    use crate::find::run;
    let h = run(raw, 0, host_c);
    if h == 0 || !starts(raw, h, b":") {
        return None;
    }
    let p = run(raw, h + 1, id_c);
    if p == h + 1 || !starts(raw, p, b":") {
        return None;
    }
    let t = run(raw, p + 1, id_c);
    if t == p + 1 || !starts(raw, t, b" [") {
        return None;
    }
    let d = run(raw, t + 2, is_digit);
    if d == t + 2 || d - (t + 2) > MAX_DIGITS || !starts(raw, d, b"]") {
        return None;
    }
    // \s* to the end, ASCII: space, \t, \n, \r, \f, \v
    if !raw[d + 1..].iter().all(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) {
        return None;
    }
    let dev = std::str::from_utf8(&raw[t + 2..d]).ok()?.parse::<i64>().ok()?;
    Some((&raw[..h], &raw[h + 1..p], &raw[p + 1..t], dev))
}

/// ScanState.rank_of for a prefix with a host (None without one, past MAX_RANKS).
#[allow(clippy::too_many_arguments)]
fn rank_of(py: Python<'_>, cfg: &Config, s: &St<'_>, host: &PyObject, pid: &PyObject, dev: &PyObject, hb: &[u8],
           pb: Option<&[u8]>, db: Option<i64>) -> PyResult<Option<RankRef>> {
    // pre.rank_key: host[:pid][:dev]
    let mut key = hb.to_vec();
    if let Some(pb) = pb {
        key.push(b':');
        key.extend_from_slice(pb);
    }
    if let Some(d) = db {
        key.extend_from_slice(format!(":{d}").as_bytes());
    }
    let key = ascii_str(py, &key)?;
    let ranks = s.ranks.as_ptr();
    let found = dget(ranks, key.as_ptr());
    if !found.is_null() {
        return rank_ref(py, unsafe { py.from_borrowed_ptr::<PyAny>(found) });
    }
    let hosts = s.hosts.as_ptr();
    if dget(hosts, host.as_ptr()).is_null() {
        if dlen(hosts) < s.max_hosts {
            dset(py, hosts, host.as_ptr(), unsafe { ffi::Py_None() })?;
        } else {
            attr_add(py, s.st.as_ptr(), intern!(py, "extra_hosts"), 1)?;
        }
    }
    if dlen(ranks) >= s.max_ranks {
        return Ok(None);
    }
    let rank = cfg.rank_tally.call1(py, (host.clone_ref(py), pid.clone_ref(py), dev.clone_ref(py)))?;
    dset(py, ranks, key.as_ptr(), rank.as_ptr())?;
    // f"{pre.host}:{pre.pid}" (a pid of None reads "None")
    let proc_key = [hb, b":", pb.unwrap_or(b"None")].concat();
    let proc_key = ascii_str(py, &proc_key)?;
    setdefault(py, s.procs.as_ptr(), proc_key.as_ptr(), rank.as_ptr())?;
    rank_ref(py, rank.as_ref(py))
}

/// A line's prefix read natively (LogScanner._prefix without Python: the plain shape, or any other on
/// ASCII text as parse_prefix_long reads it), or None when Python must read it.
fn native_prefix(py: Python<'_>, cfg: &Config, s: &St<'_>, cache: &PyCell<BytesCache>, raw: &[u8])
    -> PyResult<Option<Arc<PreEntry>>> {
    let f = match plain_prefix(raw) {
        Some((h, p, t, d)) => PrefixFields { host: Some(h), pid: Some(p), tid: Some(t), dev: Some(d), file: None,
                                             func: None },
        None => match long_prefix(raw) {
            Some(f) => f,
            None => return Ok(None),
        },
    };
    cache.borrow_mut().bound(PRE_CACHE);
    let opt = |b: Option<&[u8]>| -> PyResult<PyObject> { b.map_or_else(|| Ok(py.None()), |b| ascii_str(py, b)) };
    let host = opt(f.host)?;
    let pid = opt(f.pid)?;
    let tid = opt(f.tid)?;
    let dev = f.dev.map_or_else(|| Ok(py.None()), |d| long(py, d))?;
    let rank = match f.host {
        Some(hb) => rank_of(py, cfg, s, &host, &pid, &dev, hb, f.pid, f.dev)?,
        None => None,
    };
    let e = Arc::new(PreEntry::native(host, pid, tid, dev, opt(f.file)?, opt(f.func)?, rank));
    cache.borrow_mut().put_prefix(raw, e.clone());
    Ok(Some(e))
}

/// ScanState.trace(pre, tr) for a trace read apart.
#[allow(clippy::too_many_arguments)]
fn trace(py: Python<'_>, cfg: &Config, s: &St<'_>, pe: &PreEntry, path: &PyObject, code: &PyObject, code_i: i64,
         boot: bool) -> PyResult<()> {
    let key = tuple(py, &[pe.host.as_ptr(), pe.pid.as_ptr(), pe.tid.as_ptr(), code.as_ptr()])?;
    let seen = s.trace_seen.as_ptr();
    let has = unsafe { ffi::PySet_Contains(seen, key.as_ptr()) };
    ok(py, has)?;
    if has == 0 && unsafe { ffi::PySet_Size(seen) } < 65536 {
        ok(py, unsafe { ffi::PySet_Add(seen, key.as_ptr()) })?;
        let known = dget(cfg.nccl_result.as_ptr(), code.as_ptr());
        let name: PyObject = if known.is_null() {
            PyString::new(py, &format!("ncclResult {code_i}")).into_py(py)
        } else {
            unsafe { py.from_borrowed_ptr::<PyAny>(known) }.get_item(0)?.into_py(py)
        };
        counter_add(py, s.results.as_ptr(), name.as_ptr(), 1)?;
        let srcs = s.result_sources.as_ptr();
        let mut wh = dget(srcs, name.as_ptr());
        let made;
        if wh.is_null() {
            made = new_dict(py)?;
            dset(py, srcs, name.as_ptr(), made.as_ptr())?;
            wh = made.as_ptr();
        }
        if dlen(wh) < 16 {
            let cur = dget(wh, path.as_ptr());
            let v = if cur.is_null() { long(py, 1)? } else { add_int(py, cur, 1)? };
            dset(py, wh, path.as_ptr(), v.as_ptr())?;
        }
    }
    if boot {
        let k3 = tuple(py, &[pe.host.as_ptr(), pe.pid.as_ptr(), pe.tid.as_ptr()])?;
        let entry = dget(s.last_problem.as_ptr(), k3.as_ptr());
        if !entry.is_null() && !is_none(entry) {
            let details = unsafe { py.from_borrowed_ptr::<PyAny>(entry) }.get_item("details")?;
            details.set_item("phase", "bootstrap")?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- network lines (nccl_log_net)

const MSG_CACHE: usize = 16384; // LogScanner._info: len(self.msg_cache) > 16384 -> clear
const CACHEABLE: usize = 512; // nccl_log_scan._CACHEABLE
const IFACES: isize = 256; // remember_iface: len(st.ifaces) >= 256 -> None

/// nccl_log_net.remember_iface(st, name, addr, role, pre, lineno, text): a known interface gets the host
/// here; a new one is made by the Python function (it classifies it and quotes the line).
#[allow(clippy::too_many_arguments)]
fn remember_iface(py: Python<'_>, cfg: &Config, s: &St<'_>, pe: &PreEntry, name: &[u8], addr: &[u8], role: &str,
                  lineno: i64, text: &dyn Fn() -> PyResult<PyObject>) -> PyResult<Option<PyObject>> {
    let n = ascii_str(py, name)?;
    let a = ascii_str(py, addr)?;
    let r = ascii_str(py, role.as_bytes())?;
    let key = tuple(py, &[n.as_ptr(), a.as_ptr(), r.as_ptr()])?;
    let d = dget(s.ifaces.as_ptr(), key.as_ptr());
    if d.is_null() {
        if dlen(s.ifaces.as_ptr()) >= IFACES {
            return Ok(None); // remember_iface: no new entry past 256
        }
        let got = cfg.remember_iface.call1(py, (s.st, n, a, r, pe.pre(py)?.clone_ref(py), lineno, text()?))?;
        return Ok(if got.is_none(py) { None } else { Some(got) });
    }
    if truthy(py, pe.host.as_ptr())? {
        let hosts = own(py, unsafe { ffi::PyObject_GetItem(d, intern!(py, "hosts").as_ptr()) })?;
        if unsafe { ffi::PyObject_Size(hosts.as_ptr()) } < SMALL {
            setdefault_none(py, hosts.as_ptr(), pe.host.as_ptr())?;
        }
    }
    Ok(Some(key))
}

/// nccl_log_net.bootstrap_line: the value to cache.
fn bootstrap_line<'py>(py: Python<'py>, cfg: &Config, s: &mut St<'py>, pe: &PreEntry, m: &[u8], lineno: i64,
                       text: &dyn Fn() -> PyResult<PyObject>) -> PyResult<PyObject> {
    let rest = match sub(m, b"Using", 0, m.len()) {
        Some(i) => strip(&m[i + 5..]),
        None => &[][..],
    };
    let found = ifaces(rest);
    let mut keys = Vec::with_capacity(found.len());
    for (n, a) in &found {
        if let Some(k) = remember_iface(py, cfg, s, pe, n, a, "bootstrap", lineno, text)? {
            keys.push(k);
        }
    }
    s.cite(py, "bootstrap", lineno, text)?;
    let value = match found.first() {
        Some((n, a)) => [*n, b":", *a].concat(),
        None => rest[..rest.len().min(64)].to_vec(),
    };
    let value = ascii_str(py, &value)?;
    let keys = PyTuple::new(py, keys);
    Ok(PyTuple::new(py, [PyString::new(py, "bootstrap").as_ref(), value.as_ref(py), keys.as_ref()]).into_py(py))
}

/// nccl_log_net.net_ib_line for "NET/IB : Using [0]mlx5_0:1/IB ...; OOB ...": the value to cache, or None
/// (nothing done) when Python must read it.
fn ib_using<'py>(py: Python<'py>, cfg: &Config, s: &mut St<'py>, pe: &PreEntry, m: &[u8], lineno: i64,
                 text: &dyn Fn() -> PyResult<PyObject>) -> PyResult<Option<PyObject>> {
    let Some(u) = sub(m, b"Using", 0, m.len()) else { return Ok(None) };
    let rest = &m[u + 5..];
    let (part, oob) = match sub(rest, b"; OOB ", 0, rest.len()) {
        Some(i) => (&rest[..i], strip(&rest[i + 6..])),
        None => (rest, &[][..]),
    };
    let devs = ib_devs(part);
    let mut idx = Vec::with_capacity(devs.len());
    for (i, ..) in &devs {
        match digits(i, 0) {
            Some((_, Some(v))) => idx.push(v),
            _ => return Ok(None),
        }
    }
    let st = s.st.as_ptr();
    let relaxed = {
        let cur = getattr(py, st, intern!(py, "relaxed"))?;
        truthy(py, cur.as_ptr())? || sub(part, b"[RO]", 0, part.len()).is_some()
    };
    setattr(py, st, intern!(py, "relaxed"), if relaxed { unsafe { ffi::Py_True() } } else { unsafe { ffi::Py_False() } })?;
    let devices = s.ib_devices.as_ptr();
    let mut names = Vec::with_capacity(devs.len());
    for ((_, dev, port, link), ix) in devs.iter().zip(idx) {
        let name = ascii_str(py, &[*dev, b":", *port].concat())?;
        if dget(devices, name.as_ptr()).is_null() && dlen(devices) < 128 {
            let d = PyDict::new(py);
            d.set_item("index", ix)?;
            d.set_item("link", ascii_str(py, link)?)?;
            d.set_item("hosts", PyDict::new(py))?;
            dset(py, devices, name.as_ptr(), d.as_ptr())?;
        }
        names.push(name);
    }
    let mut keys = Vec::new();
    for (n, a) in ifaces(oob) {
        if let Some(k) = remember_iface(py, cfg, s, pe, n, a, "oob", lineno, text)? {
            keys.push(k);
        }
    }
    s.cite(py, "net_devices", lineno, text)?;
    let names = PyTuple::new(py, names);
    let keys = PyTuple::new(py, keys);
    Ok(Some(PyTuple::new(py, [PyString::new(py, "ib_using").as_ref(), names.as_ref(), keys.as_ref()]).into_py(py)))
}

/// What handle_info would do with this message, when the loop can do it (ASCII, no Ray fold, no trace):
/// Some(cache value or None) when done, None when Python must read it.
#[allow(clippy::too_many_arguments)]
fn info_line<'py>(py: Python<'py>, cfg: &Config, s: &mut St<'py>, pe: &PreEntry, m: &[u8], lineno: i64,
                  text: &dyn Fn() -> PyResult<PyObject>) -> PyResult<Option<Option<PyObject>>> {
    if m.is_empty() || !m.iter().all(|&b| b < 0x80) || sub(m, b"cluster]", 0, m.len()).is_some()
        || sub(m, b" -> ", 0, m.len()).is_some() {
        return Ok(None);
    }
    if m.starts_with(b"comm ") || m[0] == b'[' || m.starts_with(b"ncc") {
        return Ok(if comm_line(py, cfg, s, pe.rank.as_ref(), m, lineno, text)? { Some(None) } else { None });
    }
    if m[0] == b'B' {
        return Ok(Some(Some(bootstrap_line(py, cfg, s, pe, m, lineno, text)?)));
    }
    if m.starts_with(b"NET/IB") && sub(m, b"GPU Direct RDMA", 0, m.len()).is_none() {
        return Ok(ib_using(py, cfg, s, pe, m, lineno, text)?.map(Some));
    }
    Ok(None)
}

// ---------------------------------------------------------------- the events

fn cache<'py>(py: Python<'py>, scanner: &'py PyAny, name: &PyString, kind: &str) -> PyResult<&'py PyCell<BytesCache>> {
    let obj = scanner.getattr(name)?;
    if let Ok(c) = obj.downcast::<PyCell<BytesCache>>() {
        return Ok(c);
    }
    // the Python scanner's dict (a new scanner, or one unpickled from a worker): the same items, natively
    let c = PyCell::new(py, BytesCache::new(py, kind, Some(obj))?)?;
    scanner.setattr(name, c)?;
    Ok(c)
}

/// The bytes of a bytes object (borrowed), or an error for anything else.
#[inline]
fn view<'a>(py: Python<'_>, o: *mut ffi::PyObject) -> PyResult<&'a [u8]> {
    let mut p: *mut std::os::raw::c_char = std::ptr::null_mut();
    let mut n: ffi::Py_ssize_t = 0;
    ok(py, unsafe { ffi::PyBytes_AsStringAndSize(o, &mut p, &mut n) })?;
    // SAFETY: the bytes object outlives the loop (the events list holds it); bytes are immutable.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, n as usize) })
}

#[inline]
fn item(t: *mut ffi::PyObject, i: isize) -> *mut ffi::PyObject {
    unsafe { ffi::PyTuple_GetItem(t, i) } // borrowed; the tuple is block_scan's event
}

#[inline]
fn int_of(py: Python<'_>, o: *mut ffi::PyObject) -> PyResult<i64> {
    let v = unsafe { ffi::PyLong_AsLongLong(o) };
    if v == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(v)
}

/// block_scan.info_text(ev): the whole line of an INFO event.
fn info_text(ev: *mut ffi::PyObject, py: Python<'_>) -> PyResult<Vec<u8>> {
    let t = item(ev, 4);
    if !is_none(t) {
        return Ok(view(py, t)?.to_vec());
    }
    Ok([view(py, item(ev, 2))?, b"NCCL INFO ", view(py, item(ev, 3))?].concat())
}

/// A block's events as apply_events gets them: block_scan's tuples (classified by Python, or in another
/// process), or ncdoc_fast.Events (classified here: offsets into the block, no tuples made).
enum Evs<'a> {
    Tuples(&'a PyList),
    Native(&'a [Event], &'a [u8]),
}

/// LogScanner._events(events, done, base): the events of one block applied in order (those on lines up
/// to `done` were read by a follow-up begun in the block before); how many were read.
pub fn apply_events(py: Python<'_>, scanner: &PyAny, events: &PyAny, done: i64, base: i64) -> PyResult<i64> {
    if let Ok(native) = events.downcast::<PyCell<Events>>() {
        let e = native.borrow();
        let h = e.block.as_ref(py).as_bytes();
        return run_events(py, scanner, Evs::Native(&e.evs, h), done, base);
    }
    let list: &PyList = events.downcast()?;
    run_events(py, scanner, Evs::Tuples(list), done, base)
}

fn run_events(py: Python<'_>, scanner: &PyAny, evs: Evs<'_>, mut done: i64, base: i64) -> PyResult<i64> {
    let cfg = config::get(py)?;
    let cfg = &*cfg;
    let state = scanner.getattr(intern!(py, "state"))?;
    let pre_cache = cache(py, scanner, intern!(py, "pre_cache"), "prefix")?;
    let msg_cache = cache(py, scanner, intern!(py, "msg_cache"), "message")?;
    let cite_cached = scanner.getattr(intern!(py, "cite_cached"))?;
    let mut s = St::new(py, cfg, state)?;
    let mut matched: i64 = 0;
    let follow = |scanner: &PyAny| -> PyResult<bool> { scanner.getattr(intern!(py, "follow"))?.is_true() };
    // got = pre_cache.get(raw) or self._prefix(raw)
    let prefix = |s: &St<'_>, raw: &[u8], raw_obj: &dyn Fn() -> PyResult<PyObject>| -> PyResult<Arc<PreEntry>> {
        if let Some(p) = pre_cache.borrow().prefix(raw) {
            return Ok(p);
        }
        if let Some(p) = native_prefix(py, cfg, s, pre_cache, raw)? {
            return Ok(p);
        }
        let got = scanner.call_method1(intern!(py, "_prefix"), (raw_obj()?,))?;
        read_prefix(py, got)
    };
    let n = match &evs {
        Evs::Tuples(l) => l.len(),
        Evs::Native(e, _) => e.len(),
    };
    for i in 0..n {
        // the event's kind and line, and for an INFO event its prefix, message and whole line
        let (kind, line, ev) = match &evs {
            Evs::Tuples(l) => {
                let ev = unsafe { ffi::PyList_GetItem(l.as_ptr(), i as isize) }; // borrowed
                if ev.is_null() || unsafe { ffi::PyTuple_Check(ev) } == 0 || unsafe { ffi::PyTuple_Size(ev) } < 4 {
                    return Err(pyo3::exceptions::PyTypeError::new_err("a block event is a tuple (block_scan.scan_events)"));
                }
                (int_of(py, item(ev, 0))?, int_of(py, item(ev, 1))?, Some(ev))
            }
            Evs::Native(e, _) => {
                let (k, l) = match e[i] {
                    Event::Info { line, .. } => (INFO, line),
                    Event::Warn { line, .. } => (WARN, line),
                    Event::Framework { line, .. } => (FRAMEWORK, line),
                    Event::LastError { line, .. } => (LAST_ERROR, line),
                };
                (k, l as i64, None)
            }
        };
        if line <= done {
            continue;
        }
        matched += 1;
        let lineno = base + line + 1;
        if kind == INFO {
            let (pre, msg, whole): (&[u8], &[u8], &[u8]) = match (&evs, ev) {
                (Evs::Tuples(_), Some(ev)) => (view(py, item(ev, 2))?, view(py, item(ev, 3))?, &[][..]),
                (Evs::Native(e, h), _) => match e[i] {
                    Event::Info { ps, s: at, mend, ls, le, whole, .. } => {
                        (sl(h, if whole { ls } else { ps }, at), sl(h, at + 10, mend), sl(h, ls, le))
                    }
                    _ => unreachable!(),
                },
                _ => unreachable!(),
            };
            let text_bytes = || -> PyResult<Vec<u8>> {
                match ev {
                    Some(ev) => info_text(ev, py),
                    None => Ok(whole.to_vec()),
                }
            };
            let pre_obj = || -> PyResult<PyObject> {
                Ok(match ev {
                    Some(ev) => unsafe { PyObject::from_borrowed_ptr(py, item(ev, 2)) },
                    None => PyBytes::new(py, pre).into_py(py),
                })
            };
            let got = prefix(&s, pre, &pre_obj)?;
            let cached = msg_cache.borrow().message(msg);
            if let Some(c) = cached {
                // read before: skip parsing it again
                match &c.dec {
                    Dec::Seen => {}
                    Dec::Trace { path, code, code_i, boot, .. } => {
                        trace(py, cfg, &s, &got, path, code, *code_i, *boot)?;
                    }
                    Dec::Other => {
                        let first = c.obj.as_ref(py).get_item(0)?;
                        if first.eq("trace")? {
                            let t = c.obj.as_ref(py).get_item(1)?;
                            s.st.call_method1(intern!(py, "trace"), (got.pre(py)?.as_ref(py), t))?;
                            continue;
                        }
                        apply(py, cfg, &s, got.rank.as_ref(), &c)?;
                        cite_again(py, &mut s, cite_cached, first, &text_bytes, lineno)?;
                    }
                    _ => {
                        apply(py, cfg, &s, got.rank.as_ref(), &c)?;
                        if let Some(kind) = c.kind.as_ref().map(|k| k.as_ref(py)) {
                            cite_again(py, &mut s, cite_cached, kind, &text_bytes, lineno)?;
                        }
                    }
                }
                continue;
            }
            let mut m = msg;
            while let [rest @ .., b'\r'] = m {
                m = rest; // msg_raw.decode(...).rstrip("\r")
            }
            let text = || -> PyResult<PyObject> {
                decode(py, &text_bytes()?)?.call_method1(py, intern!(py, "rstrip"), ("\r",))
            };
            if let Some(read) = info_line(py, cfg, &mut s, &got, m, lineno, &text)? {
                if let Some(value) = read {
                    // LogScanner._info: cached under the raw message, when short enough
                    let entry = decode_message(py, value.as_ref(py))?;
                    apply(py, cfg, &s, got.rank.as_ref(), &entry)?;
                    if msg.len() <= CACHEABLE {
                        let mut c = msg_cache.borrow_mut();
                        c.bound(MSG_CACHE);
                        c.put_message(msg, entry);
                    }
                }
                continue;
            }
            let whole = PyBytes::new(py, &text_bytes()?);
            let msg_obj: PyObject = match ev {
                Some(ev) => unsafe { PyObject::from_borrowed_ptr(py, item(ev, 3)) },
                None => PyBytes::new(py, msg).into_py(py),
            };
            scanner.call_method1(intern!(py, "_info"), (got.got(py)?.as_ref(py), msg_obj, whole, lineno))?;
            continue;
        }
        // the rarer events: read from block_scan's tuple (made now for an Events)
        let made;
        let ev = match (&evs, ev) {
            (_, Some(ev)) => ev,
            (Evs::Native(e, h), None) => {
                made = event_tuple(py, h, &e[i])?;
                made.as_ptr()
            }
            _ => unreachable!(),
        };
        let ev_any: &PyAny = unsafe { py.from_borrowed_ptr(ev) };
        match kind {
            WARN => {
                let raw_obj = item(ev, 2);
                let got = prefix(&s, view(py, raw_obj)?, &|| Ok(unsafe { PyObject::from_borrowed_ptr(py, raw_obj) }))?;
                let msg_any: &PyAny = unsafe { py.from_borrowed_ptr(item(ev, 3)) };
                let text_any: &PyAny = unsafe { py.from_borrowed_ptr(item(ev, 4)) };
                scanner.call_method1(intern!(py, "_warn"), (got.got(py)?.as_ref(py), msg_any, text_any, lineno))?;
            }
            FRAMEWORK => {
                let text = decode(py, view(py, item(ev, 2))?)?.call_method1(py, intern!(py, "rstrip"), ("\r",))?;
                scanner.call_method1(intern!(py, "_framework"), (text, lineno))?;
                if follow(scanner)? {
                    let next = item(ev, 3);
                    let next: PyObject = if is_none(next) {
                        PyTuple::empty(py).into_py(py)
                    } else {
                        unsafe { PyObject::from_borrowed_ptr(py, next) }
                    };
                    let k: i64 = scanner.call_method1(intern!(py, "_follow_up"), (next, lineno + 1))?.extract()?;
                    done = line + k;
                }
            }
            _ => {
                // a "Last error:" line, whoever printed it
                scanner.call_method1(intern!(py, "_result_before"), (ev_any, lineno))?;
                let text = decode(py, view(py, item(ev, 2))?)?.call_method0(py, intern!(py, "strip"))?;
                scanner.call_method1(intern!(py, "_last_error"), (text, lineno))?;
                if follow(scanner)? {
                    let next: &PyAny = unsafe { py.from_borrowed_ptr(item(ev, 5)) };
                    let k: i64 = scanner.call_method1(intern!(py, "_follow_up"), (next, lineno + 1))?.extract()?;
                    done = line + k;
                }
            }
        }
    }
    Ok(matched)
}

/// `cite = self.cite_cached.get(cached[0])`: quote a few more ranks' lines.
fn cite_again(py: Python<'_>, s: &mut St<'_>, cite_cached: &PyAny, kind: &PyAny,
              text: &dyn Fn() -> PyResult<Vec<u8>>, lineno: i64) -> PyResult<()> {
    let cite = dget(cite_cached.as_ptr(), kind.as_ptr());
    if cite.is_null() {
        return Ok(());
    }
    let cite = unsafe { PyObject::from_borrowed_ptr(py, cite) };
    let text = decode(py, &text()?)?;
    s.book.call_method1(intern!(py, "add"), (cite.as_ref(py), lineno, text))?;
    if !s.book.call_method1(intern!(py, "wants"), (cite.as_ref(py),))?.is_true()? {
        ok(py, unsafe { ffi::PyObject_DelItem(cite_cached.as_ptr(), kind.as_ptr()) })?;
    }
    Ok(())
}
