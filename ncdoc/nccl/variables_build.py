"""Build ncdoc/nccl/data/nccl_vars.json, ncdoc's own compact table of the variables NCCL reads.

Input: the gathered catalog (../shared/reference/nccl_env_catalog.tsv: name, type, default,
allowed, meaning, status, source_file). Only facts are kept: names, types, defaults,
allowed values, status, first and last release, replacement, documented or not, and who
reads the variable. The catalog's prose ("meaning") is read only to pull those facts out
of it and is never copied.

    python -m ncdoc.nccl.variables_build [CATALOG.tsv] [-o ncdoc/nccl/data/nccl_vars.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
DEFAULT_TSV = _REPO.parent / "shared" / "reference" / "nccl_env_catalog.tsv"
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "nccl_vars.json"

# The newest release the catalog was gathered from: verdicts that need a version and have
# none assume this one (and say so).
CATALOG_VERSION = "2.30.7"

# Replacements of removed variables (nccl_facts.md 1.3, "Removed variables").
_REPLACED = {
    "NCCL_IB_CUDA_SUPPORT": "NCCL_NET_GDR_LEVEL",
    "NCCL_IB_GDR_LEVEL": "NCCL_NET_GDR_LEVEL",
    "NCCL_THREAD_THRESHOLD": "NCCL_THREAD_THRESHOLDS",
    "NCCL_GRAPH": "NCCL_GRAPH_FILE",
    "NCCL_MNNVL": "NCCL_MNNVL_ENABLE",
    "NCCL_WORK_FIFO_DEPTH": "NCCL_WORK_FIFO_BYTES",
    "NCCL_PROXY_PROFILE": "NCCL_PROFILER_PLUGIN",
    "NCCL_NCCL_ALLOC_P2P_NET_LL_BUFFERS": "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
    "NCCL_MIN_NRINGS": "NCCL_MIN_CTAS",
    "NCCL_MAX_NRINGS": "NCCL_MAX_CTAS",
    "NCCL_MIN_NCHANNELS": "NCCL_MIN_CTAS",
    "NCCL_MAX_NCHANNELS": "NCCL_MAX_CTAS",
}

# Removed variables whose source column names no last release (nccl_facts.md 1.3, 1.4 #15):
# declared but unread since 2.13, or documented only before 2.3.
_LAST = {
    "NCCL_GROUP_CUDA_STREAM": "2.12",
    "NCCL_GRAPH_HELPER_DISABLE": "2.12",
    "NCCL_CHECKS_DISABLE": "2.2",
    "NCCL_SINGLE_RING_THRESHOLD": "2.2",
}

# Allowed values the catalog states in words, as data (nccl_facts.md 1.4, 2.x).
_ALLOWED = {
    "NCCL_DEBUG": {"names": ["VERSION", "WARN", "INFO", "ABORT", "TRACE"], "case": "insensitive"},
    "NCCL_CHECK_MODE": {"names": ["DEFAULT", "DEBUG_LOCAL", "DEBUG_GLOBAL"], "case": "insensitive"},
    "NCCL_LAUNCH_MODE": {"names": ["PARALLEL", "GROUP"], "case": "insensitive"},
    "NCCL_NET_MERGE_POLICY": {"names": ["ALL", "RAIL"], "case": "insensitive"},
    "NCCL_SOCKET_FAMILY": {"names": ["AF_INET", "AF_INET6"], "case": "exact"},
    "NCCL_IB_ADDR_FAMILY": {"names": ["AF_INET", "AF_INET6"], "case": "exact"},
    "NCCL_PROFILER_CE_TIMING": {"names": ["cpu", "gpu"], "case": "exact"},
    "NCCL_PARAM_DUMP_ALL": {"names": ["1", "T", "TRUE", "0", "F", "FALSE"], "case": "insensitive"},
    "NCCL_WARN_ENABLE_DEBUG_INFO": {"names": ["1", "T", "TRUE", "0", "F", "FALSE"], "case": "insensitive"},
    "NCCL_IB_RETRY_CNT": {"range": [0, 7]},
    "NCCL_IB_SL": {"range": [-1, 15]},
    "NCCL_IB_TC": {"range": [-1, 255]},
    "NCCL_IB_FIFO_TC": {"range": [-1, 255]},
    "NCCL_GIN_IB_TC": {"range": [-1, 255]},
    "NCCL_IB_QPS_PER_CONNECTION": {"range": [1, 128]},
    "NCCL_IB_SUBNET_PREFIX_LEN": {"range": [1, 32]},
    "NCCL_IB_GID_INDEX": {"range": [-1, None]},
    "NCCL_IB_ROCE_VERSION_NUM": {"ints": [1, 2]},
    "NCCL_IB_DISABLE": None,                       # any non-zero disables
    "NCCL_P2P_DISABLE": {"ints": [0, 1]},          # only 1 disables
    "NCCL_SOCKET_NTHREADS": {"range": [0, 16]},
    "NCCL_NSOCKS_PERTHREAD": {"range": [1, 64]},
    "NCCL_CGA_CLUSTER_SIZE": {"range": [0, 8]},
    "NCCL_MIN_CTAS": {"range": [1, 64]},
    "NCCL_MAX_CTAS": {"range": [1, 64]},
    "NCCL_MIN_NCHANNELS": {"range": [0, 64]},
    "NCCL_MAX_NCHANNELS": {"range": [1, 64]},
    "NCCL_COLLNET_ENABLE": {"ints": [0, 1]},
    "NCCL_GRAPH_MIXING_SUPPORT": {"ints": [0, 1]},
    "NCCL_GRAPH_STREAM_ORDERING": {"ints": [0, 1]},
    "NCCL_NVLS_ENABLE": {"ints": [0, 1, 2]},
    "NCCL_MNNVL_ENABLE": {"ints": [0, 1, 2]},
    "NCCL_PAT_ENABLE": {"ints": [0, 1, 2]},
    "NCCL_CROSS_NIC": {"ints": [0, 1, 2]},
    "NCCL_IGNORE_DISABLED_P2P": {"ints": [0, 1, 2]},
    "NCCL_P2P_PXN_LEVEL": {"ints": [0, 1, 2]},
    "NCCL_IB_DATA_DIRECT": {"ints": [0, 1, 2]},
    "NCCL_IB_PCI_RELAXED_ORDERING": {"ints": [0, 1, 2]},
    "NCCL_SHM_LOCALITY": {"ints": [1, 2]},
    "NCCL_L1_SHARED_MEMORY_CARVEOUT": {"range": [0, 100]},
    "NCCL_NTHREADS": {"range": [64, 512], "multiple_of": 32},
    "NCCL_LL128_NTHREADS": {"range": [160, 640], "multiple_of": 32},
    "NCCL_WORK_FIFO_BYTES": {"power_of_two": True},
    "NCCL_P2P_NET_CHUNKSIZE": {"power_of_two": True},
}


# Variables the user guide (env.rst, HEAD) lists under "Debugging": "should not be used in
# production nor retained in scripts, or only as workaround".
_DEBUGGING_SECTION = (
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_DIRECT_DISABLE", "NCCL_SHM_DISABLE", "NCCL_BUFFSIZE",
    "NCCL_NTHREADS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_CHECKS_DISABLE", "NCCL_CHECK_POINTERS",
    "NCCL_CHECK_MODE", "NCCL_LAUNCH_MODE", "NCCL_IB_DISABLE", "NCCL_IB_AR_THRESHOLD", "NCCL_IB_OOO_RQ",
    "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_CUDA_SUPPORT",
    "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ECE_ENABLE", "NCCL_MEM_SYNC_DOMAIN",
    "NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_NET_GDR_LEVEL", "NCCL_IB_GDR_LEVEL", "NCCL_NET_GDR_C2C",
    "NCCL_NET_GDR_READ", "NCCL_NET_SHARED_BUFFERS", "NCCL_NET_SHARED_COMMS", "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_IGNORE_COLLNET_MISMATCH", "NCCL_SINGLE_RING_THRESHOLD", "NCCL_LL_THRESHOLD", "NCCL_TREE_THRESHOLD",
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_P2P_PXN_LEVEL", "NCCL_PXN_C2C",
    "NCCL_RUNTIME_CONNECT", "NCCL_GRAPH_REGISTER", "NCCL_LOCAL_REGISTER", "NCCL_LEGACY_CUDA_REGISTER",
    "NCCL_WIN_ENABLE", "NCCL_SET_STACK_SIZE", "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_STREAM_ORDERING",
    "NCCL_DMABUF_ENABLE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_LL_THRESHOLD", "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
    "NCCL_COMM_BLOCKING", "NCCL_CGA_CLUSTER_SIZE", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS", "NCCL_NVLS_ENABLE",
    "NCCL_IB_MERGE_NICS", "NCCL_NET_MERGE_POLICY", "NCCL_MNNVL_ENABLE", "NCCL_MNNVL_UUID", "NCCL_MNNVL_CLIQUE_ID",
    "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR", "NCCL_RAS_TIMEOUT_FACTOR", "NCCL_LAUNCH_ORDER_IMPLICIT",
    "NCCL_LAUNCH_RACE_FATAL", "NCCL_IPC_USE_ABSTRACT_SOCKET", "NCCL_SYM_GIN_KERNELS_ENABLE",
)


def _since(name: str, meaning: str) -> str | None:
    m = re.search(re.escape(name) + r" since (\d+(?:\.\d+)+)", meaning)
    m = m or re.search(r"\(since (\d+(?:\.\d+)+)", meaning)
    m = m or re.search(r"first seen in release tag v(\d+(?:\.\d+)+)", meaning)
    return m.group(1) if m else None


def _allowed(name: str, typ: str, text: str):
    if name in _ALLOWED:
        return _ALLOWED[name]
    t = text.strip()
    if re.fullmatch(r"-?\d+(\|-?\d+)+", t):
        return {"ints": [int(x) for x in t.split("|")]}
    m = re.fullmatch(r"(-?\d{1,20}(?!\d))\.\.(-?\d{1,20}(?!\d))", t)
    if m:
        return {"range": [int(m.group(1)), int(m.group(2))]}
    m = re.fullmatch(r">=\s*(-?\d{1,20}(?!\d))", t) or re.fullmatch(r">\s*(-?\d{1,20}(?!\d))", t)
    if m:
        lo = int(m.group(1)) + (1 if t.startswith(">") and not t.startswith(">=") else 0)
        return {"range": [lo, None]}
    return None


def build(tsv: Path) -> list[dict]:
    rows: list[dict] = []
    with tsv.open(encoding="utf-8", newline="") as fh:
        for rec in csv.DictReader(fh, delimiter="\t"):
            name, typ, meaning = rec["name"].strip(), rec["type"].strip(), rec["meaning"]
            source = rec["source_file"]
            if "[not read by libnccl]" in meaning:
                reader = "nccl-tests" if source.startswith("nccl-tests") else "plugin"
            else:
                reader = "libnccl"
            last = None
            m = re.search(r"last seen in v(\d+(?:\.\d+)+)", source)
            if m:
                last = m.group(1)
            last = _LAST.get(name, last)
            dep = re.search(r"deprecated in (\d+(?:\.\d+)+)", meaning)
            repl = re.search(r"(?:replaced by|in favor of) (NCCL_[A-Z0-9_]+)", meaning)
            status = rec["status"].strip()
            entry = {
                "name": name,
                "type": typ,
                "default": rec["default"].strip(),
                "allowed": _allowed(name, typ, rec["allowed"]),
                "allowed_text": rec["allowed"].strip(),
                "status": status,
                "since": _since(name, meaning),
                "last": last if status == "removed" else None,
                "deprecated_since": dep.group(1) if dep and status != "active" else None,
                "replacement": _REPLACED.get(name) or (repl.group(1) if repl else None),
                "documented": meaning.rstrip().endswith("; documented"),
                "debugging": name in _DEBUGGING_SECTION,
                "reader": reader,
            }
            rows.append(entry)
    rows.sort(key=lambda r: r["name"])
    return rows


def render(rows: list[dict]) -> str:
    """One variable per line: small diffs when the catalog changes."""
    body = ",\n".join("  " + json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows)
    return ('{"catalog_version":' + json.dumps(CATALOG_VERSION) + ',"vars":[\n' + body + "\n]}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ncdoc.nccl.variables_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("catalog", nargs="?", default=str(DEFAULT_TSV))
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("--check", action="store_true", help="exit 1 when the output file is out of date")
    args = ap.parse_args(argv)
    tsv = Path(args.catalog)
    if not tsv.is_file():
        print(f"ncdoc: error: {tsv}: no such file", file=sys.stderr)
        return 2
    text = render(build(tsv))
    out = Path(args.output)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.is_file() else ""
        if current != text:
            print(f"{out} is out of date: run python -m ncdoc.nccl.variables_build", file=sys.stderr)
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({len(text.splitlines()) - 2} variables)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
