"""Imports of ncdoc's own modules with less of importlib's general machinery, for `ncdoc check`.

`ncdoc check` imports some forty ncdoc modules, and Python's path finder and source loader spend
about three times what a module's bytecode costs to run on finding and validating each one (a
directory check, spec building, path arithmetic, the pyc's header parsed in Python): about a
seventh of the check's whole time. `install()` puts a finder in front of sys.meta_path that takes
only the plain case, a submodule of ncdoc that is a `.py` file (or a package with an `__init__.py`)
in its parent package's one directory, with nothing of the same name that Python would prefer (an
extension module, a package directory). Its loader is importlib's own SourceFileLoader, so the
modules are what a normal import makes of them (`__spec__`, `__file__`, `__cached__`, `__path__`,
get_source, reload, importlib.resources); only the code is read faster when the pyc beside the
source is current, by the same test the source loader makes (a timestamp pyc of this Python whose
recorded mtime and size are the source's). Anything else (a stale or missing pyc, a hash-based pyc,
PYTHONPYCACHEPREFIX, -O) goes to the standard code path of the same loader, or to the standard
finders: the finder is not installed at all when the pyc location is not the plain one.
"""

import sys

_external = sys.modules.get("_frozen_importlib_external")      # importlib._bootstrap_external, at start-up
_bootstrap = sys.modules.get("_frozen_importlib")


def _plain_pycs() -> bool:
    """Whether pycs are where and as the fast path reads them: __pycache__/<name>.<tag>.pyc."""
    return (_external is not None and _bootstrap is not None and "_imp" in sys.modules and sys.pycache_prefix is None
            and not sys.flags.optimize and sys.implementation.cache_tag is not None
            and hasattr(_external, "SourceFileLoader") and hasattr(_external, "MAGIC_NUMBER"))


if _plain_pycs():
    from marshal import loads as _loads
    import os
    from os import close as _close, fstat as _fstat, listdir as _listdir, open as _open, read as _read, stat as _stat

    _O_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)

    _MAGIC = _external.MAGIC_NUMBER
    _PYC = "." + sys.implementation.cache_tag + ".pyc"
    _EXTENSIONS = tuple(_external.EXTENSION_SUFFIXES)
    _ModuleSpec = _bootstrap.ModuleSpec
    _CodeType = type(_plain_pycs.__code__)
    _fix_co_filename = sys.modules["_imp"]._fix_co_filename

    class _Loader(_external.SourceFileLoader):
        """SourceFileLoader whose get_code reads a current pyc in one step (else does what it always does)."""

        def get_code(self, fullname):
            try:
                st = _stat(self.path)
                fd = _open(self.pyc, _O_FLAGS)       # not open(): a file object costs more than the read
                try:
                    size = _fstat(fd).st_size
                    data = _read(fd, size)
                finally:
                    _close(fd)
            except OSError:
                return super().get_code(fullname)
            if len(data) != size:
                return super().get_code(fullname)
            if (data[:4] == _MAGIC and data[4:8] == b"\0\0\0\0"       # a timestamp pyc of this Python
                    and int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                    and int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF):
                try:
                    code = _loads(memoryview(data)[16:])
                except (EOFError, ValueError, TypeError):
                    code = None
                if type(code) is _CodeType:
                    _fix_co_filename(code, self.path)     # as importlib does: the source's path, wherever compiled
                    return code
            return super().get_code(fullname)           # (which also says what is wrong with a bad pyc)

    class _Finder:
        """sys.meta_path finder for plain ncdoc submodules (see the module's note); None for anything else."""

        _listings: dict = {}

        @classmethod
        def invalidate_caches(cls) -> None:
            cls._listings.clear()

        @classmethod
        def _names(cls, directory: str):
            names = cls._listings.get(directory)
            if names is None:
                try:
                    names = cls._listings[directory] = frozenset(_listdir(directory))
                except OSError:
                    return None
            return names

        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if path is None or fullname[:6] != "ncdoc." or len(path) != 1 or target is not None:
                return None
            directory = path[0]
            if type(directory) is not str or directory[:1] != "/":
                return None
            names = cls._names(directory)
            if names is None:
                return None
            tail = fullname.rpartition(".")[2]
            for suffix in _EXTENSIONS:
                if tail + suffix in names:
                    return None
            if tail in names:                             # a package (or a directory Python would look into)
                inner = f"{directory}/{tail}"
                sub = cls._names(inner)
                if sub is None or "__init__.py" not in sub or any("__init__" + s in sub for s in _EXTENSIONS):
                    return None
                origin, locations = inner + "/__init__.py", [inner]
            elif tail + ".py" in names:
                origin, locations = f"{directory}/{tail}.py", None
            else:
                return None
            loader = _Loader(fullname, origin)
            head, _, name = origin.rpartition("/")
            loader.pyc = f"{head}/__pycache__/{name[:-3]}{_PYC}"
            spec = _ModuleSpec(fullname, loader, origin=origin, is_package=locations is not None)
            if locations is not None:
                spec.submodule_search_locations = locations
            spec.cached = loader.pyc
            spec.has_location = True
            return spec


def install() -> None:
    """Put the finder first in sys.meta_path (once); nothing where pycs are not in the plain place."""
    if not _plain_pycs():
        return
    if not any(f is _Finder for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder)


__all__ = ["install"]
