//! What the Python side hands the native scanner once (ncdoc/evidence/nccl_log_native.py):
//! the objects and limits the loop shares with the Python scanner.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pub struct Config {
    /// nccl_log_net.SEEN: the cache marker of a message no rank depends on
    pub seen: PyObject,
    /// nccl_log_net.apply_cached(st, rank, cached): for cached values the loop does not read itself
    pub apply_cached: PyObject,
    /// nccl_log_state.CommTally
    pub comm_tally: PyObject,
    /// nccl_log_patterns.Prefix
    pub prefix: PyObject,
    /// nccl_log_state.RankTally
    pub rank_tally: PyObject,
    /// the nccl_log_state module (MAX_RANKS, MAX_HOSTS are read from it for each block)
    pub state_module: PyObject,
    /// error_codes.NCCL_RESULT: code -> (name, text)
    pub nccl_result: PyObject,
    /// nccl_log_net.remember_iface(st, name, addr, role, pre, lineno, text): for an interface not seen yet
    pub remember_iface: PyObject,
}

static CONFIG: Mutex<Option<Arc<Config>>> = Mutex::new(None);

pub fn get(_py: Python<'_>) -> PyResult<Arc<Config>> {
    let c = CONFIG.lock().map_err(|_| PyRuntimeError::new_err("ncdoc_fast: configuration lock poisoned"))?;
    c.clone().ok_or_else(|| PyRuntimeError::new_err("ncdoc_fast.configure() has not been called"))
}

/// Set (or replace, when the glue module is reloaded) the shared objects.
pub fn set(_py: Python<'_>, c: Config) -> PyResult<()> {
    let mut g = CONFIG.lock().map_err(|_| PyRuntimeError::new_err("ncdoc_fast: configuration lock poisoned"))?;
    *g = Some(Arc::new(c));
    Ok(())
}
