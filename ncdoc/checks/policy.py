"""Site policy checks: the entries of the policy packs in ctx.options["policies"] (ncdoc.engine.policy)."""

from __future__ import annotations

from ncdoc.checks.env import ev
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any


def _facts(ctx: Context) -> dict[str, Any]:
    snap = ctx.snapshot
    facts: dict[str, Any] = {"hostname": ctx.options.get("hostname"), "nccl": ctx.nccl_version}
    if snap is not None:
        if snap.host.status.known and snap.host.hostname:
            facts["hostname"] = snap.host.hostname
        if snap.versions.status.known:
            facts["driver"] = snap.versions.driver
            facts["cuda"] = snap.versions.cuda_driver
            facts["net_plugins"] = list(snap.versions.net_plugins)
    return facts


def nccl_default(var: str) -> str | None:
    """The value NCCL uses when `var` is unset, when it is one plain value (not "auto", not "unset")."""
    import re
    from ncdoc.nccl.variables import lookup
    info = lookup(var)
    text = (info or {}).get("default") or ""
    m = re.search(r"=>\s*(-?\d{1,20}(?!\d))\b", text)
    if m:
        return m.group(1)
    m = re.match(r"(-?\d+|0x[0-9a-fA-F]+)\b", text)
    if m and m.group(1) != "-2":
        return m.group(1)
    m = re.match(r"([A-Z][A-Z0-9_,]*)\b", text)
    return m.group(1) if m else None


def _run(ctx: Context, level: str):
    from ncdoc.engine.policy import applies, satisfies
    policies = ctx.options.get("policies") or ()
    facts = _facts(ctx)
    reasons: list[str] = []
    evaluated = 0
    for pol in policies:
        for e in pol.entries:
            if e.level != level:
                continue
            ok, why = applies(e, facts)
            if ok is None:
                reasons.append(f"{pol.name}/{e.var}: {why}")
                continue
            if not ok:
                continue
            evaluated += 1
            v = ctx.env_map.get(e.var)
            where = Evidence(f"policy {pol.name}: {e.var} {level} {e.describe()}", pol.path, e.line)
            tag = f"[policy {pol.name}]"
            if level == "forbidden":
                if v is not None and (e.kind is None or satisfies(e, v.value)):
                    what = "must not be set" if e.kind is None else f"must not be {e.describe()}"
                    yield Hit(f"{tag} {e.var}={v.value}: {e.var} {what}: {e.reason}", (ev(v), where),
                              fix=e.fix or f"Unset {e.var}.", env_patch={e.var: None}, severity=e.severity,
                              subject=e.var)
                continue
            if v is None:
                default = nccl_default(e.var)
                if e.kind and default is not None and satisfies(e, default):
                    continue            # unset: NCCL's default already satisfies the policy
                shown = f" (NCCL default: {default})" if default is not None else ""
                msg = f"{tag} {e.var} is unset{shown} but must be {e.describe()}: {e.reason}" if e.kind else \
                    f"{tag} {e.var} must be set: {e.reason}"
                yield Hit(msg, (where,), fix=e.fix or (f"Set {e.var}={e.arg}." if e.kind == "value" else None),
                          env_patch={e.var: e.arg} if e.kind == "value" else {}, severity=e.severity,
                          subject=e.var)
            elif not satisfies(e, v.value):
                yield Hit(f"{tag} {e.var}={v.value} but must be {e.describe()}: {e.reason}", (ev(v), where),
                          fix=e.fix or (f"Set {e.var}={e.arg}." if e.kind == "value" else None),
                          env_patch={e.var: e.arg} if e.kind == "value" else {}, severity=e.severity, subject=e.var)
    if reasons and not evaluated:
        raise Skip("; ".join(reasons))


@check("policy_enforced")
def policy_enforced(ctx: Context):
    yield from _run(ctx, "enforced")


@check("policy_recommended")
def policy_recommended(ctx: Context):
    yield from _run(ctx, "recommended")


@check("policy_forbidden")
def policy_forbidden(ctx: Context):
    yield from _run(ctx, "forbidden")
