"""The one rule registry: the rules by code, name and alias, loaded from the compiled rules.

rules/compiled.json is generated from the rule packs (rules/*.yaml, read and validated by
ncdoc.engine.packs) with `python -m ncdoc.engine.ruleset --compile`, and with it
ncdoc/engine/compiled_rules.py, the same rows as Python constants; the fast paths (`ncdoc check`)
read the bundled rules from that module (bytecode is cheaper to read than JSON), with no YAML import
and none of the pack validation. A rules folder given by path is read from its compiled.json. A test
fails when either is out of date.
"""

from __future__ import annotations

import os
import sys

from ncdoc.engine.rules import CHECKS, COMPILED_FIELDS, COMPILED_SCHEMA, DOC_FIELDS, Rule, runnable_checks
from ncdoc.errors import InputError, UsageError
from ncdoc.startup.json_load import load_file
from ncdoc.readers.numbers import is_digits

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any


# ---------------------------------------------------------------- the compiled file

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the ncdoc package


def rules_dir():
    """rules/ of this install (a Path): ncdoc.resources.data_dir("rules")."""
    from ncdoc.resources import data_dir
    return data_dir("rules")


def _rules_dir_fast() -> str:
    """The same folder as `rules_dir`, found with os.path only: the check path avoids pathlib.

    Mirrors ncdoc.resources.data_dir: the wheel layout (ncdoc/_bundled/rules) first, then the
    source/editable layout (rules/ beside the package).
    """
    for candidate in (os.path.join(_PKG, "_bundled", "rules"), os.path.join(os.path.dirname(_PKG), "rules")):
        if os.path.isdir(candidate):
            return candidate
    return str(rules_dir())          # raises the install error


_TUPLE_FIELDS = ("checks", "needs", "only_if_set", "aliases", "env_gate")   # lists in JSON, tuples in a Rule


def _rules_from_rows(fields: list, rows: list, docs) -> list[Rule]:
    """The Rules of compiled.json's rows (values in the order of `fields`), each filled in place: this runs
    for every rule on every check, so no Rule(**fields) with its generic __init__."""
    if tuple(fields) != COMPILED_FIELDS:
        raise ValueError("its rules are not rows of the fields this ncdoc reads")
    n = len(fields)
    base = {k: v for k, v in Rule.__record_defaults__.items() if k not in DOC_FIELDS}
    base["_docs"] = docs
    new = object.__new__
    out = []
    for row in rows:
        if type(row) is not list or len(row) != n:
            raise ValueError(f"a rule is not a row of {n} values")
        rule = new(Rule)
        d = rule.__dict__
        d.update(base)
        d.update(zip(fields, row))
        for name in _TUPLE_FIELDS:
            d[name] = tuple(d[name])
        pc = d["per_check"]
        if pc:
            d["per_check"] = {c: {k: tuple(v) for k, v in g.items()} for c, g in pc.items()}
        out.append(rule)
    return out


class _CompiledDocs:
    """compiled_docs.json, read when a rule's docs are first asked for: code -> the rule's docs fields."""

    def __init__(self, path: str):
        self.path = path
        self._docs: dict | None = None

    def __call__(self, code: str) -> dict[str, Any]:
        if self._docs is None:
            try:
                data = load_file(self.path)
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read the rules' docs ({exc}): run python -m ncdoc.engine.ruleset "
                                 "--compile", path=self.path) from None
            self._docs = data.get("docs", {}) if data.get("schema_version") == COMPILED_SCHEMA else {}
        d = self._docs.get(code)
        if d is None:
            raise InputError(f"no docs for {code}: run python -m ncdoc.engine.ruleset --compile", path=self.path)
        return {"summary": d["summary"], "why": d["why"], "references": tuple(d["references"]),
                "example": d["example"]}


def module_path() -> str:
    """ncdoc/engine/compiled_rules.py: the bundled rules as Python constants (see _bundled)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "compiled_rules.py")


def compiled_path(directory=None) -> str:
    return os.path.join(str(directory) if directory else _rules_dir_fast(), "compiled.json")


# ---------------------------------------------------------------- the registry

class RuleSet:
    """All rules by code, name and alias; the check-function modules they need."""

    def __init__(self, rules: list[Rule], check_modules: dict[str, str] | None = None):
        self.rules = tuple(sorted(rules, key=lambda r: r.code))
        self.check_modules = dict(check_modules or {})
        self._index: dict[str, Rule] = {}
        for r in self.rules:
            self._index[r.code] = r
            self._index[r.name] = r
            for a in r.aliases:
                self._index.setdefault(a, r)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def find(self, key: str) -> Rule | None:
        return self._index.get(key) or self._index.get(key.upper())

    def get(self, key: str) -> Rule:
        rule = self.find(key)
        if rule is None:
            hint = _close(key, list(self._index))
            raise UsageError(f"unknown rule {key!r}" + (f" (did you mean {hint}?)" if hint else ""))
        return rule

    def matching(self, token: str) -> list[Rule]:
        """Rules a --select/--ignore token names: ALL, a code prefix (NC1, NC10), a code, a name."""
        if token.upper() == "ALL":
            return list(self.rules)
        rule = self.find(token)
        if rule is not None:
            return [rule]
        t = token.upper()
        digits = t[2:]
        if t[:2] == "NC" and len(digits) <= 4 and (not digits or is_digits(digits)):   # NC\d{0,4}
            return [r for r in self.rules if r.code.startswith(t)]
        return []

    def ensure_checks(self, rules, ctx=None) -> set[str]:
        """Import the modules registering the checks `rules` use (given `ctx`: only those that will run
        on it, so a node check never imports the log checks); return the check names still missing."""
        if ctx is None:
            wanted = {c for r in rules for c in r.checks if c not in CHECKS}
        else:
            wanted = {c for c in runnable_checks(ctx, rules) if c not in CHECKS}
        for mod in sorted({self.check_modules.get(c, "") for c in wanted} - {""}):
            try:
                __import__(mod)          # not importlib.import_module: importlib is off the check path
            except ModuleNotFoundError as exc:
                if exc.name != mod:
                    raise
        missing = {c for c in wanted if c not in CHECKS}
        if missing:  # not in the compiled map (sources newer than compiled.json): import them all
            from ncdoc.checks import import_all
            import_all()
            missing = {c for c in wanted if c not in CHECKS}
        return missing


def _close(key: str, options: list[str]) -> str | None:
    import difflib
    m = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    return m[0] if m else None


_LOADED: dict = {}      # (directory, from_sources) -> RuleSet; not functools.lru_cache, off the check path


def load(directory: str | None = None, *, from_sources: bool = False) -> RuleSet:
    """The rule registry: compiled.json when present (fast), else the YAML sources. Loaded once."""
    key = (directory, from_sources)
    rs = _LOADED.get(key)
    if rs is None:
        rs = _LOADED[key] = _load(directory, from_sources)
    return rs


def _bundled() -> RuleSet | None:
    """The rules of this install from ncdoc/engine/compiled_rules.py (generated with compiled.json, the
    same rows as Python constants: the check path reads them from bytecode and fills each Rule with one
    dict update); None when that module is missing or of another layout (compiled.json is read then)."""
    try:
        from ncdoc.engine import compiled_rules as table
    except ImportError:
        return None
    if table.SCHEMA != COMPILED_SCHEMA or table.FIELDS != COMPILED_FIELDS:
        return None
    docs = _CompiledDocs(os.path.join(_rules_dir_fast(), "compiled_docs.json"))
    fields = table.FIELDS
    new = object.__new__
    rules = []
    for row in table.RULES:
        rule = new(Rule)
        d = rule.__dict__
        d.update(zip(fields, row))
        d["_docs"] = docs
        rules.append(rule)
    return RuleSet(rules, table.CHECKS)


def _load(directory: str | None, from_sources: bool) -> RuleSet:
    if directory is None and not from_sources:
        rs = _bundled()
        if rs is not None:
            return rs
    compiled = compiled_path(directory)
    if not from_sources and os.path.isfile(compiled):
        try:
            data = load_file(compiled)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", path=compiled) from None
        if data.get("schema_version") != COMPILED_SCHEMA:
            raise InputError("compiled rules have an unknown schema_version: run python -m ncdoc.engine.ruleset "
                             "--compile", path=compiled)
        docs = _CompiledDocs(os.path.join(os.path.dirname(compiled), "compiled_docs.json"))
        try:
            rules = _rules_from_rows(data["fields"], data["rules"], docs)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"compiled rules are malformed ({exc}): run python -m ncdoc.engine.ruleset --compile",
                             path=compiled) from None
        return RuleSet(rules, data.get("checks"))
    from ncdoc.engine.packs import load_sources
    return RuleSet(load_sources(directory))


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m ncdoc.engine.ruleset",
                                 description="Validate the rule packs and write rules/compiled.json.")
    ap.add_argument("--compile", action="store_true", help="write rules/compiled.json")
    ap.add_argument("--check", action="store_true", help="exit 1 when rules/compiled.json is out of date")
    args = ap.parse_args(argv)
    from ncdoc.engine.packs import compile_texts, compiled_module_text
    from ncdoc.errors import NcdocError
    try:
        texts = compile_texts()
    except NcdocError as exc:
        print(f"ncdoc: error: {exc}", file=sys.stderr)
        return 2
    folder = os.path.dirname(compiled_path())
    import json
    n = len(json.loads(texts["compiled.json"])["rules"])
    paths = {os.path.join(folder, name): text for name, text in texts.items()}
    paths[module_path()] = compiled_module_text(texts["compiled.json"])
    if args.check:
        stale = [path for path, text in paths.items() if not _same(path, text)]
        if stale:
            print(f"{', '.join(stale)} out of date: run python -m ncdoc.engine.ruleset --compile", file=sys.stderr)
            return 1
        return 0
    if args.compile:
        from ncdoc.readers.textfile import write_user_file
        for path, text in paths.items():
            write_user_file(path, text, "the compiled rules")
        print(f"wrote {', '.join(paths)} ({n} rules)", file=sys.stderr)
        return 0
    print(f"{n} rules valid", file=sys.stderr)
    return 0


def _same(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read() == text
    except OSError:
        return False

__all__ = ["COMPILED_SCHEMA", "rules_dir", "compiled_path", "module_path", "RuleSet", "load", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
