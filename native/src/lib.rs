//! ncdoc_fast: ncdoc's optional native NCCL log block scanner.
//!
//! ncdoc's Python scanner (ncdoc/evidence/nccl_log_scan.py) stays the reference and the fallback;
//! this module does the log passes of its pure block classification (block_scan.log_passes) and the
//! event loop of its in-order apply (LogScanner._events) with the same results and the same calls into
//! the Python code for everything but the hot INFO lines. ncdoc loads it
//! through ncdoc/evidence/nccl_log_native.py when it is importable (NCDOC_NATIVE=0 turns it off).

#![allow(non_local_definitions)] // PyO3 0.17's macros define impls inside functions

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

mod cache;
mod classify;

mod config;
mod find;
mod netlines;
mod py;
mod apply;
mod shapes;

/// The interface version the Python glue checks: a build for another ncdoc is not used.
const API: u32 = 2;

/// The scanner reads its log in 4 MiB blocks, each a fresh bytes object (and one more for a block
/// joined to the line carried from the chunk before). glibc serves allocations that large with mmap,
/// or from the heap top and trims it again after each free: either way every block costs its pages'
/// first-touch faults, which were half the CPU time of reading a file (512 MB: 86k minor faults,
/// 0.27 s, against 6k and 0.14 s with these settings). Allocations up to 64 MiB come from the heap
/// and up to 128 MiB of freed heap top is kept for the next block; the peak stays a few blocks.
fn keep_blocks_in_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::Once;
        static ONCE: Once = Once::new();
        extern "C" {
            fn mallopt(param: std::os::raw::c_int, value: std::os::raw::c_int) -> std::os::raw::c_int;
        }
        const M_TRIM_THRESHOLD: std::os::raw::c_int = -1;
        const M_MMAP_THRESHOLD: std::os::raw::c_int = -3;
        // SAFETY: mallopt only changes glibc's allocator thresholds; it is safe to call at any time.
        ONCE.call_once(|| unsafe {
            mallopt(M_MMAP_THRESHOLD, 64 << 20);
            mallopt(M_TRIM_THRESHOLD, 128 << 20);
        });
    }
}

/// configure(seen, apply_cached, comm_tally, prefix, rank_tally, state_module, nccl_result,
/// remember_iface): the Python objects the loop shares with the Python scanner (called once by ncdoc's glue).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn configure(py: Python<'_>, seen: PyObject, apply_cached: PyObject, comm_tally: PyObject,
             prefix: PyObject, rank_tally: PyObject, state_module: PyObject, nccl_result: PyObject,
             remember_iface: PyObject) -> PyResult<()> {
    keep_blocks_in_heap();
    config::set(py, config::Config { seen, apply_cached, comm_tally, prefix, rank_tally, state_module,
                                     nccl_result, remember_iface })
}

/// apply_events(scanner, events, done, base) -> matched: LogScanner._events(events, done, base), the
/// event loop of LogScanner.apply.
#[pyfunction]
fn apply_events(py: Python<'_>, scanner: &PyAny, events: &PyAny, done: i64, base: i64) -> PyResult<i64> {
    let _gc = NoCollection::new();
    apply::apply_events(py, scanner, events, done, base)
}

/// The cyclic garbage collector held off while one block's events are applied. Each hot line makes
/// short-lived tuples (keys, call arguments) that are freed at once, yet each counts towards the next
/// collection, and every tenth or hundredth one traverses the whole ScanState (thousands of ranks):
/// 4.6 % of a 64 MB parse's instructions. Turned back on (when it was on) as the block ends, errors
/// included; the objects made meanwhile are counted, so the collection they are due comes then.
struct NoCollection(bool);

impl NoCollection {
    fn new() -> Self {
        // SAFETY: the GIL is held (apply_events runs with it); PyGC_Disable has no other precondition.
        NoCollection(unsafe { pyo3::ffi::PyGC_Disable() } == 1)
    }
}

impl Drop for NoCollection {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: as above (dropped before apply_events returns, the GIL still held).
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

/// classify_block(block, max_message) -> (tails, agg, events, warns, newlines): block_scan.log_passes(block)
/// (Counter(VIA.findall(block)), Counter(AGG.findall(block)) as dicts, scan_events(block) as an
/// Events, the (line, text) of its WARN events, block.count(b"\n")).
#[pyfunction]
fn classify_block(py: Python<'_>, block: &PyBytes, max_message: usize)
    -> PyResult<(PyObject, PyObject, PyObject, PyObject, usize)> {
    classify::classify(py, block, max_message)
}

/// line_passes(block, test, ras) -> (newlines, other, test_plain, ras_plain): block_scan.line_passes.
#[pyfunction]
fn line_passes(py: Python<'_>, block: &PyBytes, test: &PyBytes, ras: &PyBytes)
    -> PyResult<(usize, PyObject, PyObject, PyObject)> {
    classify::line_passes(py, block.as_bytes(), test.as_bytes(), ras.as_bytes())
}

/// via_findall(block): P.VIA.findall(block) (for the tests).
#[pyfunction]
fn via_findall<'py>(py: Python<'py>, block: &PyBytes) -> &'py PyList {
    let h = block.as_bytes();
    let mut out = Vec::new();
    shapes::via_all(h, |a, b| out.push(PyBytes::new(py, &h[a..b])));
    PyList::new(py, out)
}

/// agg_findall(block): P.AGG.findall(block) (for the tests).
#[pyfunction]
fn agg_findall<'py>(py: Python<'py>, block: &PyBytes) -> &'py PyList {
    let h = block.as_bytes();
    let mut out = Vec::new();
    shapes::agg_all(h, |a, b| out.push(PyBytes::new(py, &h[a..b])));
    PyList::new(py, out)
}

/// scan_search(block, pos): P.SCAN.search(block, pos).start(), or None (for the tests).
#[pyfunction]
fn scan_search(block: &PyBytes, pos: usize) -> Option<usize> {
    shapes::scan_search(block.as_bytes(), pos)
}

/// iface_findall(text): [(name, addr)] as P.IFACE.findall gives them on ASCII text (for the tests).
#[pyfunction]
fn iface_findall<'py>(py: Python<'py>, text: &PyBytes) -> &'py PyList {
    let v: Vec<(&PyBytes, &PyBytes)> =
        netlines::ifaces(text.as_bytes()).into_iter().map(|(n, a)| (PyBytes::new(py, n), PyBytes::new(py, a))).collect();
    PyList::new(py, v)
}

/// ib_dev_findall(text): P.IB_DEV.findall on ASCII text (for the tests).
#[pyfunction]
fn ib_dev_findall<'py>(py: Python<'py>, text: &PyBytes) -> &'py PyList {
    let v: Vec<_> = netlines::ib_devs(text.as_bytes())
        .into_iter()
        .map(|(a, b, c, d)| (PyBytes::new(py, a), PyBytes::new(py, b), PyBytes::new(py, c), PyBytes::new(py, d)))
        .collect();
    PyList::new(py, v)
}

/// prefix_fields(raw): (host, pid, tid, dev, file, func) as parse_prefix reads the text before "NCCL INFO",
/// or None where the native scanner leaves it to Python (for the tests).
#[pyfunction]
fn prefix_fields<'py>(py: Python<'py>, raw: &PyBytes) -> Option<PyObject> {
    let b = raw.as_bytes();
    let f = match apply::plain_prefix(b) {
        Some((h, p, t, d)) => netlines::PrefixFields { host: Some(h), pid: Some(p), tid: Some(t), dev: Some(d),
                                                       file: None, func: None },
        None => netlines::long_prefix(b)?,
    };
    let s = |x: Option<&[u8]>| x.map(|x| String::from_utf8_lossy(x).into_owned());
    Some((s(f.host), s(f.pid), s(f.tid), f.dev, s(f.file), s(f.func)).into_py(py))
}

#[pymodule]
fn ncdoc_fast(_py: Python<'_>, m: &PyModule) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("API", API)?;
    m.add_class::<cache::BytesCache>()?;
    m.add_class::<classify::Events>()?;
    m.add_function(wrap_pyfunction!(configure, m)?)?;
    m.add_function(wrap_pyfunction!(apply_events, m)?)?;
    m.add_function(wrap_pyfunction!(classify_block, m)?)?;
    m.add_function(wrap_pyfunction!(line_passes, m)?)?;
    m.add_function(wrap_pyfunction!(via_findall, m)?)?;
    m.add_function(wrap_pyfunction!(agg_findall, m)?)?;
    m.add_function(wrap_pyfunction!(scan_search, m)?)?;
    m.add_function(wrap_pyfunction!(iface_findall, m)?)?;
    m.add_function(wrap_pyfunction!(ib_dev_findall, m)?)?;
    m.add_function(wrap_pyfunction!(prefix_fields, m)?)?;
    Ok(())
}
