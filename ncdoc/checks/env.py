"""Checks of the NCCL environment alone: names, values, releases, shadowing, debugging knobs.

Every verdict follows NCCL's own parsing (ncdoc.nccl.parse, ncdoc.nccl.values). Where the
NCCL version changes the answer and it is unknown, the message says which version it assumes.
"""

from __future__ import annotations

from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit
from ncdoc.nccl.parse import parse_level, strtoll

# Debugging-section knobs that override NCCL's own choices for a whole job (warning); the
# rest of that section is worth knowing about (info). NCCL_IB_DISABLE and NCCL_P2P_DISABLE
# have their own rules.
_FORCING = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS",
            "NCCL_MAX_CTAS", "NCCL_NTHREADS", "NCCL_CHECK_POINTERS", "NCCL_CHECK_MODE", "NCCL_SHM_DISABLE",
            "NCCL_P2P_DIRECT_DISABLE", "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_LAUNCH_MODE")
_OWN_RULES = ("NCCL_IB_DISABLE", "NCCL_P2P_DISABLE")
_PATH_VARS = ("NCCL_CONF_FILE", "NCCL_TOPO_FILE", "NCCL_DEBUG_FILE", "NCCL_GRAPH_FILE", "NCCL_TOPO_DUMP_FILE",
              "NCCL_GRAPH_DUMP_FILE", "NCCL_IBVERBS_LIB")


# NCCL_* names that other software sets and NCCL never reads: NVIDIA's CUDA container images record
# the libnccl package they installed in NCCL_VERSION; build systems (nccl-tests' Makefile, CMake's
# FindNCCL, PyTorch's setup) locate NCCL through the others. Reporting them would flag every such image.
_NOT_FOR_NCCL = frozenset({"NCCL_VERSION", "NCCL_HOME", "NCCL_ROOT", "NCCL_ROOT_DIR", "NCCL_DIR",
                           "NCCL_INCLUDE_DIR", "NCCL_LIB_DIR", "NCCL_LIBRARY", "NCCL_LIBRARIES"})


# NCCL_* names PyTorch's ProcessGroupNCCL reads (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp): old
# aliases it still accepts after the TORCH_NCCL_* name (PyTorch 2.2 renamed them). NCCL itself never reads them.
_PYTORCH_ALIASES = frozenset({"NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_DESYNC_DEBUG",
                              "NCCL_ENABLE_TIMING", "NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"})
# TORCH_NCCL_* variables PyTorch reads under that name only: written without TORCH_, nothing reads them.
_PYTORCH_ONLY = frozenset({
    "TORCH_NCCL_AVOID_RECORD_STREAMS", "TORCH_NCCL_BCAST_UNIQUEID", "TORCH_NCCL_COORD_CHECK_MILSEC",
    "TORCH_NCCL_CUDA_EVENT_CACHE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
    "TORCH_NCCL_HIGH_PRIORITY", "TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN", "TORCH_NCCL_NAN_CHECK",
    "TORCH_NCCL_PROPAGATE_ERROR", "TORCH_NCCL_RANKS_PER_ROOT", "TORCH_NCCL_RETHROW_CUDA_ERRORS",
    "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_TRACE_CPP_STACK", "TORCH_NCCL_USE_COMM_NONBLOCKING",
    "TORCH_NCCL_NONBLOCKING_TIMEOUT", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC"})


def ev(v) -> Evidence:
    """Evidence for one EnvValue: NAME=value and where it was set."""
    return Evidence(f"{v.name}={v.value}", v.source, v.line)


def _vars():
    from ncdoc.nccl import variables as nccl_vars
    return nccl_vars


def _all_values(ctx: Context):
    seen = {}
    for v in tuple(ctx.env.values) + tuple(ctx.env.shadowed):
        seen.setdefault(v.name, v)
    return list(seen.values())


@check("unknown_nccl_var")
def unknown_nccl_var(ctx: Context):
    nv = _vars()
    for v in _all_values(ctx):
        if nv.lookup(v.name) is not None or v.name in _NOT_FOR_NCCL:
            continue
        if not v.name.upper().startswith("NCCL_") and not v.name.strip().upper().startswith("NCCL_"):
            continue
        framework = _framework_hit(v)
        if framework is not None:
            yield framework
            continue
        guesses = nv.suggest(v.name)
        if v.name != v.name.strip():
            msg = (f"{v.name!r} has whitespace in its name (nccl.conf lines are not trimmed): "
                   f"NCCL sets a variable nothing reads")
        elif v.name != v.name.upper():
            msg = f"{v.name} is not read: NCCL variable names are upper case"
        else:
            msg = f"{v.name} is not a variable NCCL reads"
        patch = {}
        fix = "Remove it: NCCL ignores names it does not know (look up the variable meant in NCCL's docs)."
        if guesses:
            msg += f"; did you mean {' or '.join(guesses)}?"
            patch = {v.name: None, guesses[0]: v.value}
            fix = f"Rename it to {guesses[0]}."
        yield Hit(msg, (ev(v),), fix=fix, env_patch=patch, subject=v.name)


def _framework_hit(v) -> Hit | None:
    """A name PyTorch reads (info), or PyTorch's TORCH_NCCL_* name written without TORCH_ (warning)."""
    torch_name = "TORCH_" + v.name
    if v.name in _PYTORCH_ALIASES:
        return Hit(f"{v.name} is not an NCCL variable: PyTorch's ProcessGroupNCCL reads it, as the old name of "
                   f"{torch_name} (the current one)", (ev(v),), severity="info",
                   fix=f"Rename it to {torch_name}; NCCL itself ignores it.",
                   env_patch={v.name: None, torch_name: v.value}, subject=v.name)
    if torch_name in _PYTORCH_ONLY:
        return Hit(f"{v.name} is read by nothing: PyTorch's ProcessGroupNCCL reads {torch_name}, and NCCL does "
                   "not know this name", (ev(v),), fix=f"Rename it to {torch_name}.",
                   env_patch={v.name: None, torch_name: v.value}, subject=v.name)
    return None


@check("invalid_value")
def invalid_value(ctx: Context):
    from ncdoc.nccl.values import value_problems
    nv = _vars()
    version = ctx.nccl_version
    for v in ctx.env.values:
        info = nv.lookup(v.name)
        if info is None or info["reader"] != "libnccl" or info["status"] == "removed":
            continue
        for p in value_problems(v.name, v.value, info, version=version, source=v.source):
            fix = f"Set {v.name}={p.suggestion}." if p.suggestion is not None else None
            patch = {v.name: p.suggestion} if p.suggestion is not None else {}
            yield Hit(f"{v.name}={v.value}: {p.message}", (ev(v),), fix=fix, env_patch=patch,
                      severity=p.severity, subject=v.name)


@check("removed_var")
def removed_var(ctx: Context):
    nv = _vars()
    version = ctx.nccl_version
    for v in _all_values(ctx):
        info = nv.lookup(v.name)
        if info is None or info["status"] != "removed":
            continue
        if version and nv.read_by(info, version):
            continue            # the NCCL in use still reads it
        last = info.get("last")
        when = f"last read by NCCL {last}" if last else "no longer read"
        if version:
            msg = f"{v.name} was {when}: NCCL {version} ignores it"
        else:
            msg = (f"{v.name} was {when}: the newest NCCL ncdoc knows ({nv.catalog_version()}) ignores it; "
                   "your NCCL version is unknown")
        repl = info.get("replacement")
        fix = f"Remove it; use {repl} instead." if repl else "Remove it."
        yield Hit(msg + (f"; its replacement is {repl}" if repl else ""), (ev(v),), fix=fix,
                  env_patch={v.name: None}, subject=v.name)


@check("deprecated_var")
def deprecated_var(ctx: Context):
    nv = _vars()
    version = ctx.nccl_version
    for v in ctx.env.values:
        info = nv.lookup(v.name)
        if info is None or info["status"] != "deprecated":
            continue
        dep = info.get("deprecated_since")
        if version and dep and nv.read_by({"since": dep}, version) is False:
            continue            # not deprecated yet in the NCCL in use
        repl = info.get("replacement")
        msg = f"{v.name} is deprecated" + (f" since NCCL {dep}" if dep else "")
        if repl:
            msg += f"; use {repl}"
        yield Hit(msg, (ev(v),), fix=f"Replace {v.name} with {repl}." if repl else f"Remove {v.name}.",
                  env_patch={v.name: None, repl: v.value} if repl else {}, subject=v.name)


@check("var_newer_than_nccl")
def var_newer_than_nccl(ctx: Context):
    nv = _vars()
    version = ctx.nccl_version
    if not ctx.env.values:
        return
    ctx.require("nccl_version")
    for v in ctx.env.values:
        info = nv.lookup(v.name)
        if info is None or info["reader"] != "libnccl" or info["status"] == "removed":
            continue
        since = info.get("since")
        if since and nv.read_by(info, version) is False:
            yield Hit(f"{v.name} is read only since NCCL {since}; NCCL {version} ignores it", (ev(v),),
                      fix=f"Upgrade NCCL to {since} or later, or remove {v.name}.", subject=v.name)


@check("env_shadowed")
def env_shadowed(ctx: Context):
    eff = ctx.env_map
    for s in ctx.env.shadowed:
        e = eff.get(s.name)
        if e is None or e.value == s.value:
            continue
        if e.source == s.source:
            where = s.source.removeprefix("file:")
            rule = " (nccl.conf: the first line wins)" if where.endswith(".conf") else ""
            msg = (f"{s.name} is set twice in {where}: " + (f"line {e.line} " if e.line else "") +
                   f"({e.value!r}) takes effect, " + (f"line {s.line} " if s.line else "") +
                   f"({s.value!r}) does not{rule}")
        else:
            msg = (f"{s.name}={s.value} from {s.source} is overridden by {e.source} ({s.name}={e.value})")
        yield Hit(msg, (ev(e), ev(s)), subject=s.name)


@check("debug_var_in_production")
def debug_var_in_production(ctx: Context):
    nv = _vars()
    for v in ctx.env.values:
        info = nv.lookup(v.name)
        if info is None or not info.get("debugging") or v.name in _OWN_RULES:
            continue
        if v.name == "NCCL_P2P_LEVEL" and parse_level(v.value, version=ctx.nccl_version)[0] == "LOC":
            continue                # p2p-disabled reports it
        if is_default(v.value, info):
            continue                # NCCL's own default: it overrides nothing
        forcing = v.name in _FORCING
        msg = (f"{v.name}={v.value} is a debugging knob (NCCL docs: not for production)"
               + ("; it overrides NCCL's own choice on every machine and NCCL version" if forcing else ""))
        yield Hit(msg, (ev(v),), severity=None if forcing else "info", env_patch={v.name: None},
                  subject=v.name)


def is_default(value: str, info: dict) -> bool:
    """True when `value` is the catalog's default for the variable, in every NCCL release: a default
    that changed between releases ("1 (0 before 2.19)") or depends on the machine counts as unknown."""
    default = str(info.get("default") or "").strip()
    token, _, qualifier = default.partition(" ")
    names_release = "." in qualifier and any(c.isdigit() for c in qualifier)
    if not token or token == "unset" or names_release or "rank-dependent" in default:
        return False
    a, b = strtoll(value), strtoll(token)
    if a.kind == "ok" and b.kind == "ok":
        return a.value == b.value
    return value.strip() == token


def ib_switched_off(ctx: Context) -> list:
    """The settings that keep NCCL off its IB transport: NCCL_IB_DISABLE non-zero (strtoll), or NCCL_NET
    naming Socket (NCCL compares it case-insensitively, untrimmed)."""
    d, net = ctx.env_map.get("NCCL_IB_DISABLE"), ctx.env_map.get("NCCL_NET")
    return [x for x, on in ((d, d is not None and (strtoll(d.value).value or 0) != 0),
                            (net, net is not None and net.value.lower() == "socket")) if on]


@check("ib_disabled_by_env")
def ib_disabled_by_env(ctx: Context):
    set_vars = ib_switched_off(ctx)
    if not set_vars:
        return
    what = " and ".join(f"{x.name}={x.value}" for x in set_vars)
    patch = {x.name: None for x in set_vars}
    if ctx.logs:
        from ncdoc.checks.evidence_common import plugin_platform
        platform = plugin_platform(ctx)
        if platform:
            # EFA, TCPX and gIB are reached through their net plugin, never through NCCL's IB transport
            yield Hit(f"{what} keeps NCCL's own IB transport off, which is routine on {platform}: the net plugin "
                      "carries the traffic between nodes", tuple(ev(x) for x in set_vars), severity="info",
                      subject=set_vars[0].name)
            return
    if ctx.missing("hcas"):
        # No RDMA facts: the setting alone says where traffic between nodes goes, not whether it is wrong.
        yield Hit(f"{what} forces TCP sockets between nodes; wrong if these nodes have IB/RoCE ports "
                  "(no RDMA device listing was given to check)", tuple(ev(x) for x in set_vars),
                  severity="warning", env_patch=patch, subject=set_vars[0].name)
        return
    from ncdoc.nccl.devices import is_active
    up = [f"{h.name}:{p.num}" for h in ctx.snapshot.hcas.hcas for p in h.ports if is_active(p)]
    if up:
        yield Hit(f"{what}: NCCL uses TCP sockets between nodes although {len(up)} RDMA port"
                  f"{'s are' if len(up) > 1 else ' is'} up ({', '.join(up[:4])}{', ...' if len(up) > 4 else ''})",
                  tuple(ev(x) for x in set_vars), env_patch=patch, subject=set_vars[0].name)


@check("socket_threads_product")
def socket_threads_product(ctx: Context):
    eff = ctx.env_map
    t, s = eff.get("NCCL_SOCKET_NTHREADS"), eff.get("NCCL_NSOCKS_PERTHREAD")
    nt = strtoll(t.value).value if t else None
    ns = strtoll(s.value).value if s else None
    if nt is not None and nt > 16:
        yield Hit(f"NCCL_SOCKET_NTHREADS={t.value} is above 16: NCCL clamps it to 16", (ev(t),),
                  env_patch={"NCCL_SOCKET_NTHREADS": "16"}, subject="NCCL_SOCKET_NTHREADS")
        nt = 16
    if nt and ns and nt > 0 and ns > 0 and nt * ns > 64:
        yield Hit(f"NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {nt} x {ns} = {nt * ns} > 64: NCCL "
                  f"cuts NCCL_NSOCKS_PERTHREAD to {64 // nt}", (ev(t), ev(s)),
                  env_patch={"NCCL_NSOCKS_PERTHREAD": str(64 // nt)}, subject="NCCL_NSOCKS_PERTHREAD")


@check("p2p_disabled")
def p2p_disabled(ctx: Context):
    eff = ctx.env_map
    d, lvl = eff.get("NCCL_P2P_DISABLE"), eff.get("NCCL_P2P_LEVEL")
    if d is not None and strtoll(d.value).value == 1:
        yield Hit("NCCL_P2P_DISABLE=1 turns off GPU peer-to-peer (NVLink and PCIe): intra-node traffic goes "
                  "through host memory", (ev(d),), env_patch={"NCCL_P2P_DISABLE": None},
                  subject="NCCL_P2P_DISABLE")
    elif lvl is not None:
        level, how = parse_level(lvl.value, version=ctx.nccl_version)
        if level == "LOC":
            yield Hit(f"NCCL_P2P_LEVEL={lvl.value} means LOC: GPU peer-to-peer is never used",
                      (ev(lvl),), env_patch={"NCCL_P2P_LEVEL": None}, subject="NCCL_P2P_LEVEL")


@check("path_not_expanded")
def path_not_expanded(ctx: Context):
    for name in _PATH_VARS:
        v = ctx.env_map.get(name)
        if v is not None and (v.value.startswith("~") or "$" in v.value):
            what = "'~'" if v.value.startswith("~") else "'$'"
            yield Hit(f"{name}={v.value}: NCCL does not expand {what}, so it looks for that literal path",
                      (ev(v),), fix=f"Write {name} as an absolute path.", subject=name)
