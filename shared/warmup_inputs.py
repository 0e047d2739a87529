"""Which inputs warm-up, reference outputs and validation feed a model.

Putting 1 in every dynamic dimension and random numbers in every input is not always valid: an
STFT with reflect padding needs a sequence of at least 2, detectors need multiples of 32, a
scalar ``sr`` must be a sample rate (8000 or 16000). The shape of each input comes, in order,
from the delegate config's shape profile (``opt``), else the reference NPZ (its inputs), else
what the operator gave at push (``--shape input=1x512``), else the model's dims with 1 for each
dynamic one; a value given at push (``--value sr=16000``) fills that input. :func:`plan_inputs`
makes that decision; :class:`WarmupSpec` is what the operator gave, as stored with the model
version. Pure: no numpy, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Source = Literal["profile", "reference", "given", "default"]
"""Where an input's shape came from: the config's shape profile opt, the reference NPZ, the
operator's ``--shape``/``--inputs`` at push, or the model's dims with dynamic ones set to 1."""

MAX_SHAPE_ELEMENTS = 1 << 26
"""Elements a given shape may have: 256 MiB of FP32, the cap on a model's reference outputs
(``shared.reference_layout.MAX_REFERENCE_BYTES``), which one case must fit anyway. Checked when
the shape is read, before anything allocates it (a huge ``--shape`` must not exhaust memory)."""

_NAME_VALUE = re.compile(r"^(?P<name>.+?)=(?P<value>[^=]*)$")


class WarmupSpecError(ValueError):
    """What the operator gave does not fit the model (or cannot be read)."""


@dataclass(frozen=True)
class WarmupSpec:
    """Shapes and values the operator gave at push; ``inputs_sha256``: their sample-inputs NPZ
    (an artifact), whose arrays are the reference cases' inputs."""

    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)
    inputs_sha256: str | None = None

    @property
    def empty(self) -> bool:
        return not self.shapes and not self.values and self.inputs_sha256 is None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "shapes": {n: list(s) for n, s in self.shapes.items()},
            "values": {n: _number(v) for n, v in self.values.items()},
        }
        if self.inputs_sha256 is not None:
            out["inputs_sha256"] = self.inputs_sha256
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> WarmupSpec:
        if not data:
            return cls()
        return cls(
            shapes={str(n): tuple(int(d) for d in s) for n, s in data.get("shapes", {}).items()},
            values={str(n): float(v) for n, v in data.get("values", {}).items()},
            inputs_sha256=data.get("inputs_sha256"),
        )


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``input=1x512`` → ``("input", (1, 512))``; ``sr=`` (empty) is a scalar."""
    found = _NAME_VALUE.match(text.strip())
    if found is None:
        raise WarmupSpecError(f"--shape {text!r}: write NAME=DIMS, e.g. input=1x512")
    name, dims = found["name"], found["value"].strip()
    try:
        shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
    except ValueError:
        raise WarmupSpecError(
            f"--shape {text!r}: dimensions are positive integers joined by x, e.g. input=1x512"
        ) from None
    if any(d < 1 for d in shape):
        raise WarmupSpecError(f"--shape {text!r}: every dimension must be at least 1")
    elements = math.prod(shape)
    if elements > MAX_SHAPE_ELEMENTS:
        raise WarmupSpecError(
            f"--shape {text!r}: {elements:,} elements, over the {MAX_SHAPE_ELEMENTS:,} a warm-up "
            "input may have (256 MiB of FP32, the cap on reference outputs)"
        )
    return name, shape


def parse_value(text: str) -> tuple[str, float]:
    """``sr=16000`` → ``("sr", 16000.0)``: every element of that input is this number."""
    found = _NAME_VALUE.match(text.strip())
    try:
        value = float(found["value"]) if found is not None else math.nan
    except ValueError:
        value = math.nan
    if found is None or not math.isfinite(value):
        raise WarmupSpecError(f"--value {text!r}: write NAME=NUMBER, e.g. sr=16000")
    return found["name"], value


def spec_from_options(
    shapes: Sequence[str], values: Sequence[str], inputs_sha256: str | None = None
) -> WarmupSpec:
    """The spec of repeated ``--shape``/``--value`` options; an input given twice is an error."""
    parsed_shapes = [parse_shape(s) for s in shapes]
    parsed_values = [parse_value(v) for v in values]
    for option, pairs in (("--shape", parsed_shapes), ("--value", parsed_values)):
        names = [n for n, _ in pairs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise WarmupSpecError(f"{option} given twice for {', '.join(twice)}")
    return WarmupSpec(dict(parsed_shapes), dict(parsed_values), inputs_sha256)


@dataclass(frozen=True)
class InputPlan:
    """One input as fed: its shape, where that came from, and the value filling it (None:
    generated: the reference's arrays, random numbers or zeros, as the caller does)."""

    name: str
    shape: tuple[int, ...]
    source: Source
    fill: float | None = None


def _fits(dims: Sequence[Any], shape: Sequence[int]) -> bool:
    if len(dims) != len(shape):
        return False
    return all(
        not (isinstance(d, int) and d > 0) or d == s for d, s in zip(dims, shape, strict=True)
    )


def _dims_text(dims: Sequence[Any]) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, int) and d > 0 else "?" for d in dims) + "]"


def plan_inputs(
    inputs: Sequence[tuple[str, Sequence[Any]]],
    *,
    profile_opt: Mapping[str, Sequence[int]] | None = None,
    reference_shapes: Mapping[str, Sequence[int]] | None = None,
    given: WarmupSpec | None = None,
) -> list[InputPlan]:
    """The shape and fill of each model input (``(name, dims)``, a dim that is not a positive
    int being dynamic): profile opt, else reference, else given, else dims with 1 for dynamic.

    A given shape or value naming no input, or a given shape that contradicts the model's fixed
    dims or rank, raises :class:`WarmupSpecError` naming the inputs."""
    profile_opt = profile_opt or {}
    reference_shapes = reference_shapes or {}
    given = given or WarmupSpec()
    known = {name: list(dims) for name, dims in inputs}
    unknown = sorted((set(given.shapes) | set(given.values)) - set(known))
    if unknown:
        listed = ", ".join(f"{n} {_dims_text(d)}" for n, d in known.items())
        raise WarmupSpecError(
            f"no input named {', '.join(unknown)} in the model (its inputs: {listed})"
        )
    for name, wanted in given.shapes.items():
        if not _fits(known[name], wanted):
            raise WarmupSpecError(
                f"--shape {name}={'x'.join(map(str, wanted)) or '(scalar)'} does not fit input "
                f"{name} {_dims_text(known[name])}: give every dimension, fixed ones as they are"
            )
    plans = []
    for name, dims in inputs:
        fill = given.values.get(name)
        shape: tuple[int, ...]
        source: Source
        if name in profile_opt and _fits(dims, profile_opt[name]):
            shape, source = tuple(profile_opt[name]), "profile"
        elif name in reference_shapes and _fits(dims, reference_shapes[name]):
            shape, source = tuple(reference_shapes[name]), "reference"
        elif name in given.shapes:
            shape, source = tuple(given.shapes[name]), "given"
        else:
            shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in dims)
            source = "given" if fill is not None else "default"
        plans.append(InputPlan(name, shape, source, fill))
    return plans
