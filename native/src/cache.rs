//! The scanner's two caches (LogScanner.pre_cache and .msg_cache) as one native mapping type.
//!
//! The Python scanner keeps them as dicts keyed by bytes; with ncdoc_fast they are BytesCache
//! objects that behave as those dicts do for everything the scanner does with them (get, [k] = v,
//! len, clear, in), so its Python code runs unchanged, while the native line loop looks a line's
//! prefix and message up without making a bytes object, and finds each value already read apart
//! (what a cached message re-applies, which rank a prefix names).

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::AsPyPointer;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::{ffi, intern};

use crate::config;
use crate::find::FxMap;

/// A rank tally (nccl_log_state.RankTally) and the fields the loop reads from it.
pub struct RankRef {
    pub obj: PyObject,
    pub host: PyObject,
    pub pid: PyObject,
}

/// A prefix cache value: `(Prefix, RankTally | None)`, with the Prefix's host, pid and tid. A prefix
/// the native loop read itself (the plain `host:pid:tid [dev] ` shape) makes its Prefix and tuple only
/// when Python code asks for them.
pub struct PreEntry {
    got: OnceLock<PyObject>,
    pre: OnceLock<PyObject>,
    pub host: PyObject,
    pub pid: PyObject,
    pub tid: PyObject,
    dev: PyObject,
    file: PyObject,
    func: PyObject,
    pub rank: Option<RankRef>,
}

impl PreEntry {
    /// A prefix read natively: Prefix(host, pid, tid, dev, file, func) once needed.
    #[allow(clippy::too_many_arguments)]
    pub fn native(host: PyObject, pid: PyObject, tid: PyObject, dev: PyObject, file: PyObject, func: PyObject,
                  rank: Option<RankRef>) -> Self {
        PreEntry { got: OnceLock::new(), pre: OnceLock::new(), host, pid, tid, dev, file, func, rank }
    }

    /// The Prefix (made now if the native loop read it).
    pub fn pre(&self, py: Python<'_>) -> PyResult<&PyObject> {
        if let Some(p) = self.pre.get() {
            return Ok(p);
        }
        let cfg = config::get(py)?;
        let p = cfg.prefix.call1(py, (self.host.clone_ref(py), self.pid.clone_ref(py), self.tid.clone_ref(py),
                                      self.dev.clone_ref(py), self.file.clone_ref(py), self.func.clone_ref(py)))?;
        Ok(self.pre.get_or_init(|| p))
    }

    /// The `(Prefix, RankTally | None)` tuple LogScanner._prefix returns.
    pub fn got(&self, py: Python<'_>) -> PyResult<&PyObject> {
        if let Some(g) = self.got.get() {
            return Ok(g);
        }
        let pre = self.pre(py)?.clone_ref(py);
        let rank = self.rank.as_ref().map_or_else(|| py.None(), |r| r.obj.clone_ref(py));
        let t: PyObject = PyTuple::new(py, [pre, rank]).into_py(py);
        Ok(self.got.get_or_init(|| t))
    }
}

/// A message cache value, read apart: what apply_cached (nccl_log_net) does with it.
pub enum Dec {
    Seen,
    /// `("trace", (path, line, code))`: the code, the path, and whether the path names bootstrap
    Trace { tr: PyObject, path: PyObject, code: PyObject, code_i: i64, boot: bool },
    Using(PyObject),
    Version(PyObject),
    Algo(PyObject),
    Qp(PyObject, PyObject),
    Assigned(PyObject),
    IbUsing(Vec<PyObject>, Vec<PyObject>),
    NoDevice,
    Socket(Vec<PyObject>, Vec<PyObject>),
    Bootstrap(PyObject, Vec<PyObject>),
    Ifaces(Vec<PyObject>),
    /// Any other value: re-applied by apply_cached itself.
    Other,
}

pub struct MsgEntry {
    pub obj: PyObject,
    /// `cached[0]`, the key of LogScanner.cite_cached (None for SEEN and unread shapes).
    pub kind: Option<PyObject>,
    pub dec: Dec,
}

pub enum Entry {
    Pre(Arc<PreEntry>),
    Msg(Arc<MsgEntry>),
}

impl Entry {
    fn obj(&self, py: Python<'_>) -> PyResult<PyObject> {
        Ok(match self {
            Entry::Pre(p) => p.got(py)?.clone_ref(py),
            Entry::Msg(m) => m.obj.clone_ref(py),
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Prefix,
    Message,
}

#[pyclass(module = "ncdoc_fast")]
pub struct BytesCache {
    map: FxMap<Box<[u8]>, Entry>,
    kind: Kind,
}

fn key_bytes(key: &PyAny) -> Option<&[u8]> {
    key.downcast::<PyBytes>().ok().map(|b| b.as_bytes())
}

fn objs(py: Python<'_>, t: &PyAny) -> PyResult<Vec<PyObject>> {
    let t: &PyTuple = t.downcast()?;
    Ok(t.iter().map(|o| o.into_py(py)).collect())
}

fn decode_prefix(py: Python<'_>, value: &PyAny) -> PyResult<PreEntry> {
    let t: &PyTuple = value
        .downcast()
        .map_err(|_| PyTypeError::new_err("a prefix cache value is a (Prefix, RankTally | None) tuple"))?;
    if t.len() != 2 {
        return Err(PyValueError::new_err("a prefix cache value is a (Prefix, RankTally | None) tuple"));
    }
    let pre = t.get_item(0)?;
    let rank = rank_ref(py, t.get_item(1)?)?;
    let a = |n: &PyString| -> PyResult<PyObject> { Ok(pre.getattr(n)?.into_py(py)) };
    let e = PreEntry {
        got: OnceLock::new(),
        pre: OnceLock::new(),
        host: a(intern!(py, "host"))?,
        pid: a(intern!(py, "pid"))?,
        tid: a(intern!(py, "tid"))?,
        dev: a(intern!(py, "dev"))?,
        file: a(intern!(py, "file"))?,
        func: a(intern!(py, "func"))?,
        rank,
    };
    let _ = e.pre.set(pre.into_py(py));
    let _ = e.got.set(value.into_py(py));
    Ok(e)
}

/// A RankTally (or None) and the fields the loop reads from it.
pub fn rank_ref(py: Python<'_>, rank: &PyAny) -> PyResult<Option<RankRef>> {
    if rank.is_none() {
        return Ok(None);
    }
    Ok(Some(RankRef {
        obj: rank.into_py(py),
        host: rank.getattr(intern!(py, "host"))?.into_py(py),
        pid: rank.getattr(intern!(py, "pid"))?.into_py(py),
    }))
}

pub fn decode_message(py: Python<'_>, value: &PyAny) -> PyResult<MsgEntry> {
    let cfg = config::get(py)?;
    let obj: PyObject = value.into_py(py);
    if value.is(cfg.seen.as_ref(py)) {
        return Ok(MsgEntry { obj, kind: None, dec: Dec::Seen });
    }
    let other = |obj| Ok(MsgEntry { obj, kind: None, dec: Dec::Other });
    let t: &PyTuple = match value.downcast() {
        Ok(t) => t,
        Err(_) => return other(obj),
    };
    if t.is_empty() {
        return other(obj);
    }
    let k = t.get_item(0)?;
    let name: &str = match k.downcast::<PyString>() {
        Ok(s) if k.get_type().is(py.get_type::<PyString>()) => s.to_str()?,
        _ => return other(obj),
    };
    let n = t.len();
    let at = |i: usize| -> PyResult<PyObject> { Ok(t.get_item(i)?.into_py(py)) };
    // a tuple of another length than apply_cached reads stays with it (it indexes what it needs)
    let dec = match (name, n) {
        ("trace", 2) => trace_dec(py, t.get_item(1)?).unwrap_or(Dec::Other),
        ("using", 2) => Dec::Using(at(1)?),
        ("version", 2) => Dec::Version(at(1)?),
        ("algo", 2) => Dec::Algo(at(1)?),
        ("qp", 3) => Dec::Qp(at(1)?, at(2)?),
        ("assigned", 2) => Dec::Assigned(at(1)?),
        ("ib_using", 3) => match (objs(py, t.get_item(1)?), objs(py, t.get_item(2)?)) {
            (Ok(a), Ok(b)) => Dec::IbUsing(a, b),
            _ => Dec::Other,
        },
        ("no_device", 1) => Dec::NoDevice,
        ("socket", 3) => match (objs(py, t.get_item(1)?), objs(py, t.get_item(2)?)) {
            (Ok(a), Ok(b)) => Dec::Socket(a, b),
            _ => Dec::Other,
        },
        ("bootstrap", 3) => match objs(py, t.get_item(2)?) {
            Ok(b) => Dec::Bootstrap(at(1)?, b),
            _ => Dec::Other,
        },
        ("ifaces", 2) => match objs(py, t.get_item(1)?) {
            Ok(b) => Dec::Ifaces(b),
            _ => Dec::Other,
        },
        _ => Dec::Other,
    };
    let kind = match dec {
        Dec::Other => None,
        _ => Some(k.into_py(py)),
    };
    Ok(MsgEntry { obj, kind, dec })
}

/// The trace tuple `(path, line, code)` as nccl_log_state.ScanState.trace reads it, or None (then the
/// loop hands it to that method).
fn trace_dec(py: Python<'_>, tr: &PyAny) -> Option<Dec> {
    let t: &PyTuple = tr.downcast().ok()?;
    if t.len() != 3 {
        return None;
    }
    let path = t.get_item(0).ok()?;
    let code = t.get_item(2).ok()?;
    if !path.get_type().is(py.get_type::<PyString>()) || !code.get_type().is(py.get_type::<pyo3::types::PyLong>()) {
        return None;
    }
    let code_i: i64 = code.extract().ok()?;
    let lower = path.call_method0(intern!(py, "lower")).ok()?;
    let boot = lower.contains("bootstrap").ok()?;
    Some(Dec::Trace { tr: tr.into_py(py), path: path.into_py(py), code: code.into_py(py), code_i, boot })
}

impl BytesCache {
    /// Drop everything when holding more than `limit` (LogScanner._prefix: "> 8192"), as the Python
    /// scanner does before it adds one.
    pub fn bound(&mut self, limit: usize) {
        if self.map.len() > limit {
            self.map.clear();
        }
    }

    pub fn put_message(&mut self, key: &[u8], e: MsgEntry) {
        self.map.insert(key.into(), Entry::Msg(Arc::new(e)));
    }

    pub fn put_prefix(&mut self, key: &[u8], e: Arc<PreEntry>) {
        self.map.insert(key.into(), Entry::Pre(e));
    }

    #[inline]
    pub fn prefix(&self, key: &[u8]) -> Option<Arc<PreEntry>> {
        match self.map.get(key) {
            Some(Entry::Pre(p)) => Some(p.clone()),
            _ => None,
        }
    }

    #[inline]
    pub fn message(&self, key: &[u8]) -> Option<Arc<MsgEntry>> {
        match self.map.get(key) {
            Some(Entry::Msg(m)) => Some(m.clone()),
            _ => None,
        }
    }

    fn insert(&mut self, py: Python<'_>, key: &[u8], value: &PyAny) -> PyResult<()> {
        let e = match self.kind {
            Kind::Prefix => Entry::Pre(Arc::new(decode_prefix(py, value)?)),
            Kind::Message => Entry::Msg(Arc::new(decode_message(py, value)?)),
        };
        self.map.insert(key.into(), e);
        Ok(())
    }
}

/// A prefix value the Python scanner made (its `_prefix` result), read apart.
pub fn read_prefix(py: Python<'_>, value: &PyAny) -> PyResult<Arc<PreEntry>> {
    Ok(Arc::new(decode_prefix(py, value)?))
}

#[pymethods]
impl BytesCache {
    /// BytesCache("prefix" | "message", items=None): `items` a mapping of bytes to values.
    #[new]
    #[args(items = "None")]
    pub fn new(py: Python<'_>, kind: &str, items: Option<&PyAny>) -> PyResult<Self> {
        let kind = match kind {
            "prefix" => Kind::Prefix,
            "message" => Kind::Message,
            _ => return Err(PyValueError::new_err("kind is 'prefix' or 'message'")),
        };
        let mut c = BytesCache { map: FxMap::default(), kind };
        if let Some(items) = items {
            let d: &PyDict = items.downcast()?;
            for (k, v) in d.iter() {
                let kb = key_bytes(k).ok_or_else(|| PyTypeError::new_err("BytesCache keys are bytes"))?;
                c.insert(py, kb, v)?;
            }
        }
        Ok(c)
    }

    #[args(default = "None")]
    fn get(&self, py: Python<'_>, key: &PyAny, default: Option<PyObject>) -> PyResult<PyObject> {
        match key_bytes(key).and_then(|k| self.map.get(k)) {
            Some(e) => e.obj(py),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __getitem__(&self, py: Python<'_>, key: &PyAny) -> PyResult<PyObject> {
        match key_bytes(key).and_then(|k| self.map.get(k)) {
            Some(e) => e.obj(py),
            None => Err(PyKeyError::new_err(key.into_py(py))),
        }
    }

    fn __setitem__(&mut self, py: Python<'_>, key: &PyAny, value: &PyAny) -> PyResult<()> {
        let k = key_bytes(key).ok_or_else(|| PyTypeError::new_err("BytesCache keys are bytes"))?;
        self.insert(py, k, value)
    }

    fn __delitem__(&mut self, py: Python<'_>, key: &PyAny) -> PyResult<()> {
        match key_bytes(key).and_then(|k| self.map.remove(k)) {
            Some(_) => Ok(()),
            None => Err(PyKeyError::new_err(key.into_py(py))),
        }
    }

    fn __contains__(&self, key: &PyAny) -> bool {
        key_bytes(key).map_or(false, |k| self.map.contains_key(k))
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    fn clear(&mut self) {
        self.map.clear();
    }

    fn keys<'py>(&self, py: Python<'py>) -> &'py PyList {
        PyList::new(py, self.map.keys().map(|k| PyBytes::new(py, k)))
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<&'py PyList> {
        let mut out = Vec::with_capacity(self.map.len());
        for (k, e) in self.map.iter() {
            out.push((PyBytes::new(py, k), e.obj(py)?));
        }
        Ok(PyList::new(py, out))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PyObject> {
        let keys = self.keys(py);
        let it = unsafe { ffi::PyObject_GetIter(keys.as_ptr()) };
        crate::py::own(py, it)
    }

    /// Pickled (a --jobs worker's scanner sent back) as the plain dict the Python scanner keeps.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (PyObject,))> {
        let d = PyDict::new(py);
        for (k, e) in self.map.iter() {
            d.set_item(PyBytes::new(py, k), e.obj(py)?)?;
        }
        Ok((py.get_type::<PyDict>().into_py(py), (d.into_py(py),)))
    }
}
