"""Regular expressions without compiling them: each process reads the regex engine's code for ncdoc's
patterns from a table made in advance, as Python reads a module's bytecode from its .pyc.

A triage of a 1 MB log compiles some fifty patterns, a tenth of the whole run (52M of 476M instructions
at 64 ranks): `re.compile` parses and compiles each in Python before `_sre` gets its code. The code is
a pure function of the pattern, its flags and the interpreter's regex engine, so it is computed once,
by `python -m ncdoc.startup.compiled_patterns --write` (once per CPython minor version, each into
`compiled_patterns_<cache tag>.py`; without --write it says whether the table is current), and
`compiled(pattern, flags)` hands it to `_sre.compile`, the call `re.compile` itself ends with. The
pattern object is re.compile's, to the code (Pattern objects compare their code:
tests/startup/test_compiled_patterns.py requires `==` for every entry).

What keeps it safe: a table is used only by the engine it was made for (the cache tag and `_sre`'s
MAGIC, CODESIZE, MAXREPEAT and MAXGROUPS); a pattern is looked up by its exact text and flags, so a
changed pattern is a miss; `_sre.compile` validates the code it is given; and every miss or refusal
is `re.compile`. So a stale or absent table costs time, never a different answer (a test fails on a
stale one for the Python it runs under).

Which patterns: those given to `lazy()` (ncdoc.evidence.lazy_re), to `precompiled()` (a module-level
re.compile) and to `register()` (patterns compiled later, such as the detection signs): every module
under ncdoc is imported when the tables are written, and what they registered is what the table holds.
"""

from __future__ import annotations

import sys

# (pattern, flags) of every pattern registered at import, in order (what --write compiles)
REGISTERED: list = []
_TABLE: dict | None = None


def register(pattern, flags=0) -> None:
    """Name a pattern the tables should hold (one compiled after import, or through `lazy`)."""
    REGISTERED.append((pattern, int(flags)))


def precompiled(pattern, flags=0):
    """A module's pattern: registered for the tables, then compiled (the call that stands for a module-level
    re.compile)."""
    register(pattern, flags)
    return compiled(pattern, flags)


def compiled(pattern, flags=0):
    """re.compile(pattern, flags), from the table when it holds the pattern."""
    flags = int(flags)
    if _TABLE is None:
        _load()
    entry = _TABLE.get((pattern, flags))
    if entry is not None:
        try:
            import _sre
            final, groups, groupindex, indexgroup, code = entry
            return _sre.compile(pattern, final, _words(code), groups, dict(groupindex), indexgroup)
        except Exception:       # noqa: BLE001 - an entry of another shape, or code _sre refuses: compile it
            pass
    import re
    return re.compile(pattern, flags)


def engine_key() -> tuple:
    """What a table's code is valid for: this interpreter's cache tag and regex engine."""
    import _sre
    return (sys.implementation.cache_tag, _sre.MAGIC, _sre.CODESIZE, _sre.MAXREPEAT, _sre.MAXGROUPS)


def table_module() -> str:
    """The module holding this interpreter's table: compiled_patterns_cpython_311 for CPython 3.11."""
    return "ncdoc.startup.compiled_patterns_" + sys.implementation.cache_tag.replace("-", "_")


def _words(code: str) -> list:
    """An entry's code words: base64 of zlib of little-endian 32-bit words (each entry on its own, so a run
    decodes only the patterns it uses)."""
    import zlib
    from binascii import a2b_base64
    words = memoryview(zlib.decompress(a2b_base64(code))).cast("I")
    if words.itemsize != 4 or sys.byteorder != "little":
        raise ValueError("the table's words are little-endian 32-bit")
    return words.tolist()


def _load() -> None:
    """The table for this interpreter, or an empty one (then every pattern is compiled). The table module is
    constants only: its pyc unmarshals them, and nothing is built but the one dict."""
    global _TABLE
    table: dict = {}
    try:
        mod = __import__(table_module(), fromlist=["KEY"])
        if mod.KEY == engine_key():
            table = dict(zip(mod.KEYS, mod.VALUES))
    except Exception:      # noqa: BLE001 - no table for this Python, or a damaged one: compile instead
        table = {}
    _TABLE = table


def reset() -> None:
    """Forget the loaded table (for tests)."""
    global _TABLE
    _TABLE = None


# ---------------------------------------------------------------- writing the tables

def code_of(pattern, flags: int) -> tuple:
    """(final flags, code words, groups, groupindex, indexgroup) as re.compile hands them to _sre.compile."""
    try:
        from re import _compiler as compiler, _parser as parser      # 3.11 and newer
    except ImportError:
        import sre_compile as compiler                                # 3.10
        import sre_parse as parser
    p = parser.parse(pattern, flags)
    code = compiler._code(p, flags)
    groupindex = dict(p.state.groupdict)
    indexgroup = [None] * p.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return flags | p.state.flags, list(code), p.state.groups - 1, groupindex, tuple(indexgroup)


def collect() -> tuple[list, list]:
    """Every pattern ncdoc's modules register when imported, and the modules that would not import (those
    needing an optional package: their patterns are compiled where they run)."""
    import importlib
    import pkgutil

    import ncdoc
    failed = []
    for info in pkgutil.walk_packages(ncdoc.__path__, "ncdoc."):
        if info.name.startswith("ncdoc.startup.compiled_patterns") or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:       # noqa: BLE001 - reported, not fatal
            failed.append(info.name)
    return list(dict.fromkeys(REGISTERED)), failed


def problems() -> list[str]:
    """What is wrong with this interpreter's table: registered patterns it lacks or holds other code for,
    and (when every module imported) entries no module registers any more. Empty when it is current."""
    import re
    patterns, failed = collect()
    reset()
    _load()
    out = []
    if not _TABLE:
        return [f"no table for {sys.implementation.cache_tag}, or one that does not load "
                "(python -m ncdoc.startup.compiled_patterns --write)"]
    for pattern, flags in patterns:
        if (pattern, flags) not in _TABLE:
            out.append(f"missing: {pattern!r} (flags {flags})")
        elif compiled(pattern, flags) != re.compile(pattern, flags):
            out.append(f"other code: {pattern!r} (flags {flags})")
    if not failed:
        out += [f"no longer registered: {k[0]!r} (flags {k[1]})" for k in set(_TABLE) - set(patterns)]
    return out


def render(patterns: list) -> str:
    """The table module's text for this interpreter (code words as little-endian 32-bit unsigned ints)."""
    import re
    import struct
    import zlib
    from binascii import b2a_base64
    import _sre

    keys, values = [], []
    for pattern, flags in patterns:
        final, code, groups, groupindex, indexgroup = code_of(pattern, flags)
        if _sre.compile(pattern, final, code, groups, groupindex, indexgroup) != re.compile(pattern, flags):
            raise AssertionError(f"code differs from re.compile's for {pattern!r}")
        blob = b2a_base64(zlib.compress(struct.pack(f"<{len(code)}I", *code), 9), newline=False).decode()
        keys.append((pattern, flags))
        values.append((final, groups, tuple(groupindex.items()), indexgroup, blob))
    lines = [
        f'"""The regex engine\'s code for ncdoc\'s patterns under {sys.implementation.cache_tag}. GENERATED by',
        "`python -m ncdoc.startup.compiled_patterns --write`: do not edit (a test fails when it is out of date).",
        "",
        "KEYS[i] is a pattern and its flags; VALUES[i] what _sre.compile takes besides the pattern: flags, groups,",
        "group names, names by index, and the code (base64 of zlib of little-endian 32-bit words).",
        '"""',
        "",
        f"KEY = {engine_key()!r}",
        "KEYS = (",
        *(f"    {k!r}," for k in keys),
        ")",
        "VALUES = (",
        *(f"    {v!r}," for v in values),
        ")",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import os
    from pathlib import Path

    ap = argparse.ArgumentParser(prog="python -m ncdoc.startup.compiled_patterns",
                                 description="Write, or check, this interpreter's table of compiled patterns "
                                             "(run it under each CPython ncdoc supports; install ncdoc's "
                                             "dependencies first, or the modules needing them are left out).")
    ap.add_argument("--write", action="store_true", help="write the table module for this interpreter")
    args = ap.parse_args(argv)
    if not args.write:
        found = problems()
        print("\n".join(found) if found else f"{table_module()}: current")
        return 1 if found else 0
    patterns, failed = collect()
    path = Path(__file__).with_name(table_module().rsplit(".", 1)[1] + ".py")
    text = render(patterns)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    print(f"wrote {path} ({len(patterns)} patterns, {len(text):,} bytes)")
    if failed:
        print(f"left out (would not import): {', '.join(failed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # (the importable module, not this __main__ copy: REGISTERED is filled in that one)
    from ncdoc.startup.compiled_patterns import main as _main
    sys.exit(_main())
