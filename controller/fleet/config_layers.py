"""Layered delegate configs (pure): which layers apply to a device, and what they resolve to.

A named config is a set of layers, each a scope and partial :class:`DelegateConfig` values.
Resolution starts from ``DelegateConfig()`` and applies, in order, the fleet ``default`` layer,
the ``class=<hardware class>`` layer, the ``selector=<k=v,...>`` layers that match the device's
labels (in creation order) and the ``device=<id>`` layer; later layers win field by field. The
nested ``onnxruntime`` options merge per option, so one layer can pick providers and another the
graph optimisation level. Provenance says which layer set each field, so an operator can see why a
device runs what it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from controller.errors import InvalidInput
from controller.fleet.selectors import SELECTOR_TEXT, parse_selector
from shared.delegate import DelegateConfig
from shared.hardware_class import HARDWARE_CLASS_PATTERN
from shared.topics import DEVICE_ID_PATTERN

DEFAULT = "default"
"""The scope (and provenance) of fleet-wide values; also what untouched fields report."""

NESTED = ("onnxruntime",)
"""Fields holding an options object that layers merge option by option."""

SET_BY_CONTROLLER = ("default_shapes",)
"""Fields the controller sets while resolving (``shared.default_profile``), never a layer."""

_RANK = {"default": 0, "class": 1, "selector": 2, "device": 3}
_CLASS = re.compile(HARDWARE_CLASS_PATTERN)
_DEVICE = re.compile(DEVICE_ID_PATTERN)


def _inner(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


SCOPE_PATTERN = (
    rf"^\s*(?:{DEFAULT}|class=\s*{_inner(HARDWARE_CLASS_PATTERN)}\s*"
    rf"|device=\s*{_inner(DEVICE_ID_PATTERN)}\s*|selector=\s*{SELECTOR_TEXT})\s*$"
)
"""What :func:`parse_scope` accepts, as the regular expression the API declares."""


@dataclass(frozen=True)
class Scope:
    """Where a layer applies: ``default``, ``class=C``, ``selector=k=v,...`` or ``device=ID``."""

    kind: str
    value: str = ""

    def __str__(self) -> str:
        return DEFAULT if self.kind == "default" else f"{self.kind}={self.value}"

    @property
    def rank(self) -> int:
        """Precedence: fleet default < hardware class < label selector < device."""
        return _RANK[self.kind]

    def applies(self, device_id: str, labels: Mapping[str, str], hw_class: str | None) -> bool:
        """True when a device with these labels and hardware class is in this scope."""
        if self.kind == "default":
            return True
        if self.kind == "class":
            return hw_class == self.value
        if self.kind == "device":
            return device_id == self.value
        return parse_selector(self.value).matches(labels)


@dataclass(frozen=True)
class Layer:
    """One layer of a named config; ``order`` is its creation order (selectors apply in it)."""

    scope: Scope
    values: Mapping[str, Any]
    order: int = 0


def parse_scope(text: str) -> Scope:
    """``default`` | ``class=C`` | ``selector=k=v[,k2=v2]`` | ``device=ID``; errors say which."""
    text = text.strip()
    if text == DEFAULT:
        return Scope("default")
    kind, sep, value = text.partition("=")
    value = value.strip()
    if not sep or kind not in ("class", "selector", "device") or not value:
        raise InvalidInput(
            f"invalid scope {text!r}: use default, class=<hardware class>, "
            "selector=<k=v,...> or device=<id>"
        )
    if kind == "class" and not _CLASS.match(value):
        raise InvalidInput(
            f"invalid hardware class {value!r}: lower-case like jetson-orin-nano-8gb/jp6.2"
        )
    if kind == "device" and not _DEVICE.match(value):
        raise InvalidInput(f"invalid device id {value!r} in scope {text!r}")
    if kind == "selector":
        value = str(parse_selector(value))
    return Scope(kind, value)


def validate_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check that ``values`` are DelegateConfig fields of the right types; return them as JSON.

    Raises :class:`InvalidInput` naming the first wrong field, e.g. ``precision: Input should be
    'fp32', 'fp16', 'int8' or 'best'``.
    """
    fields = [f for f in DelegateConfig.model_fields if f not in SET_BY_CONTROLLER]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        known = ", ".join(fields)
        raise InvalidInput(f"unknown delegate config field {unknown[0]!r}; known fields: {known}")
    try:
        config = DelegateConfig.model_validate(dict(values))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "values"
        raise InvalidInput(f"invalid delegate config field {where}: {first['msg']}") from exc
    dumped = config.model_dump(mode="json")
    result: dict[str, Any] = {}
    for key in values:
        if key in NESTED and isinstance(values[key], Mapping):
            result[key] = {k: dumped[key][k] for k in values[key]}
        else:
            result[key] = dumped[key]
    return result


def applicable(
    layers: Sequence[Layer], device_id: str, labels: Mapping[str, str], hw_class: str | None
) -> list[Layer]:
    """The layers that apply to the device, lowest precedence first."""
    chosen = [layer for layer in layers if layer.scope.applies(device_id, labels, hw_class)]
    return sorted(chosen, key=lambda layer: (layer.scope.rank, layer.order))


def resolve(
    layers: Sequence[Layer], device_id: str, labels: Mapping[str, str], hw_class: str | None
) -> tuple[DelegateConfig, dict[str, str]]:
    """The effective config of a device and, per field, the scope that set it.

    Provenance has one entry per DelegateConfig field (``onnxruntime`` options as
    ``onnxruntime.<option>``); untouched fields say ``default``.
    """
    merged: dict[str, Any] = DelegateConfig().model_dump(mode="json")
    provenance = dict.fromkeys(_field_paths(merged), DEFAULT)
    for layer in applicable(layers, device_id, labels, hw_class):
        source = str(layer.scope)
        for key, value in layer.values.items():
            if key in NESTED and isinstance(value, Mapping):
                merged[key] = {**merged[key], **value}
                for sub in value:
                    provenance[f"{key}.{sub}"] = source
            else:
                merged[key] = value
                provenance[key] = source
    return DelegateConfig.model_validate(merged), provenance


def _field_paths(dumped: Mapping[str, Any]) -> list[str]:
    paths: list[str] = []
    for key, value in dumped.items():
        if key in NESTED:
            paths += [f"{key}.{sub}" for sub in value]
        else:
            paths.append(key)
    return paths


def flatten(config: DelegateConfig) -> dict[str, Any]:
    """The config as ``{field or onnxruntime.<option>: JSON value}``, the keys of provenance."""
    dumped = config.model_dump(mode="json")
    flat: dict[str, Any] = {}
    for key, value in dumped.items():
        if key in NESTED:
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[key] = value
    return flat
