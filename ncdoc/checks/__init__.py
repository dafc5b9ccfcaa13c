"""Check functions: the rules that need logic, registered with `ncdoc.engine.rules.check`.

Each module here registers its functions at import. The registry (ncdoc.engine.ruleset) imports
only the modules whose checks will run, using the map compiled into rules/compiled.json;
`import_all` imports every module of this package (compiling, tests, and sources newer than
compiled.json). What a check needs (facts, a variable set) is declared with its rule in
rules/*.yaml, not here.
"""

from __future__ import annotations


def modules() -> list[str]:
    """Every module of this package, by name: the package's own listing, no list to keep."""
    import pkgutil
    return [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if not m.ispkg]


def import_all() -> list[str]:
    """Import every check module; return their names."""
    import importlib
    names = modules()
    for name in names:
        importlib.import_module(name)
    return names
