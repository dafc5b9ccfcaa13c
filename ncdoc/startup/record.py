"""Frozen records: what `@dataclass(frozen=True)` gives, without its import-time cost.

`ncdoc check` runs in every job script, and its budget is about twice the start-up of
an empty Python. The standard dataclass decorator compiles six methods per class with
exec() (about 1.2 ms a class here) and pulls in `inspect`; the Snapshot alone has ~20
classes. A record builds the same behaviour from generic methods instead: keyword or
positional construction, defaults and default factories, immutability, equality, hashing,
repr, `fields()`, `replace()` and `asdict()`.

Annotations stay strings (modules use `from __future__ import annotations`);
`field_types()` resolves them for the JSON loader.
"""

from __future__ import annotations

_MISSING = object()


class FrozenInstanceError(AttributeError):
    pass


class Field:
    __slots__ = ("name", "type", "default", "default_factory")

    def __init__(self, default=_MISSING, default_factory=_MISSING):
        self.name = ""
        self.type = ""
        self.default = default
        self.default_factory = default_factory

    def __repr__(self) -> str:
        return f"Field({self.name!r}: {self.type})"


def field(*, default=_MISSING, default_factory=_MISSING):
    return Field(default, default_factory)


def _init(self, *args, **kwargs):
    # Fill __dict__ directly: one dict update instead of a setattr per field keeps
    # building a Snapshot from JSON cheap (thousands of objects on a big node).
    cls = self.__class__
    names = cls.__record_names__
    d = self.__dict__
    d.update(cls.__record_defaults__)
    for name, factory in cls.__record_factories__:
        if name not in kwargs:
            d[name] = factory()
    if args:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, {len(args)} given")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for {name!r}")
            d[name] = value
    d.update(kwargs)
    if len(d) != len(names):
        extra = [k for k in kwargs if k not in cls.__record_index__]
        if extra:
            for k in extra:
                del d[k]
            raise TypeError(f"{cls.__name__}() got unexpected argument(s) {sorted(extra)}")
        missing = [n for n in names if n not in d]
        raise TypeError(f"{cls.__name__}() missing argument(s) {missing}")
    if cls.__record_post__:
        self.__post_init__()


def _values(self) -> tuple:
    return tuple(getattr(self, f.name) for f in self.__record_fields__)


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self):
    return hash(_values(self))


def _repr(self):
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__record_fields__)
    return f"{type(self).__name__}({inner})"


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _getstate(self):
    return _values(self)


def _setstate(self, state):
    for f, v in zip(self.__record_fields__, state):
        object.__setattr__(self, f.name, v)


class _DataclassFields:
    """`__dataclass_fields__`, built on first use, so `dataclasses.replace/fields/asdict`
    also work on records; the dataclasses module is imported only when someone asks. One
    descriptor serves every record class."""

    def __get__(self, obj, cls):
        import dataclasses
        built = {}
        for f in cls.__record_fields__:
            kw = {}
            if f.default is not _MISSING:
                kw["default"] = f.default
            if f.default_factory is not _MISSING:
                kw["default_factory"] = f.default_factory
            df = dataclasses.field(**kw)
            df.name, df.type = f.name, f.type
            df._field_type = dataclasses._FIELD
            built[f.name] = df
        return built


_new = object.__new__


_DATACLASS_FIELDS = _DataclassFields()


class Record:
    """A base for frozen record classes that gives them the generic methods by inheritance:

        @record(frozen=True)
        class Port(Record): ...

    does what `@record(frozen=True)` does on a plain class, without the decorator setting eight methods
    on the class, each of which makes Python update the class's slots (about a third of the decorator's
    cost, and the modules on the check path define some forty record classes)."""

    __init__ = _init
    __eq__ = _eq
    __hash__ = _hash
    __repr__ = _repr
    __getstate__ = _getstate
    __setstate__ = _setstate
    __setattr__ = _frozen_setattr
    __delattr__ = _frozen_delattr


def record(cls=None, /, *, frozen: bool = True, **_ignored):
    """Class decorator; usable bare or as `@record(frozen=True)` like `@dataclass`."""
    def wrap(c):
        ns = c.__dict__
        by_name = {f.name: f for f in getattr(c, "__record_fields__", ())}
        for name, tp in ns.get("__annotations__", {}).items():
            if tp.__class__ is str and tp[:8] == "ClassVar":
                continue
            value = ns.get(name, _MISSING)
            if value.__class__ is Field:
                f = value
                f.name, f.type = name, tp
                # a Field left on the class would shadow instance lookups of the default
                if f.default is _MISSING:
                    delattr(c, name)
                else:
                    setattr(c, name, f.default)
            else:
                # Field(value) with its name and type, made without Field.__init__'s keyword handling
                # nor a call: the decorator makes one per field of every record class at import
                # (some 250 on the check path)
                f = _new(Field)
                f.name, f.type, f.default, f.default_factory = name, tp, value, _MISSING
            by_name[name] = f
        # one pass over the fields for what every instance needs: a decorator runs for every record
        # class at import, some forty of them on the check path
        names = tuple(by_name)
        defaults: dict = {}
        factories = []
        for f in by_name.values():
            if f.default is not _MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is not _MISSING:
                factories.append((f.name, f.default_factory))
        c.__record_fields__ = tuple(by_name.values())
        c.__record_names__ = names
        c.__record_index__ = frozenset(names)
        c.__record_defaults__ = defaults
        c.__record_factories__ = tuple(factories)
        c.__match_args__ = names
        # asked once here, not per instance: a failed attribute lookup costs a caught exception,
        # and a snapshot builds thousands of records
        c.__record_post__ = hasattr(c, "__post_init__")
        c.__dataclass_fields__ = _DATACLASS_FIELDS
        if not (frozen and issubclass(c, Record)):     # a Record has them all (see Record)
            if issubclass(c, Record):
                raise TypeError(f"{c.__name__}: a Record is frozen; use a plain class for @record(frozen=False)")
            c.__init__ = _init
            c.__eq__ = _eq
            c.__hash__ = _hash
            c.__repr__ = _repr
            c.__getstate__ = _getstate
            c.__setstate__ = _setstate
            if frozen:
                c.__setattr__ = _frozen_setattr
                c.__delattr__ = _frozen_delattr
        return c
    return wrap if cls is None else wrap(cls)


def build(cls, values: dict):
    """`cls(**values)` for loaders that build thousands of records from already checked field
    names: it fills the instance directly, without the generic argument handling of __init__.
    Missing fields take their defaults; when one has none, cls(**values) raises as usual."""
    if cls.__record_post__:
        return cls(**values)
    obj = object.__new__(cls)
    d = obj.__dict__
    d.update(cls.__record_defaults__)
    for name, factory in cls.__record_factories__:
        if name not in values:
            d[name] = factory()
    d.update(values)
    if len(d) != len(cls.__record_names__):
        return cls(**values)
    return obj


def is_record(obj) -> bool:
    return hasattr(obj, "__record_fields__")


def fields(obj) -> tuple[Field, ...]:
    return obj.__record_fields__


def replace(obj, **changes):
    values = {f.name: getattr(obj, f.name) for f in obj.__record_fields__}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field(s) {sorted(unknown)}")
    values.update(changes)
    return type(obj)(**values)


def asdict(obj):
    """Recursively turn records, tuples, lists and dicts into JSON-ready values."""
    if hasattr(obj, "__record_fields__"):
        return {f.name: asdict(getattr(obj, f.name)) for f in obj.__record_fields__}
    if isinstance(obj, (tuple, list)):
        return [asdict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): asdict(v) for k, v in obj.items()}
    return obj
