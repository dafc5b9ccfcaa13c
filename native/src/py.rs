//! Small owned-reference helpers over the stable C API, for the hot paths (no GIL-pool growth
//! per line: every object made here is released as soon as it is dropped).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::AsPyPointer;
use pyo3::types::PyString;

/// An owned new reference, or the Python error that stopped it.
#[inline]
pub fn own(py: Python<'_>, p: *mut ffi::PyObject) -> PyResult<PyObject> {
    // SAFETY: `p` is a new reference (or NULL with an exception set).
    unsafe { PyObject::from_owned_ptr_or_err(py, p) }
}

#[inline]
pub fn ok(py: Python<'_>, rc: std::os::raw::c_int) -> PyResult<()> {
    if rc < 0 {
        Err(PyErr::fetch(py))
    } else {
        Ok(())
    }
}

#[inline]
pub fn getattr(py: Python<'_>, o: *mut ffi::PyObject, name: &PyString) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyObject_GetAttr(o, name.as_ptr()) })
}

#[inline]
pub fn setattr(py: Python<'_>, o: *mut ffi::PyObject, name: &PyString, v: *mut ffi::PyObject) -> PyResult<()> {
    ok(py, unsafe { ffi::PyObject_SetAttr(o, name.as_ptr(), v) })
}

/// `d.get(k)` of a dict (or dict subclass such as Counter, without its __missing__): a borrowed
/// reference, or null.
#[inline]
pub fn dget(d: *mut ffi::PyObject, k: *mut ffi::PyObject) -> *mut ffi::PyObject {
    unsafe { ffi::PyDict_GetItem(d, k) }
}

#[inline]
pub fn dset(py: Python<'_>, d: *mut ffi::PyObject, k: *mut ffi::PyObject, v: *mut ffi::PyObject) -> PyResult<()> {
    ok(py, unsafe { ffi::PyDict_SetItem(d, k, v) })
}

#[inline]
pub fn dlen(d: *mut ffi::PyObject) -> isize {
    unsafe { ffi::PyDict_Size(d) }
}

/// `d.setdefault(k, v)` of a plain dict.
#[inline]
pub fn setdefault(py: Python<'_>, d: *mut ffi::PyObject, k: *mut ffi::PyObject, v: *mut ffi::PyObject) -> PyResult<()> {
    if dget(d, k).is_null() {
        dset(py, d, k, v)?;
    }
    Ok(())
}

/// `d.setdefault(k, None)` of a plain dict.
#[inline]
pub fn setdefault_none(py: Python<'_>, d: *mut ffi::PyObject, k: *mut ffi::PyObject) -> PyResult<()> {
    if dget(d, k).is_null() {
        dset(py, d, k, unsafe { ffi::Py_None() })?;
    }
    Ok(())
}

#[inline]
pub fn long(py: Python<'_>, v: i64) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyLong_FromLongLong(v) })
}

#[inline]
pub fn is_none(p: *mut ffi::PyObject) -> bool {
    p == unsafe { ffi::Py_None() }
}

#[inline]
pub fn truthy(py: Python<'_>, p: *mut ffi::PyObject) -> PyResult<bool> {
    let r = unsafe { ffi::PyObject_IsTrue(p) };
    ok(py, r)?;
    Ok(r == 1)
}

/// `a + n` for a Python int `a` (any size), as a new object.
pub fn add_int(py: Python<'_>, a: *mut ffi::PyObject, n: i64) -> PyResult<PyObject> {
    let mut overflow = 0;
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(a, &mut overflow) };
    if v == -1 && overflow == 0 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
        return Err(PyErr::fetch(py));
    }
    if overflow == 0 {
        if let Some(s) = v.checked_add(n) {
            return long(py, s);
        }
    }
    let nn = long(py, n)?;
    own(py, unsafe { ffi::PyNumber_Add(a, nn.as_ptr()) })
}

/// `d[k] += n` for a Counter (a missing key counts 0, as Counter.__missing__ says).
pub fn counter_add(py: Python<'_>, d: *mut ffi::PyObject, k: *mut ffi::PyObject, n: i64) -> PyResult<()> {
    let cur = dget(d, k);
    let v = if cur.is_null() { long(py, n)? } else { add_int(py, cur, n)? };
    dset(py, d, k, v.as_ptr())
}

/// `o.name += n` for an int attribute.
pub fn attr_add(py: Python<'_>, o: *mut ffi::PyObject, name: &PyString, n: i64) -> PyResult<()> {
    let cur = getattr(py, o, name)?;
    let v = add_int(py, cur.as_ptr(), n)?;
    setattr(py, o, name, v.as_ptr())
}

/// A str from ASCII bytes (the caller checked them).
#[inline]
pub fn ascii_str(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyUnicode_FromStringAndSize(b.as_ptr() as *const _, b.len() as isize) })
}

/// `b.decode("utf-8", "replace")`.
pub fn decode(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    own(py, unsafe {
        ffi::PyUnicode_DecodeUTF8(b.as_ptr() as *const _, b.len() as isize, b"replace\0".as_ptr() as *const _)
    })
}

/// A new tuple of the given items (an owned reference: freed when dropped, never held by a GIL pool,
/// so the per-line keys made here do not pile up for the garbage collector).
pub fn tuple(py: Python<'_>, items: &[*mut ffi::PyObject]) -> PyResult<PyObject> {
    let t = own(py, unsafe { ffi::PyTuple_New(items.len() as isize) })?;
    for (i, &o) in items.iter().enumerate() {
        unsafe {
            ffi::Py_INCREF(o);
            ffi::PyTuple_SetItem(t.as_ptr(), i as isize, o); // steals the reference
        }
    }
    Ok(t)
}

/// A new empty dict (owned).
pub fn new_dict(py: Python<'_>) -> PyResult<PyObject> {
    own(py, unsafe { ffi::PyDict_New() })
}
