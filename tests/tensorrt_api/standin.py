"""A stand-in ``tensorrt`` module generated from NVIDIA's API table, one per release.

Nothing here is hand-written TensorRT: every class, enum, member and function comes from
``tests/fixtures/tensorrt_python_api.tsv`` (extracted from NVIDIA's pybind11 sources per tag).
For release R:

- a name that is ``-`` at R does not exist: touching it raises AttributeError (and is recorded
  as ``missing``);
- keyword calls are checked against the recorded ``args`` of R (overloads, older signatures in
  brackets); a keyword the binding does not name is a TypeError, as in pybind;
- every attribute touch, set and call is recorded in :class:`Recorder`;
- argument types are checked against the recorded ``types`` of R (:mod:`.standin_types`): a
  value pybind11 would not convert (``set_memory_pool_limit("WORKSPACE", "1GiB")``) is a
  TypeError with pybind11's words, "incompatible function arguments"; so is a property set;
- results have the declared kind: True for a bool, 0 for an int, a new instance for a class,
  None for void, :class:`Inert` where the table has no kind; unless a test scripted the answer
  (``StandIn.script("ICudaEngine.num_io_tensors", 3)``) or a failure
  (``StandIn.script_failure("IExecutionContext.execute_async_v3")``: False, None or -1, what
  NVIDIA's binding answers when TensorRT fails). Scripts are inputs to the path, never asserted
  as results;
- enum values carry NVIDIA's numbers from the C++ declarations (the ``value`` column; the
  declaration index only where no header of that tag declares the enum);
- trampoline classes (ILogger, IProgressMonitor, IInt8EntropyCalibrator2, IProfiler) subclass.

Reading the table is :mod:`.standin_table`'s (names re-exported here), the kinds of arguments
and results :mod:`.standin_types`'s.

``IHostMemory`` derives from ``bytes`` (see :data:`BUFFER_CLASSES`): the real class exposes the
buffer protocol, which a Python 3.11 class cannot declare otherwise.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.tensorrt_api import standin_types as kinds
from tests.tensorrt_api.standin_table import (
    RELEASES,
    TSV,
    VERSIONS,
    Row,
    kind_at,
    load_rows,
    overloads_at,
)

__all__ = ["RELEASES", "TSV", "VERSIONS", "Row", "StandIn", "kind_at", "load_rows", "overloads_at"]

BUFFER_CLASSES = {"IHostMemory": bytes}
ABSENT = object()


@dataclass
class Event:
    op: str  # get | set | call | missing | refused (a wrong argument type)
    name: str  # Owner.member
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def touched(self, name: str) -> bool:
        return any(e.name == name for e in self.events)

    def calls(self, name: str) -> list[Event]:
        return [e for e in self.events if e.op == "call" and e.name == name]

    def sets(self, name: str) -> list[Event]:
        return [e for e in self.events if e.op == "set" and e.name == name]

    def names(self) -> set[str]:
        return {e.name for e in self.events}


class Inert:
    """A value nobody scripted: printable, truthy, and nothing else."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def __repr__(self) -> str:
        return f"<inert {self.origin}>"


class EnumValue:
    def __init__(self, owner: str, name: str, index: int) -> None:
        self.owner, self.name, self.value = owner, name, index

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnumValue) and (other.owner, other.name) == (self.owner, self.name)

    def __hash__(self) -> int:
        return hash((self.owner, self.name))

    def __repr__(self) -> str:
        return f"<{self.owner}.{self.name}: {self.value}>"


class StandIn:
    """The generated module of one release (``.module``) with its recorder and scripts."""

    def __init__(self, release: str, rows: list[Row] | None = None) -> None:
        self.release = release
        self.recorder = Recorder()
        self.scripts: dict[str, Any] = {}
        self.rows = rows if rows is not None else load_rows()
        self.by_owner: dict[str, dict[str, Row]] = {}
        for row in self.rows:
            self.by_owner.setdefault(row.owner, {})[row.member] = row
        self.classes: dict[str, type] = {}
        self.enums: set[str] = set()
        self.module = self._module()

    # -- helpers for tests ---------------------------------------------------------------------
    def script(self, name: str, value: Any) -> None:
        """``value`` (or ``value(self, *args, **kwargs)`` when callable) answers ``name``."""
        self.scripts[name] = value

    def script_failure(self, name: str, value: Any = ABSENT) -> Any:
        """``name`` answers what NVIDIA's binding answers when TensorRT fails: False for a bool,
        None for a pointer, -1 for an int (``value`` overrides). KeyError where ``name`` has no
        typed result at this release, so a failure can only be scripted where it can happen."""
        if value is ABSENT:
            sigs = self.signatures(name)
            if not sigs:
                raise KeyError(f"{name} has no typed result at TensorRT {self.release}")
            value = kinds.failure_value(sigs[0].returns)
        self.scripts[name] = _Failure(value)
        return value

    def signatures(self, name: str) -> list[kinds.Signature]:
        owner, _, member = name.rpartition(".")
        row = self.by_owner.get(owner or "-", {}).get(member)
        if row is None or row.presence[self.release] == "-":
            return []
        return kinds.signatures(row.types, self.release)

    def make(self, cls: str, **values: Any) -> Any:
        """An instance of generated class ``cls`` whose properties answer ``values``."""
        obj = self._new(cls)
        obj.__dict__["_standin_values"].update(values)
        return obj

    def present(self, owner: str, member: str) -> bool:
        row = self.by_owner.get(owner, {}).get(member)
        return row is not None and row.presence[self.release] != "-"

    def deprecated_names(self) -> set[str]:
        return {
            f"{r.owner}.{r.member}" if r.owner != "-" else r.member
            for r in self.rows
            if r.presence[self.release] == "d"
        }

    # -- generation ----------------------------------------------------------------------------
    def _record(self, op: str, name: str, args: tuple[Any, ...] = (), kwargs: Any = None) -> None:
        self.recorder.events.append(Event(op, name, args, dict(kwargs or {})))

    def _answer(
        self,
        name: str,
        this: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        returns: str | None = None,
    ) -> Any:
        if name in self.scripts:
            value = self.scripts[name]
            if isinstance(value, _Failure):
                return value.value
            is_script = callable(value) and not isinstance(value, type | EnumValue)
            return value(this, *args, **kwargs) if is_script else value
        return self._default(name, returns)

    def _default(self, name: str, returns: str | None) -> Any:
        """A value of the declared kind: success, nothing anyone asserts as a result."""
        kind = (returns or "").rstrip("?")
        simple = {"bool": True, "int": 0, "float": 0.0, "str": "", "bytes": b"", "None": None}
        if kind in simple:
            return simple[kind]
        if kind.startswith("seq<") or kind == "list":
            return []
        if kind in self.classes and kind not in self.enums:
            return self._new(kind)
        return Inert(name)

    def _is_a(self, kind: str, value: Any) -> bool | None:
        """Is ``value`` an instance of bound class/enum ``kind`` (bases and pybind11's implicit
        conversions included)? None where ``kind`` is not bound at this release."""
        if kind in self.enums:
            return isinstance(value, EnumValue) and value.owner == kind
        if kind not in self.classes:
            return None
        row = self._type_row(kind)
        _, implicit = kinds.class_facts(row.types, self.release) if row else ([], [])
        if any(kinds.accepts(k, value, self._is_a) for k in implicit):
            return True
        generated = next((c for c in type(value).__mro__ if "_standin_owner" in c.__dict__), None)
        return generated is not None and self._derives(generated._standin_owner, kind)

    def _derives(self, owner: str, kind: str) -> bool:
        if owner == kind:
            return True
        row = self._type_row(owner)
        bases, _ = kinds.class_facts(row.types, self.release) if row else ([], [])
        return any(self._derives(b, kind) for b in bases)

    def _type_row(self, qualname: str) -> Row | None:
        owner, _, member = qualname.rpartition(".")
        return self.by_owner.get(owner or "-", {}).get(member)

    def _check_types(
        self, name: str, row: Row, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str | None:
        """The declared result kind of the overload that takes this call (None: untyped);
        TypeError as pybind11's when none does."""
        sigs = kinds.signatures(row.types, self.release)
        if not sigs:
            return None
        match = kinds.first_match(sigs, args, kwargs, self._is_a)
        if match is None:
            self._record("refused", name, args, kwargs)
            raise TypeError(kinds.incompatible(name.rsplit(".", 1)[-1], sigs, args, kwargs))
        return match.returns

    def _new(self, cls_name: str) -> Any:
        cls = self.classes[cls_name]
        base = BUFFER_CLASSES.get(cls_name)
        obj: Any = (
            base.__new__(cls, b"standin " + cls_name.encode()) if base else object.__new__(cls)
        )
        object.__setattr__(obj, "_standin_values", {})
        return obj

    def _check_args(
        self, name: str, raw: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        errors = []
        for overload in overloads_at(raw, self.release):
            names = [n for n, _ in overload]
            if not overload:
                if not kwargs:
                    return
                errors.append("no named arguments")
                continue
            if len(args) > len(names):
                errors.append(f"at most {len(names)} arguments")
                continue
            rest = names[len(args) :]
            required = [n for n, d in overload[len(args) :] if not d]
            if set(kwargs) <= set(rest) and set(required) <= set(kwargs):
                return
            errors.append(f"({', '.join(names)})")
        raise TypeError(
            f"{name}(): incompatible arguments {args} {kwargs} at TensorRT "
            f"{self.release}; accepts {' or '.join(errors)}"
        )

    def _function(self, name: str, row: Row) -> Callable[..., Any]:
        standin = self

        def call(this: Any, *args: Any, **kwargs: Any) -> Any:
            standin._check_args(name, row.args, args, kwargs)
            returns = standin._check_types(name, row, args, kwargs)
            standin._record("call", name, args, kwargs)
            return standin._answer(name, this, args, kwargs, returns)

        return call

    def _class(self, qualname: str, row: Row) -> type:
        standin = self
        members = self.by_owner.get(qualname, {})
        namespace: dict[str, Any] = {"_standin_owner": qualname, "_standin_members": set(members)}
        index = 0
        if kind_at(row.kind, self.release) == "enum":
            self.enums.add(qualname)
        for member, mrow in members.items():
            if mrow.presence[self.release] == "-" or (
                member.startswith("__") and member != "__init__"
            ):
                continue
            kind = kind_at(mrow.kind, self.release)
            full = f"{qualname}.{member}"
            if kind in ("class", "enum"):
                namespace[member] = self._class(full, mrow)
            elif kind == "enum_value":
                number = kinds.at_release(mrow.value, self.release)
                namespace[member] = EnumValue(qualname, member, int(number) if number else index)
                index += 1
            elif kind == "constructor":
                init = self._function(full, mrow)

                def __init__(this: Any, *args: Any, _init: Any = init, **kwargs: Any) -> None:
                    if "_standin_values" not in this.__dict__:
                        object.__setattr__(this, "_standin_values", {})
                    _init(this, *args, **kwargs)

                namespace["__init__"] = __init__
            elif kind in ("method", "callback", "function"):
                namespace[member] = self._function(full, mrow)
            elif kind in ("property", "readonly_property"):
                sigs = kinds.signatures(mrow.types, self.release)
                namespace[member] = _Property(
                    self, full, member, kind == "readonly_property", sigs[0] if sigs else None
                )
            else:
                namespace[member] = Inert(full)
        bases: tuple[type, ...] = (_Base,)
        if qualname in BUFFER_CLASSES:
            bases = (BUFFER_CLASSES[qualname], _Base)
        namespace["_standin"] = standin
        cls = _Meta(qualname.rsplit(".", 1)[-1], bases, namespace)
        self.classes[qualname] = cls
        return cls

    def _module(self) -> types.ModuleType:
        module = _Module("tensorrt")
        object.__setattr__(module, "_standin", self)
        top = self.by_owner.get("-", {})
        object.__setattr__(module, "_standin_members", set(top))
        for member, row in top.items():
            if row.presence[self.release] == "-" or row.module == "tensorrt.plugin":
                continue
            kind = kind_at(row.kind, self.release)
            if kind in ("class", "enum"):
                value: Any = self._class(member, row)
            elif kind == "function":
                fn = self._function(member, row)
                value = lambda *a, _fn=fn, **k: _fn(None, *a, **k)  # noqa: E731
            elif member == "__version__":
                value = VERSIONS[self.release]
            else:
                value = Inert(member)
            object.__setattr__(module, member, value)
        return module


class _Meta(type):
    def __getattribute__(cls, name: str) -> Any:
        if not name.startswith("_") and name in type.__getattribute__(cls, "_standin_members"):
            owner = type.__getattribute__(cls, "_standin_owner")
            type.__getattribute__(cls, "_standin")._record("get", f"{owner}.{name}")
        return type.__getattribute__(cls, name)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        owner = type.__getattribute__(cls, "_standin_owner")
        standin = type.__getattribute__(cls, "_standin")
        standin._record("missing", f"{owner}.{name}")
        raise AttributeError(
            f"type object '{owner}' has no attribute '{name}' (TensorRT {standin.release})"
        )


class _Base:
    _standin: StandIn
    _standin_owner: str
    _standin_members: set[str]

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            cls = type(self)
            if name in cls._standin_members and name not in object.__getattribute__(
                self, "__dict__"
            ):
                cls._standin._record("get", f"{cls._standin_owner}.{name}")
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        cls = type(self)
        if name.startswith("_"):
            raise AttributeError(name)
        cls._standin._record("missing", f"{cls._standin_owner}.{name}")
        raise AttributeError(
            f"'{cls._standin_owner}' object has no attribute '{name}' "
            f"(TensorRT {cls._standin.release})"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        for klass in cls.__mro__:
            if isinstance(klass.__dict__.get(name), _Property):
                klass.__dict__[name].__set__(self, value)
                return
            if "_standin_owner" in klass.__dict__:
                break  # reached the generated class: user subclasses keep a __dict__
        if "_standin_owner" in cls.__dict__:
            cls._standin._record("missing", f"{cls._standin_owner}.{name}")
            raise AttributeError(
                f"'{cls._standin_owner}' object has no attribute '{name}' "
                f"(TensorRT {cls._standin.release})"
            )
        object.__setattr__(self, name, value)


class _Failure:
    """A scripted failure: the value itself answers, even when it is callable."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _Property:
    def __init__(
        self,
        standin: StandIn,
        name: str,
        member: str,
        readonly: bool,
        sig: kinds.Signature | None = None,
    ) -> None:
        self.standin, self.name, self.member, self.readonly = standin, name, member, readonly
        self.sig = sig

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        values = obj.__dict__.get("_standin_values", {})
        if self.member in values:
            return values[self.member]
        returns = self.sig.returns if self.sig else None
        return self.standin._answer(self.name, obj, (), {}, returns)

    def __set__(self, obj: Any, value: Any) -> None:
        if self.readonly:
            self.standin._record("missing", self.name)
            raise AttributeError(f"{self.name} is read-only at TensorRT {self.standin.release}")
        if self.sig and self.sig.params:
            kind = self.sig.params[0].kind
            if not kinds.accepts(kind, value, self.standin._is_a):
                self.standin._record("refused", self.name, (value,))
                raise TypeError(
                    f"(): incompatible function arguments. The following argument types are "
                    f"supported:\n    1. ({self.member}: {kind}) -> None\n\n"
                    f"Invoked with: {value!r} (setting {self.name})"
                )
        self.standin._record("set", self.name, (value,))
        obj.__dict__.setdefault("_standin_values", {})[self.member] = value


class _Module(types.ModuleType):
    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name in object.__getattribute__(self, "_standin_members"):
            object.__getattribute__(self, "_standin")._record("get", name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        standin = object.__getattribute__(self, "_standin")
        standin._record("missing", name)
        raise AttributeError(
            f"module 'tensorrt' has no attribute '{name}' (TensorRT {standin.release})"
        )
