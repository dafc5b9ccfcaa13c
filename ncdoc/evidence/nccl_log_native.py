"""The optional native log scanner: ncdoc_fast (native/ in the repository; docs/native_scanner.md).

When the ncdoc_fast package is installed, the log scanner's block work runs in Rust at its two seams,
chosen here once for the process: the log passes of the pure classification (block_scan.log_passes:
VIA's and AGG's counts and SCAN's events, the same values) and the in-order apply's event loop
(LogScanner._events: the hot INFO lines read natively, every other event handed to the Python
scanner's own methods, so the facts are the Python scanner's). The Python scanner stays the reference
and the fallback: without the package, with NCDOC_NATIVE=0, or with a build made for another version
of this interface, nothing changes but the speed.

Imported by the scanner (and by `ncdoc --version`, which says which scanner runs): only `os`
here, the rest when the package is really there.
"""

from __future__ import annotations

import os

API = 2                       # the interface ncdoc_fast.API must match (native/src/lib.rs)
_WHY_NOT = ""                 # why the Python scanner runs, when it does


def _load():
    """The ncdoc_fast module configured for this ncdoc, or None (and _WHY_NOT says why)."""
    global _WHY_NOT
    if os.environ.get("NCDOC_NATIVE", "").strip() == "0":
        _WHY_NOT = "NCDOC_NATIVE=0"
        return None
    try:
        import ncdoc_fast
    except ImportError:
        _WHY_NOT = "ncdoc_fast is not installed"
        return None
    if getattr(ncdoc_fast, "API", None) != API:
        _WHY_NOT = f"ncdoc_fast {getattr(ncdoc_fast, '__version__', '?')} is built for another ncdoc"
        return None
    from ncdoc.evidence import nccl_log_state
    from ncdoc.evidence.error_codes import NCCL_RESULT
    from ncdoc.evidence.nccl_log_net import SEEN, apply_cached, remember_iface
    from ncdoc.evidence.nccl_log_patterns import Prefix
    ncdoc_fast.configure(SEEN, apply_cached, nccl_log_state.CommTally, Prefix,
                         nccl_log_state.RankTally, nccl_log_state, NCCL_RESULT, remember_iface)
    return ncdoc_fast


NATIVE = _load()               # the configured ncdoc_fast module, or None


def describe() -> str:
    """Which log scanner runs here, in a few words ("native (ncdoc_fast 0.2.0)" or "python (why)")."""
    if NATIVE is not None:
        return f"native (ncdoc_fast {NATIVE.__version__})"
    return f"python ({_WHY_NOT})"
