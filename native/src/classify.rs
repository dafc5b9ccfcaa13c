//! The log passes of block_scan.classify_block (ncdoc/evidence/block_scan.py) in Rust: the VIA and
//! AGG counts of a block and SCAN's events (block_scan.scan_events), in one pass over the block's
//! 'L's. A pure function of the bytes, as its Python twin: the same counts in the same order, the
//! same event tuples with the same lines, offsets and follow-up lines.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::AsPyPointer;

use crate::find::{byte, find_all, newlines, rbyte, rsub, sub, FxMap};
use crate::py::{own, tuple};
use crate::shapes::{both, via_all};

pub const INFO: i64 = 0; // block_scan.INFO, WARN, FRAMEWORK, LAST_ERROR
pub const WARN: i64 = 1;
pub const FRAMEWORK: i64 = 2;
pub const LAST_ERROR: i64 = 3;
const LOOK_BACK: usize = 2048; // block_scan.LOOK_BACK
const FOLLOW_LINES: usize = 8; // block_scan.FOLLOW_LINES

/// Counts of byte strings in the order they were first seen (what Counter(findall) holds).
#[derive(Default)]
pub struct Counts<'h> {
    index: FxMap<&'h [u8], usize>,
    pub order: Vec<(&'h [u8], i64)>,
    last: usize, // the entry counted last: a rank prints its channel lines in runs of one tail
}

impl<'h> Counts<'h> {
    #[inline]
    pub fn add(&mut self, k: &'h [u8]) {
        if let Some(e) = self.order.get_mut(self.last) {
            if e.0 == k {
                e.1 += 1;
                return;
            }
        }
        match self.index.get(k) {
            Some(&i) => {
                self.order[i].1 += 1;
                self.last = i;
            }
            None => {
                self.index.insert(k, self.order.len());
                self.last = self.order.len();
                self.order.push((k, 1));
            }
        }
    }

    fn dict(&self, py: Python<'_>) -> PyResult<PyObject> {
        let d = own(py, unsafe { ffi::PyDict_New() })?;
        for (k, n) in &self.order {
            let k = bytes(py, k)?;
            let n = own(py, unsafe { ffi::PyLong_FromLongLong(*n) })?;
            crate::py::dset(py, d.as_ptr(), k.as_ptr(), n.as_ptr())?;
        }
        Ok(d)
    }
}

/// A new bytes object (an owned reference: no GIL-pool growth per event).
#[inline]
pub fn bytes(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyBytes_FromStringAndSize(b.as_ptr() as *const _, b.len() as isize) })
}

#[inline]
fn int(py: Python<'_>, v: i64) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyLong_FromLongLong(v) })
}

/// `h[a:b]` as Python slices it (empty when a >= b).
#[inline]
pub fn sl(h: &[u8], a: usize, b: usize) -> &[u8] {
    let b = b.min(h.len());
    if a >= b {
        &[]
    } else {
        &h[a..b]
    }
}

/// block_scan._lines_from(block, start, k): up to `k` whole lines from `start`, as a tuple of bytes.
fn lines_from(py: Python<'_>, h: &[u8], mut start: usize, k: usize) -> PyResult<PyObject> {
    let mut out = Vec::with_capacity(k);
    let end = h.len();
    while out.len() < k && start < end {
        let le = byte(h, b'\n', start, end).unwrap_or(end);
        out.push(bytes(py, &h[start..le])?);
        start = le + 1;
    }
    let ptrs: Vec<*mut ffi::PyObject> = out.iter().map(|o| o.as_ptr()).collect();
    tuple(py, &ptrs)
}

/// One SCAN event, as offsets into the block (made into block_scan's tuple by `event_tuple`).
#[derive(Clone, Copy)]
pub enum Event {
    /// (line, prefix start, "NCCL" start, message end, whole-line start if the text goes along, line end)
    Info { line: usize, ps: usize, s: usize, mend: usize, ls: usize, le: usize, whole: bool },
    Warn { line: usize, ps: usize, s: usize, mend: usize, ls: usize, le: usize },
    Framework { line: usize, ls: usize, le: usize, follow: bool },
    LastError { line: usize, ls: usize, le: usize },
}

/// block_scan.scan_events' loop over SCAN's match starts (`found`, in order): the events, as offsets,
/// and the block's newlines (counted on from the last event's line, so the block is not passed again).
pub fn scan_events(h: &[u8], found: &[usize], max_message: usize) -> (Vec<Event>, usize) {
    let end = h.len();
    let limit = max_message + 10;
    let mut events = Vec::new();
    let mut counted = 0usize;
    let mut nl = 0usize;
    let mut pos = 0usize;
    let mut next = 0usize;
    loop {
        while next < found.len() && found[next] < pos {
            next += 1;
        }
        let Some(&at) = found.get(next) else { break };
        if h.get(at + 1) == Some(&b'a') {
            // "Last error:", whoever printed it
            let ls = rbyte(h, b'\n', 0, at).map_or(0, |i| i + 1).max(pos);
            let le = byte(h, b'\n', at, end).unwrap_or(end);
            nl += newlines(h, counted, ls);
            counted = ls;
            events.push(Event::LastError { line: nl, ls, le });
            pos = le + 1;
            continue;
        }
        if at < 3 || &h[at - 3..at] != b"NCC" {
            pos = at + 1; // an "L INFO" that is not the end of "NCCL"
            continue;
        }
        let s = at - 3;
        let ls = rbyte(h, b'\n', 0, s).map_or(0, |i| i + 1).max(pos);
        let le = byte(h, b'\n', s, end).unwrap_or(end);
        let mut stop = le;
        if let Some(nxt) = sub(h, b" NCCL ", s + 9, le) {
            let lvl = sl(h, nxt + 6, nxt + 11);
            if lvl == b"INFO " || lvl == b"WARN " {
                let j = rsub(h, b" [", s, nxt);
                let k = match j {
                    Some(j) if j > s => rbyte(h, b' ', s, j),
                    _ => None,
                };
                stop = match (k, j) {
                    (Some(k), _) if k > s => k + 1,
                    (_, Some(j)) if j > s => j + 1,
                    _ => nxt + 1,
                };
            }
        }
        pos = if stop < le { stop } else { le + 1 };
        if pos <= at {
            pos = at + 1; // text that only looks like a merged line: always advance
        }
        nl += newlines(h, counted, ls);
        counted = ls;
        let level = h.get(s + 5).copied().unwrap_or(0);
        let mend = if stop > s + limit { s + limit } else { stop };
        let ps = ls.max(s.saturating_sub(256));
        if level == b'I' {
            let whole = ls + 256 >= s && mend == le;
            events.push(Event::Info { line: nl, ps, s, mend, ls, le, whole });
        } else if level == b'W' {
            events.push(Event::Warn { line: nl, ps, s, mend, ls, le });
        } else if sl(h, s, s + 4) == b"NCCL" {
            let follow = sub(h, b"NCCL error", ls, le).is_some();
            events.push(Event::Framework { line: nl, ls, le, follow });
        }
    }
    (events, nl + newlines(h, counted, end))
}

/// The Python tuple block_scan.scan_events makes for an event.
pub fn event_tuple(py: Python<'_>, h: &[u8], ev: &Event) -> PyResult<PyObject> {
    let none = unsafe { ffi::Py_None() };
    let t = |items: &[&PyObject]| -> PyResult<PyObject> {
        let p: Vec<*mut ffi::PyObject> = items.iter().map(|o| o.as_ptr()).collect();
        tuple(py, &p)
    };
    match *ev {
        Event::Info { line, ps, s, mend, ls, le, whole } => {
            let kind = int(py, INFO)?;
            let line = int(py, line as i64)?;
            let msg = bytes(py, sl(h, s + 10, mend))?;
            if whole {
                let pre = bytes(py, sl(h, ls, s))?;
                let p = [kind.as_ptr(), line.as_ptr(), pre.as_ptr(), msg.as_ptr(), none];
                tuple(py, &p)
            } else {
                t(&[&kind, &line, &bytes(py, sl(h, ps, s))?, &msg, &bytes(py, sl(h, ls, le))?])
            }
        }
        Event::Warn { line, ps, s, mend, ls, le } => t(&[&int(py, WARN)?, &int(py, line as i64)?,
                                                         &bytes(py, sl(h, ps, s))?, &bytes(py, sl(h, s + 10, mend))?,
                                                         &bytes(py, sl(h, ls, le))?]),
        Event::Framework { line, ls, le, follow } => {
            let next = if follow { lines_from(py, h, le + 1, FOLLOW_LINES)? } else { py.None() };
            t(&[&int(py, FRAMEWORK)?, &int(py, line as i64)?, &bytes(py, sl(h, ls, le))?, &next])
        }
        Event::LastError { line, ls, le } => {
            let head = bytes(py, sl(h, ls.saturating_sub(LOOK_BACK), ls))?;
            let starts: PyObject = (ls < LOOK_BACK).into_py(py);
            t(&[&int(py, LAST_ERROR)?, &int(py, line as i64)?, &bytes(py, sl(h, ls, le))?, &head, &starts,
                &lines_from(py, h, le + 1, FOLLOW_LINES)?])
        }
    }
}

/// VIA's and AGG's counts and SCAN's match starts, in one pass.
pub fn passes(h: &[u8]) -> (Counts<'_>, Counts<'_>, Vec<usize>) {
    let mut tails = Counts::default();
    via_all(h, |a, b| tails.add(&h[a..b]));
    let mut aggs = Counts::default();
    let mut found: Vec<usize> = Vec::new();
    both(h, |a, b| aggs.add(&h[a..b]), |p| found.push(p));
    (tails, aggs, found)
}

/// A block's SCAN events kept as offsets into the block, for the apply in this process
/// (apply.rs reads them without making the tuples). Seen from Python it is the list of
/// block_scan.scan_events' tuples: len, iteration, ==, and pickled as that list (a BlockScan sent
/// to another process carries plain tuples).
#[pyclass(module = "ncdoc_fast")]
pub struct Events {
    pub block: Py<PyBytes>,
    pub evs: Vec<Event>,
}

impl Events {
    pub fn tuple_list(&self, py: Python<'_>) -> PyResult<PyObject> {
        let h = self.block.as_ref(py).as_bytes();
        let mut items = Vec::with_capacity(self.evs.len());
        for ev in &self.evs {
            items.push(event_tuple(py, h, ev)?);
        }
        list(py, items)
    }
}

#[pymethods]
impl Events {
    /// The events as block_scan.scan_events gives them (a list of tuples).
    fn tuples(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.tuple_list(py)
    }

    fn __len__(&self) -> usize {
        self.evs.len()
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PyObject> {
        let l = self.tuple_list(py)?;
        own(py, unsafe { ffi::PyObject_GetIter(l.as_ptr()) })
    }

    fn __richcmp__(&self, py: Python<'_>, other: &PyAny, op: pyo3::basic::CompareOp) -> PyResult<PyObject> {
        let mine = self.tuple_list(py)?;
        let other: PyObject = match other.downcast::<PyCell<Events>>() {
            Ok(e) => e.borrow().tuple_list(py)?,
            Err(_) => other.into_py(py),
        };
        Ok(mine.as_ref(py).rich_compare(other, op)?.into_py(py))
    }

    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (PyObject,))> {
        let list_type: PyObject = py.get_type::<pyo3::types::PyList>().into_py(py);
        Ok((list_type, (self.tuple_list(py)?,)))
    }
}

/// classify(block, max_message) -> (tails, agg, events, warns, newlines): Counter(VIA.findall(block))
/// and Counter(AGG.findall(block)) as dicts in first-seen order, scan_events(block) (as an Events),
/// the (line, text) of its WARN events, block.count(b"\n").
pub fn classify(py: Python<'_>, block: &PyBytes, max_message: usize)
    -> PyResult<(PyObject, PyObject, PyObject, PyObject, usize)> {
    let h = block.as_bytes();
    let (tails, aggs, found) = passes(h);
    let (evs, nlines) = scan_events(h, &found, max_message);
    let mut warns = Vec::new();
    for ev in &evs {
        if let Event::Warn { line, ls, le, .. } = *ev {
            warns.push(tuple(py, &[int(py, line as i64)?.as_ptr(), bytes(py, sl(h, ls, le))?.as_ptr()])?);
        }
    }
    let events = Py::new(py, Events { block: block.into_py(py), evs })?;
    Ok((tails.dict(py)?, aggs.dict(py)?, events.into_py(py), list(py, warns)?, nlines))
}

// ---------------------------------------------------------------- the candidate lines (block_scan.line_passes)

/// `\s` of a bytes pattern: space, \t, \n, \r, \f, \v.
#[inline]
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// block_scan._PLAIN.match(h, ls): `\S{1,200} \[\d+\] NCCL (?:INFO|WARN|TRACE) ` at `ls`. The run of
/// non-spaces can only end at the first space (what follows it must be " ["), so it is found once.
#[inline]
fn plain_at(h: &[u8], ls: usize) -> bool {
    let end = h.len().min(ls + 201);
    let mut w = ls;
    while w < end && !space(h[w]) {
        w += 1;
    }
    if w == ls || w - ls > 200 || !crate::find::starts(h, w, b" [") {
        return false;
    }
    let d = crate::find::run(h, w + 2, crate::find::is_digit);
    if d == w + 2 || !crate::find::starts(h, d, b"] NCCL ") {
        return false;
    }
    let l = d + 7;
    crate::find::starts(h, l, b"INFO ") || crate::find::starts(h, l, b"WARN ") || crate::find::starts(h, l, b"TRACE ")
}

/// `block.find(b"\n", at)` sliced as Python slices with its -1.
#[inline]
fn line_end_py(h: &[u8], at: usize) -> usize {
    match byte(h, b'\n', at, h.len()) {
        Some(i) => i,
        None => h.len().saturating_sub(1),
    }
}

/// (line, text) of the lines holding `needle` that are not other lines (block_scan._plain_with: each
/// found from the end of the line before).
fn plain_with(py: Python<'_>, h: &[u8], needle: &[u8], is_other: &[bool]) -> PyResult<Vec<PyObject>> {
    let mut out = Vec::new();
    let found = find_all(h, needle);
    let (mut counted, mut line) = (0usize, 0usize);
    let mut last: Option<usize> = None;
    let mut from = 0usize;
    for &a in &found {
        if a < from {
            continue;
        }
        let ls = rbyte(h, b'\n', 0, a).map_or(0, |i| i + 1);
        // block.find(b"\n", at), with Python's -1 for a last line without a newline
        let le = byte(h, b'\n', a, h.len()).unwrap_or(h.len().saturating_sub(1));
        line += newlines(h, counted, ls);
        counted = ls;
        if last != Some(line) && !is_other.get(line).copied().unwrap_or(false) {
            out.push(tuple(py, &[int(py, line as i64)?.as_ptr(), bytes(py, sl(h, ls, le))?.as_ptr()])?);
        }
        last = Some(line);
        from = le;
    }
    Ok(out)
}

pub fn list(py: Python<'_>, items: Vec<PyObject>) -> PyResult<PyObject> {
    let l = own(py, unsafe { ffi::PyList_New(items.len() as isize) })?;
    for (i, o) in items.into_iter().enumerate() {
        unsafe { ffi::PyList_SetItem(l.as_ptr(), i as isize, o.into_ptr()) }; // steals the reference
    }
    Ok(l)
}

/// line_passes(block, test, ras) -> (newlines, other, test_plain, ras_plain): block_scan.line_passes.
pub fn line_passes(py: Python<'_>, h: &[u8], test: &[u8], ras: &[u8]) -> PyResult<(usize, PyObject, PyObject, PyObject)> {
    let end = h.len().saturating_sub(1); // the block's last newline
    let mut other = Vec::new();
    let mut is_other = Vec::new();
    let mut line = 0usize;
    if !plain_at(h, 0) {
        let le = line_end_py(h, 0);
        other.push(tuple(py, &[int(py, 0)?.as_ptr(), bytes(py, sl(h, 0, le))?.as_ptr()])?);
        is_other.push(true);
    } else {
        is_other.push(false);
    }
    let mut p = 0usize;
    while let Some(nl) = byte(h, b'\n', p, h.len()) {
        line += 1;
        p = nl + 1;
        if nl >= end {
            break;
        }
        let o = !plain_at(h, p);
        is_other.push(o);
        if o {
            let le = line_end_py(h, p);
            other.push(tuple(py, &[int(py, line as i64)?.as_ptr(), bytes(py, sl(h, p, le))?.as_ptr()])?);
        }
    }
    let nlines = line; // every newline of the block was passed
    let test_plain = plain_with(py, h, test, &is_other)?;
    let ras_plain = plain_with(py, h, ras, &is_other)?;
    Ok((nlines, list(py, other)?, list(py, test_plain)?, list(py, ras_plain)?))
}
