"""Checks of the NCCL environment alone: names, values, releases, shadowing, debugging knobs.

Every verdict follows NCCL's own parsing (ncdoc.nccl_parse, ncdoc.nccl_values). Where the
NCCL version changes the answer and it is unknown, the message says which version it assumes.
"""

from __future__ import annotations

from ncdoc.engine import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl_parse import parse_level, strtoll

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


def ev(v) -> Evidence:
    """Evidence for one EnvValue: NAME=value and where it was set."""
    return Evidence(f"{v.name}={v.value}", v.source, v.line)


def _vars():
    from ncdoc import nccl_vars
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
        guesses = nv.suggest(v.name)
        if v.name != v.name.strip():
            msg = (f"{v.name!r} has whitespace in its name (nccl.conf lines are not trimmed): "
                   f"NCCL sets a variable nothing reads")
        elif v.name != v.name.upper():
            msg = f"{v.name} is not read: NCCL variable names are upper case"
        else:
            msg = f"{v.name} is not a variable NCCL reads"
        patch = {}
        fix = None
        if guesses:
            msg += f"; did you mean {' or '.join(guesses)}?"
            patch = {v.name: None, guesses[0]: v.value}
            fix = f"Rename it to {guesses[0]}."
        yield Hit(msg, (ev(v),), fix=fix, env_patch=patch, subject=v.name)


@check("invalid_value")
def invalid_value(ctx: Context):
    from ncdoc.nccl_values import value_problems
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
        assumes = f"NCCL {version}" if version else f"NCCL {nv.catalog_version()} (version unknown)"
        msg = f"{v.name} was {when}: {assumes} ignores it"
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
    if not version:
        raise Skip("NCCL version unknown (no libnccl found, no log given)")
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
        forcing = v.name in _FORCING
        msg = (f"{v.name}={v.value} is a debugging knob (NCCL docs: not for production)"
               + ("; it overrides NCCL's own choice on every machine and NCCL version" if forcing else ""))
        yield Hit(msg, (ev(v),), severity=None if forcing else "info", env_patch={v.name: None},
                  subject=v.name)


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
