"""A stand-in ``tensorrt`` module generated from NVIDIA's API table, one per release.

Nothing here is hand-written TensorRT: every class, enum, member and function comes from
``tests/fixtures/tensorrt_python_api.tsv`` (extracted from NVIDIA's pybind11 sources per tag).
For release R:

- a name that is ``-`` at R does not exist: touching it raises AttributeError (and is recorded
  as ``missing``);
- keyword calls are checked against the recorded ``args`` of R (overloads, older signatures in
  brackets); a keyword the binding does not name is a TypeError, as in pybind;
- every attribute touch, set and call is recorded in :class:`Recorder`;
- values are inert: :class:`Inert` unless the call is a factory in :data:`RETURNS` (the one
  hand-kept table, since the TSV has no return types) or a test scripted it
  (``StandIn.script("ICudaEngine.num_io_tensors", 3)``). Scripts are inputs to the path, never
  asserted as results;
- trampoline classes (ILogger, IProgressMonitor, IInt8EntropyCalibrator2, IProfiler) subclass.

``IHostMemory`` derives from ``bytes`` (see :data:`BUFFER_CLASSES`): the real class exposes the
buffer protocol, which a Python 3.11 class cannot declare otherwise.
"""

from __future__ import annotations

import csv
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TSV = Path(__file__).resolve().parents[1] / "fixtures" / "tensorrt_python_api.tsv"
RELEASES = ("8.5.2", "8.6.1", "10.3.0", "10.13.3", "newest")
VERSIONS = {
    "8.5.2": "8.5.2.2",
    "8.6.1": "8.6.1.6",
    "10.3.0": "10.3.0.26",
    "10.13.3": "10.13.3.9",
    "newest": "11.1.0.106",
}

# What a factory returns (the TSV records no return types).
RETURNS = {
    "Builder.create_network": "INetworkDefinition",
    "Builder.create_builder_config": "IBuilderConfig",
    "Builder.create_optimization_profile": "IOptimizationProfile",
    "Builder.build_serialized_network": "IHostMemory",
    "IBuilderConfig.create_timing_cache": "ITimingCache",
    "IBuilderConfig.get_timing_cache": "ITimingCache",
    "ITimingCache.serialize": "IHostMemory",
    "INetworkDefinition.get_input": "ITensor",
    "Runtime.deserialize_cuda_engine": "ICudaEngine",
    "ICudaEngine.create_execution_context": "IExecutionContext",
    "ICudaEngine.create_execution_context_without_device_memory": "IExecutionContext",
}
BUFFER_CLASSES = {"IHostMemory": bytes}
ABSENT = object()


@dataclass(frozen=True)
class Row:
    module: str
    owner: str
    member: str
    kind: str
    args: str
    presence: dict[str, str]


def load_rows(path: Path = TSV) -> list[Row]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    rows = []
    for rec in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        rows.append(
            Row(
                rec["module"],
                rec["owner"],
                rec["member"],
                rec["kind"],
                rec["args"],
                {r: rec[r] for r in RELEASES},
            )
        )
    return rows


def kind_at(raw: str, release: str) -> str:
    """``readonly_property (property from 8.5.2; readonly_property from 10.3.0)`` at a release."""
    match = re.match(r"^(\w+) \((.*)\)$", raw)
    if not match:
        return raw
    kind = match.group(1)
    for part in match.group(2).split("; "):
        name, _, since = part.partition(" from ")
        if RELEASES.index(since) <= RELEASES.index(release):
            kind = name
    return kind


def overloads_at(raw: str, release: str) -> list[list[tuple[str, bool]]]:
    """Each overload's (name, has_default) list at ``release``; [[]] = no named arguments."""
    match = re.match(r"^(.*?)\s*(?:\[(.*)\])?$", raw)
    assert match
    current, older = match.group(1), match.group(2)
    signature = current
    for part in (older or "").split("; "):
        labels, _, sig = part.partition(": ")
        if release in labels.split(","):
            signature = sig
    if signature in ("", "()"):
        return [[]]
    return [
        [(n.rstrip("="), n.endswith("=")) for n in o.split(",")] for o in signature.split(" | ")
    ]


@dataclass
class Event:
    op: str  # get | set | call | missing
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
        self.module = self._module()

    # -- helpers for tests ---------------------------------------------------------------------
    def script(self, name: str, value: Any) -> None:
        """``value`` (or ``value(self, *args, **kwargs)`` when callable) answers ``name``."""
        self.scripts[name] = value

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

    def _answer(self, name: str, this: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in self.scripts:
            value = self.scripts[name]
            is_script = callable(value) and not isinstance(value, type | EnumValue)
            return value(this, *args, **kwargs) if is_script else value
        if name in RETURNS:
            return self._new(RETURNS[name])
        return Inert(name)

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
            standin._record("call", name, args, kwargs)
            return standin._answer(name, this, args, kwargs)

        return call

    def _class(self, qualname: str, row: Row) -> type:
        standin = self
        members = self.by_owner.get(qualname, {})
        namespace: dict[str, Any] = {"_standin_owner": qualname, "_standin_members": set(members)}
        index = 0
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
                namespace[member] = EnumValue(qualname, member, index)
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
                namespace[member] = _Property(self, full, member, kind == "readonly_property")
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


class _Property:
    def __init__(self, standin: StandIn, name: str, member: str, readonly: bool) -> None:
        self.standin, self.name, self.member, self.readonly = standin, name, member, readonly

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        values = obj.__dict__.get("_standin_values", {})
        if self.member in values:
            return values[self.member]
        return self.standin._answer(self.name, obj, (), {})

    def __set__(self, obj: Any, value: Any) -> None:
        if self.readonly:
            self.standin._record("missing", self.name)
            raise AttributeError(f"{self.name} is read-only at TensorRT {self.standin.release}")
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
