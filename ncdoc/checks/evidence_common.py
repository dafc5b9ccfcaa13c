"""What the evidence checks share: reaching the parsed logs and tests, quoting their lines,
the job's shape (nodes, GPUs per node) and the bandwidth it should reach.

Run evidence arrives in `ctx.evidence` by kind: "nccl_log" (ncdoc.evidence.nccl_log.LogFacts),
"nccl_tests" (ncdoc.evidence.nccl_tests facts). Every helper reads attributes defensively,
so a check meets an older or partial parse with a skip, never a crash. Which evidence a check
needs is declared with its rule (`needs: [log]`, `[tests]`): the engine skips it without.
"""

from __future__ import annotations

import re

from ncdoc.startup.record import record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

from ncdoc.nccl.bandwidth import Expectation, expected_bandwidth
from ncdoc.engine.rules import Context
from ncdoc.findings import Evidence

MAX_EVIDENCE = 4


@record
class NodeEvidence:
    """A node-evidence file (ibv_devinfo, topo -m, XML) as read: what its importer made of it, and its
    lines, so a check can quote the line behind a fact. In ctx.evidence["node_evidence"]."""
    source: str
    kind: str                        # detect_kind's name: "ibv_devinfo", "topo_matrix", ...
    tool: str | None = None          # "ibv_devinfo" | "ibstat" | "ibstatus" | "show_gids"
    notes: tuple[str, ...] = ()
    hcas_state: str | None = None    # the imported HcaSection status: "ok" | "absent" | "unknown"
    hcas_reason: str = ""
    lines: tuple[str, ...] = ()
    numbered: tuple[tuple[int, str], ...] = ()   # (line, text), when only some of a long file's lines are kept

    def numbered_lines(self) -> Iterable[tuple[int, str]]:
        """(line number, text) of the lines kept."""
        return self.numbered or enumerate(self.lines, 1)

    def grep(self, *patterns: str, limit: int = 3) -> tuple[Evidence, ...]:
        """Lines matching the patterns, the first pattern's matches first."""
        out: list[Evidence] = []
        for pattern in patterns:
            rx = re.compile(pattern)
            for n, text in self.numbered_lines():
                if len(out) >= limit:
                    return tuple(out)
                if rx.search(text):
                    ev = Evidence(text.strip()[:200], self.source, n)
                    if ev not in out:
                        out.append(ev)
        return tuple(out)


def node_evidence(ctx: Context) -> list[NodeEvidence]:
    return list(ctx.evidence.get("node_evidence", []))


def _source(obj: Any) -> str:
    return getattr(obj, "source", "") or ""


def cite(obj: Any, items: Iterable[Any], limit: int = MAX_EVIDENCE) -> tuple[Evidence, ...]:
    """Findings evidence from parser citations (objects with .line and .text) of `obj`'s file."""
    out: list[Evidence] = []
    src = _source(obj)
    for e in items:
        if e is None:
            continue
        ev = Evidence(getattr(e, "text", str(e)), src, getattr(e, "line", None))
        if ev not in out:
            out.append(ev)
        if len(out) >= limit:
            break
    return tuple(out)


def cite_kind(obj: Any, *kinds: str, limit: int = MAX_EVIDENCE) -> tuple[Evidence, ...]:
    """The first lines the parser kept for each fact kind in `kinds`, in that order."""
    book = getattr(obj, "evidence", None) or {}
    items: list[Any] = []
    for k in kinds:
        items.extend(book.get(k, ()))
    return cite(obj, items, limit)


def cite_problems(obj: Any, problems: Iterable[Any], limit: int = MAX_EVIDENCE) -> tuple[Evidence, ...]:
    return cite(obj, (p.evidence for p in problems), limit)


def merge_evidence(*groups: Iterable[Evidence], limit: int = 6) -> tuple[Evidence, ...]:
    out: list[Evidence] = []
    for g in groups:
        for e in g:
            if e not in out:
                out.append(e)
    return tuple(out[:limit])


# ---------------------------------------------------------------- NCCL's NVLS code

# What NCCL 2.27+ says when binding NVLS multicast memory fails ("Failed to bind NVLink SHARP (NVLS)
# Multicast memory of size N : CUDA error 401 '...'"), with or without its WARN prefix.
_NVLS_WORDS = ("NVLink SHARP", "NVLS", "Multicast", "multicast")


def in_nvls(log: Any, p: Any) -> bool:
    """The CUDA failure came from NCCL's NVLS code: its message names NVLS / multicast memory, its WARN's
    file is nvls.cc, the line just above it does (NCCL's NVLS bind message spans lines, and pastes split it),
    else (no file:line kept) the ncclUnhandledCudaError traces go through nvls.cc."""
    if any(w in (p.message or "") for w in _NVLS_WORDS):
        return True
    if p.source_file:
        return "nvls" in p.source_file.lower()
    at = p.evidence.line if p.evidence else None
    if at and any(q.evidence and 0 < at - q.evidence.line <= _SPLIT_LINES and any(w in (q.message or "")
                                                                                 for w in _NVLS_WORDS)
                  for q in getattr(log, "problems", ())):
        return True
    sources = (getattr(log, "nccl_result_sources", None) or {}).get("ncclUnhandledCudaError", {})
    return any("nvls" in f.lower() for f in sources)


_SPLIT_LINES = 2          # a message NCCL prints over lines: its CUDA error this many lines below its start


@record
class CudaError:
    """A CUDA error a run reported, in an NCCL log (NCCL's "Cuda failure ...") or in nccl-tests output
    ("Test CUDA failure ...", or a CUDA failure NCCL's last error names): one shape, so every rule about a
    CUDA error reads both."""
    code: int | None
    name: str | None
    text: str                        # the error string ("out of memory")
    evidence: Evidence
    origin: str                      # "log" | "tests"
    nvls: bool = False               # raised by NCCL's NVLS (NVLink SHARP) setup
    where: str = ""                  # NCCL source file:line, or nccl-tests' own source location
    host: str | None = None
    message: str = ""                # the whole message it came in


def cuda_errors(ctx: Context) -> list[CudaError]:
    """Every CUDA error the logs and nccl-tests outputs show, logs first."""
    from ncdoc.evidence.error_codes import cuda_error
    from ncdoc.evidence.nccl_log_errors import classify_error
    out: list[CudaError] = []
    for log in ctx.logs:
        for p in log.problems_of("cuda_failure"):
            cit = p.evidence
            out.append(CudaError(p.code, p.code_name, p.details.get("error", "") or p.message,
                                 Evidence(cit.text if cit else p.message, _source(log), cit.line if cit else None),
                                 "log", in_nvls(log, p), p.source_file or "", p.host, p.message))
    for t in ctx.tests:
        for f in getattr(t, "failures", ()) or ():
            ev = Evidence(f.text, _source(t), f.line or None)
            if f.kind == "cuda":
                code, name, _ = cuda_error(None, f.error)
                out.append(CudaError(code, name, f.error, ev, "tests", False, f.location, f.host, f.text))
            elif f.kind == "nccl" and f.last_error:
                cls = classify_error(f.last_error)
                if cls is not None and cls.kind == "cuda_failure":
                    nvls = any(w in f.last_error for w in _NVLS_WORDS)
                    out.append(CudaError(cls.code, cls.code_name, dict(cls.details).get("error", f.last_error), ev,
                                         "tests", nvls, f.location, f.host, f.last_error))
    return out


def cite_cuda(errors: Iterable[CudaError], limit: int = MAX_EVIDENCE) -> tuple[Evidence, ...]:
    out: list[Evidence] = []
    for e in errors:
        if e.evidence not in out:
            out.append(e.evidence)
        if len(out) >= limit:
            break
    return tuple(out)


# ---------------------------------------------------------------- the environment

def env_value(ctx: Context, name: str) -> str | None:
    """The effective value of `name`: the context's env (launch files, --env, the snapshot),
    else what a log says it was set to."""
    v = ctx.env.get(name) if ctx.env is not None else None
    if v is not None:
        return v
    for log in ctx.logs:
        got = (getattr(log, "env", None) or {}).get(name)
        if got is not None:
            return got
    return None


def env_evidence(ctx: Context, name: str) -> tuple[Evidence, ...]:
    for v in (ctx.env.values if ctx.env is not None else ()):
        if v.name == name:
            return (Evidence(f"{v.name}={v.value}", v.source, v.line),)
    for log in ctx.logs:
        got = cite_kind(log, "env:" + name, limit=1)
        if got:
            return got
    return ()


def env_true(value: str | None) -> bool:
    if value is None:
        return False
    try:
        return int(value.strip(), 0) != 0
    except ValueError:
        return False


# ---------------------------------------------------------------- the job's shape

def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else None


def tests_hosts(t: Any) -> tuple[str, ...]:
    return tuple(getattr(t, "hosts", None) or ())


def ranks_per_host(t: Any) -> dict[str, int]:
    """Distinct ranks nccl-tests lists per host (the first run that lists any)."""
    devices = getattr(t, "devices", None) or ()
    if not devices:
        return {}
    first = min(d.run for d in devices)
    per: dict[str, set] = {}
    for d in devices:
        if d.run == first:
            per.setdefault(d.host, set()).add(d.rank)
    return {h: len(r) for h, r in per.items()}


def tests_complete_listing(t: Any) -> bool:
    """True when the device list is whole: ranks 0..n-1 once each, and the output goes on past it (results, or
    a failure after the list: a run that failed before measuring), or one process lists nThread x nGpus ranks."""
    devices = getattr(t, "devices", None) or ()
    if not devices or getattr(t, "truncated", False) or getattr(t, "duplicate_ranks", ()):
        return False
    ranks = sorted(d.rank for d in devices)
    if ranks != list(range(len(ranks))):
        return False
    if getattr(t, "rows", ()):
        return True
    last = max(d.line for d in devices)
    if any(f.line > last for f in getattr(t, "failures", ()) or ()):
        return True
    per_process = (getattr(t, "nthread", None) or 0) * (getattr(t, "ngpus", None) or 0)
    return len({d.pid for d in devices}) == 1 and per_process == len(ranks)


def job_nodes(ctx: Context) -> int | None:
    """How many nodes the job spans: --nodes, an NCCL log's nNodes, the hosts it or nccl-tests name."""
    given = _int(ctx.options.get("nodes"))
    if given:
        return given
    for log in ctx.logs:
        n = _int(getattr(log, "nnodes", None))
        if n:
            return n
    for log in ctx.logs:
        if (getattr(log, "host_count", 0) or 0) > 1:
            return log.host_count
    for t in ctx.tests:
        hosts = tests_hosts(t)
        if len(hosts) > 1:
            return len(hosts)
        # rank 0 lists every rank's device: a complete list on one host is a one-node job
        if len(hosts) == 1 and tests_complete_listing(t):
            return 1
    for log in ctx.logs:
        # every rank of every communicator logged its Init START, all from one host: a one-node job
        # even when init failed before NCCL printed nNodes
        comms = [c for c in getattr(log, "comms", ()) if c.nranks]
        if comms and getattr(log, "host_count", 0) == 1 and all(c.init_start >= c.nranks for c in comms):
            return 1
    return None


def multi_node(ctx: Context) -> bool | None:
    """True/False when the evidence says whether the job crosses nodes, None when it cannot."""
    n = job_nodes(ctx)
    if n is not None:
        return n > 1
    for log in ctx.logs:
        nranks, local = _int(getattr(log, "nranks", None)), _int(getattr(log, "local_ranks", None))
        if nranks and local:
            return nranks > local
    return None


def local_gpus(ctx: Context) -> int | None:
    """GPUs (ranks) per node: an NCCL log's localRanks, else the most ranks nccl-tests lists on one host."""
    for log in ctx.logs:
        n = _int(getattr(log, "local_ranks", None))
        if n:
            return n
    for t in ctx.tests:
        per_host = ranks_per_host(t)
        if per_host:
            return max(per_host.values())
    return None


def log_net_devices(ctx: Context) -> list[Any]:
    """NetDevice records of the IB/RoCE devices the logs say NCCL uses (unique by name)."""
    seen: dict[str, Any] = {}
    for log in ctx.logs:
        for d in getattr(log, "net_devices", ()) or ():
            if getattr(d, "transport", "IB") == "IB":
                seen.setdefault(d.name, d)
    return list(seen.values())


def tests_collective(ctx: Context) -> str | None:
    """The collective nccl-tests measured: from its header, else from busbw/algbw (> 1 only for all-reduce)."""
    for t in ctx.tests:
        c = getattr(t, "collective", None)
        if c:
            return c
    for t in ctx.tests:
        factor = getattr(t, "bus_factor", None)
        if factor is not None and factor > 1.05:
            return "all_reduce"
    return None


def gpu_name(ctx: Context) -> str | None:
    if ctx.options.get("gpu_name"):
        return ctx.options["gpu_name"]
    for t in ctx.tests:
        for d in getattr(t, "devices", None) or ():
            if getattr(d, "name", None):
                return d.name
    return None


def job_expectation(ctx: Context) -> Expectation:
    """The bandwidth this job should reach, from everything the context holds."""
    opts = ctx.options
    nic_gbps, nics = opts.get("nic_gbps"), opts.get("nics")
    devices = log_net_devices(ctx)
    source = "the command line"
    snapshot = ctx.snapshot
    if nic_gbps is None:
        speeds = sorted(d.speed_mbps for d in devices if getattr(d, "speed_mbps", None))
        has_ports = snapshot is not None and snapshot.hcas.status.known and any(
            p.rate_gbps for h in snapshot.hcas.hcas for p in h.ports)
        if speeds and not has_ports:
            nic_gbps, nics, source = speeds[len(speeds) // 2] / 1000.0, len(devices), "the NCCL log"
    return expected_bandwidth(
        snapshot, nic_gbps=nic_gbps, nics=nics, nodes=job_nodes(ctx),
        collective=tests_collective(ctx) or "unknown",
        gpu_name=gpu_name(ctx), ib_hca=env_value(ctx, "NCCL_IB_HCA"),
        net_devices=[d.name for d in devices], local_ranks=local_gpus(ctx), algo=env_value(ctx, "NCCL_ALGO"),
        nic_source=source)


# ---------------------------------------------------------------- net-plugin platforms

# Which fabric a net plugin's name (or its log lines) stand for: on these clouds NCCL reaches the network
# only through the plugin, so settings that keep NCCL's own IB transport off are routine there.
_PLATFORMS = (("libfabric", "AWS EFA (aws-ofi-nccl)"), ("ofi", "AWS EFA (aws-ofi-nccl)"),
              ("aws", "AWS EFA (aws-ofi-nccl)"), ("tcpxo", "GCP GPUDirect-TCPXO"), ("fastrak", "GCP GPUDirect-TCPXO"),
              ("tcpx", "GCP GPUDirect-TCPX"), ("gib", "GCP gIB"))
_INTERNAL_NETS = ("ib", "socket", "ibext")


def _platform_of(name: str | None) -> str | None:
    low = (name or "").lower()
    if not low or low.split("_v")[0] in _INTERNAL_NETS:
        return None
    return next((p for key, p in _PLATFORMS if key in low), None)


def plugin_platform(ctx: Context) -> str | None:
    """The net-plugin fabric the job runs on or was meant to (AWS EFA, GCP TCPX/TCPXO/gIB), when the evidence says:
    a plugin named, loaded, initialised, assigned or failing, aws-ofi-nccl's lines, EFA settings."""
    names = [env_value(ctx, "NCCL_NET"), env_value(ctx, "NCCL_NET_PLUGIN")]
    for log in ctx.logs:
        pl = log.plugin
        names += [log.network, pl.requested, *pl.loaded, *pl.initialized, *pl.assigned, *pl.failed,
                  *pl.external_paths]
        if pl.ofi_version or pl.ofi_provider or any(p.kind.startswith("ofi") for p in log.problems) \
                or (log.cloud or {}).get("efa"):
            return "AWS EFA (aws-ofi-nccl)"
    for n in names:
        got = _platform_of(n)
        if got:
            return got
    fi = (env_value(ctx, "FI_PROVIDER") or "").lower()
    return "AWS EFA (aws-ofi-nccl)" if fi == "efa" else None


def plugin_failure(log: Any) -> tuple[str, tuple[Any, ...]] | None:
    """(what failed, the problems saying so) when a net plugin failed to start: aws-ofi-nccl's "initialization
    failed" and the errors before it, or NCCL's "Failed to initialize NET plugin X" for an external plugin."""
    ofi = [p for p in log.problems if p.kind.startswith("ofi") and p.level in ("WARN", "last_error")]
    init = [p for p in ofi if "initialization failed" in p.message or "init failed" in p.message]
    if init:
        before = [p for p in ofi if p.evidence and init[0].evidence and p.evidence.line <= init[0].evidence.line]
        cause = next((p for p in before if p is not init[0]), None)
        return ("aws-ofi-nccl failed to initialise" + (f" ({cause.message})" if cause else ""),
                tuple(before[-3:] or init[:1]))
    external = [n for n in log.plugin.failed if _platform_of(n) or n.lower().split("_v")[0] not in _INTERNAL_NETS]
    if external:
        return f"the net plugin {external[0]} failed to initialise", ()
    return None
