"""Which rules run, at what severity, and when a report fails: CLI > environment > config file.

    sel = resolve(select=..., ignore=..., severity=..., fail_on=..., rules_files=..., config=...)
    report = sel.run(ctx)
    report.fails(sel.fail_on)

--select / select: rule codes, code prefixes (NC1, NC11), names, or ALL.
--ignore CODE:reason / ignore = {CODE = "reason"}: a reason is required; ignored rules are
listed as skipped with it. --severity CODE=LEVEL (info|warning|error|off) / [severity].
Policy packs: the config file's `rules`, then NCDOC_RULES (os.pathsep-separated), then --rules.
fail-on: --fail-on, else NCDOC_FAIL_ON, else the config file, else the command's default.
"""

from __future__ import annotations

import os

from ncdoc.errors import InputError, UsageError
from ncdoc.findings import SEVERITIES, Report, Skipped

FAIL_ON = ("info", "warning", "error", "none")


class Selection:
    __slots__ = ("ruleset", "rules", "overrides", "ignored", "fail_on", "policies", "config_path", "config", "ran")

    def __init__(self, ruleset, rules, overrides, ignored, fail_on, policies, config_path, config=None):
        self.ruleset, self.rules, self.overrides = ruleset, rules, overrides
        self.ignored, self.fail_on, self.policies, self.config_path = ignored, fail_on, policies, config_path
        self.config = config             # the ncdoc.engine.policy.Config read (None with --no-config)
        self.ran: list = []              # the rules the last run() judged (for reports listing every rule run)

    def run(self, ctx) -> Report:
        from ncdoc.engine.rules import run_rules
        rules = list(self.rules)
        if self.policies:
            ctx.options.setdefault("policies", self.policies)
        if not ctx.options.get("policies"):
            # site policy rules find nothing without a policy pack: leave them (and their module) out
            rules = [r for r in rules if r.pack != "policy"]
        if getattr(ctx, "cluster", None) is None:
            # cross-node rules need many nodes (ncdoc cluster check): leave them (and their module) out
            rules = [r for r in rules if r.pack != "cluster"]
        # only the checks that will run on ctx are imported (a node check never loads the log checks)
        missing = self.ruleset.ensure_checks(rules, ctx)
        skipped_missing = []
        if missing:
            from ncdoc.startup.record import replace
            kept = []
            for r in rules:
                gone = [c for c in r.checks if c in missing]
                if gone and len(gone) == len(r.checks):
                    skipped_missing.append(Skipped(r.code, r.name, f"check function {', '.join(gone)} "
                                                                   "is not in this install"))
                    continue
                kept.append(replace(r, checks=tuple(c for c in r.checks if c not in missing)) if gone else r)
            rules = kept
        self.ran = list(rules)
        report = run_rules(ctx, rules, severity_overrides=self.overrides)
        extra = tuple(skipped_missing) + tuple(Skipped(r.code, r.name, f"ignored: {why}") for r, why in self.ignored)
        return Report(report.findings, report.skipped + extra)


def _match(ruleset, token: str, where: str, path: str | None):
    rules = ruleset.matching(token.strip())
    if not rules:
        msg = f"{where}: unknown rule code or name {token!r}"
        if path:
            raise InputError(msg, path=path)
        raise UsageError(msg + " (see 'ncdoc rules')")
    return rules


def parse_ignore(items) -> dict[str, str]:
    """--ignore CODE:reason (the shell already removed the quotes); a reason is required."""
    out: dict[str, str] = {}
    for item in items or ():
        code, sep, reason = item.partition(":")
        if not sep or not reason.strip():
            raise UsageError(f"--ignore {item!r}: give a reason, e.g. --ignore {code}:\"why it does not apply\"")
        out[code.strip()] = reason.strip()
    return out


def parse_severity(items) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        code, sep, level = item.partition("=")
        if not sep or level not in SEVERITIES + ("off",):
            raise UsageError(f"--severity {item!r}: expected CODE=info|warning|error|off")
        out[code.strip()] = level
    return out


def resolve(*, select=None, ignore=None, severity=None, fail_on: str | None = None, rules_files=(),
            config: str | None = None, no_config: bool = False, default_fail_on: str = "error",
            families: tuple[str, ...] | None = None, environ=None) -> Selection:
    from ncdoc.engine import ruleset as registry
    environ = os.environ if environ is None else environ
    rs = registry.load()
    cfg = None
    if not no_config:
        from ncdoc.engine.policy import load_config
        cfg = load_config(config)
    cfg_path = cfg.path if cfg else None

    chosen: dict[str, object] = {}
    tokens = select if select else (cfg.select if cfg and cfg.select is not None else None)
    if tokens:
        for t in tokens:
            for r in _match(rs, t, "--select" if select else "select", None if select else cfg_path):
                chosen[r.code] = r
    else:
        chosen = {r.code: r for r in rs}
    if families:
        chosen = {c: r for c, r in chosen.items() if r.family in families}

    ignores: dict[str, tuple[str, str | None]] = {}
    for code, why in (cfg.ignore.items() if cfg else ()):
        ignores[code] = (why, cfg_path)
    for code, why in parse_ignore(ignore).items():
        ignores[code] = (why, None)
    ignored = []
    for token, (why, path) in ignores.items():
        for r in _match(rs, token, "ignore" if path else "--ignore", path):
            if r.code in chosen:
                ignored.append((r, why))
                del chosen[r.code]

    overrides: dict[str, str] = {}
    for code, level in list((cfg.severity.items() if cfg else ())) + list(parse_severity(severity).items()):
        for r in _match(rs, code, "severity", None if code in parse_severity(severity) else cfg_path):
            overrides[r.code] = level

    fo = fail_on or environ.get("NCDOC_FAIL_ON") or (cfg.fail_on if cfg else None) or default_fail_on
    if fo not in FAIL_ON:
        raise UsageError(f"fail-on {fo!r} is not one of {', '.join(FAIL_ON)}")

    paths = list(cfg.rules if cfg else ())
    paths += [p for p in environ.get("NCDOC_RULES", "").split(os.pathsep) if p]
    paths += list(rules_files or ())
    policies = []
    if paths:                            # ncdoc.engine.policy only when there is a pack: keeps `ncdoc check` lean
        from ncdoc.engine.policy import load_policy
        policies = [load_policy(p) for p in dict.fromkeys(paths)]
    rules = sorted(chosen.values(), key=lambda r: r.code)
    return Selection(rs, rules, overrides, ignored, fo, policies, cfg_path, cfg)


__all__ = ["Selection", "resolve", "parse_ignore", "parse_severity", "FAIL_ON"]
