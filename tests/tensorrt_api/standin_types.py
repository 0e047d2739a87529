"""Argument and result kinds of the stand-in, from the ``types`` column of the API table.

A signature reads ``(name:str?, memory:int) -> bool``; overloads are separated by `` | `` and
older differing signatures follow in brackets, as in the ``args`` column. A kind is what pybind11
takes or gives for the C++ type (see the generator's header): ``int``, ``float``, ``bool``,
``str``, ``bytes``, ``buffer``, ``array``, ``seq<K>``, ``list``, ``tuple``, ``dict``,
``callable``, ``iterable``, ``any``, ``None``, or a bound class/enum name; ``K?`` also takes
None. :func:`accepts` answers whether pybind11 would convert a value to a kind; the stand-in
refuses a call no overload accepts, as pybind11 does, with its words ("incompatible function
arguments").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    has_default: bool


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]
    returns: str

    def __str__(self) -> str:
        inner = ", ".join(
            f"{p.name}: {p.kind}" + (" = ..." if p.has_default else "") for p in self.params
        )
        return f"({inner}) -> {self.returns}"


def at_release(raw: str, release: str) -> str:
    """The text of a history-carrying cell (``now [8.5.2,8.6.1: before]``) at ``release``."""
    match = re.match(r"^(.*?)\s*(?:\[(.*)\])?$", raw)
    assert match
    text = match.group(1)
    for part in (match.group(2) or "").split("; "):
        labels, _, older = part.partition(": ")
        if release in labels.split(","):
            text = older
    return "" if text == "?" else text


def signatures(raw: str, release: str) -> list[Signature]:
    """The typed overloads at ``release``; [] where the table has no C++ signature."""
    text = at_release(raw, release)
    found = []
    for overload in filter(None, text.split(" | ")):
        match = re.match(r"^\((.*)\) -> (\S+)$", overload)
        assert match, overload
        params = []
        for part in filter(None, match.group(1).split(", ")):
            name, _, kind = part.partition(":")
            params.append(Param(name, kind.rstrip("="), kind.endswith("=")))
        found.append(Signature(tuple(params), match.group(2)))
    return found


def class_facts(raw: str, release: str) -> tuple[list[str], list[str]]:
    """A class row's (bound bases, kinds pybind converts to it implicitly) at ``release``."""
    bases: list[str] = []
    implicit: list[str] = []
    for word in at_release(raw, release).split():
        key, _, items = word.partition(":")
        (bases if key == "bases" else implicit).extend(items.split(","))
    return bases, implicit


def _is_buffer(value: Any) -> bool:
    try:
        memoryview(value)
    except TypeError:
        return False
    return True


def _is_index(value: Any) -> bool:
    return isinstance(value, int) or hasattr(type(value), "__index__")


SIMPLE: dict[str, Callable[[Any], bool]] = {
    "any": lambda v: True,
    "None": lambda v: v is None,
    "int": lambda v: _is_index(v) and not isinstance(v, float | str | bytes),
    "float": lambda v: (
        isinstance(v, int | float | np.number) and not isinstance(v, np.complexfloating)
    ),
    # pybind11 converts anything with a truth slot (bool, int, float, numpy bool) and None
    "bool": lambda v: v is None or isinstance(v, bool | int | float | np.bool_ | np.number),
    "str": lambda v: isinstance(v, str | bytes),
    "bytes": lambda v: isinstance(v, bytes),
    "buffer": _is_buffer,
    "array": lambda v: _is_buffer(v) or isinstance(v, list | tuple | int | float),
    "list": lambda v: isinstance(v, list),
    "tuple": lambda v: isinstance(v, tuple),
    "dict": lambda v: isinstance(v, dict),
    "callable": callable,
    "iterable": lambda v: hasattr(v, "__iter__"),
}


def accepts(kind: str, value: Any, is_a: Callable[[str, Any], bool | None]) -> bool:
    """Would pybind11 take ``value`` for ``kind``? ``is_a(name, value)`` answers for bound
    classes and enums (None: the name is not bound at this release, so anything goes)."""
    if kind.endswith("?"):
        return value is None or accepts(kind[:-1], value, is_a)
    if kind in SIMPLE:
        return SIMPLE[kind](value)
    if kind.startswith("seq<"):
        item = kind[4:-1]
        return isinstance(value, list | tuple) and all(accepts(item, v, is_a) for v in value)
    verdict = is_a(kind, value)
    return True if verdict is None else verdict


def bind(sig: Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Param, Any]]:
    """(param, value) pairs of a call, or ValueError when the call does not fit ``sig``."""
    if len(args) > len(sig.params):
        raise ValueError("too many arguments")
    pairs = list(zip(sig.params, args, strict=False))
    rest = sig.params[len(args) :]
    names = {p.name for p in rest}
    if set(kwargs) - names:
        raise ValueError("unknown keyword")
    for param in rest:
        if param.name in kwargs:
            pairs.append((param, kwargs[param.name]))
        elif not param.has_default:
            raise ValueError("missing " + param.name)
    return pairs


def first_match(
    sigs: list[Signature],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    is_a: Callable[[str, Any], bool | None],
) -> Signature | None:
    for sig in sigs:
        try:
            pairs = bind(sig, args, kwargs)
        except ValueError:
            continue
        if all(accepts(p.kind, v, is_a) for p, v in pairs):
            return sig
    return None


def incompatible(name: str, sigs: list[Signature], args: tuple[Any, ...], kwargs: Any) -> str:
    """pybind11's message for a call no overload accepts."""
    listed = "\n".join(f"    {n}. {sig}" for n, sig in enumerate(sigs, 1))
    shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return (
        f"{name}(): incompatible function arguments. The following argument types are "
        f"supported:\n{listed}\n\nInvoked with: {shown}"
    )


def failure_value(kind: str) -> Any:
    """What NVIDIA's binding answers on failure for a result of ``kind``: False for a bool,
    None for a pointer (``X?``), -1 for an int (an index or count TensorRT could not make)."""
    if kind == "bool":
        return False
    if kind.endswith("?"):
        return None
    if kind == "int":
        return -1
    raise ValueError(f"TensorRT has no failure value for a result of kind {kind!r}: pass value=")
