"""Which devices a rollout targets (pure): set-based label selectors, hardware class, JetPack.

The deploy selector (:mod:`controller.fleet.selectors`) splits on commas, so it cannot read
``k in (a,b)``; this parser reads ``k=v``, ``k!=v``, ``k in (a,b)`` and ``k notin (a,b)``
joined by commas outside parentheses (every term must hold), like Kubernetes selectors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.errors import InvalidInput
from controller.fleet.configs import device_hardware_class
from controller.records import DeviceRecord
from controller.rollouts.model import TargetSpec
from shared.facts import DeviceFacts

_KEY = r"[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?"
_VALUE = r"[A-Za-z0-9._:/+-]{0,128}"
_EQ = re.compile(rf"^({_KEY})\s*(!=|==|=)\s*({_VALUE})$")
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_VALUE_ONLY = re.compile(rf"^{_VALUE}$")
_JETPACK = re.compile(r"^\d+(\.\d+){0,3}$")


@dataclass(frozen=True)
class Requirement:
    """One term: label ``key`` is (or, negated, is not) one of ``values``."""

    key: str
    values: frozenset[str]
    negated: bool

    def matches(self, labels: Mapping[str, str]) -> bool:
        inside = labels.get(self.key) in self.values
        return not inside if self.negated else inside


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements; empty matches every device."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def _terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    terms.append(current.strip())
    return terms


def parse_label_selector(text: str) -> LabelSelector:
    """Parse ``k=v,k2!=v2,k3 in (a,b),k4 notin (c)``; the error names the bad term."""
    requirements: list[Requirement] = []
    for term in _terms(text):
        eq, in_set = _EQ.match(term), _SET.match(term)
        if eq is not None:
            key, op, value = eq.groups()
            requirements.append(Requirement(key, frozenset({value}), op == "!="))
            continue
        if in_set is not None:
            key, op, raw = in_set.groups()
            values = [v.strip() for v in raw.split(",")]
            if values and all(v and _VALUE_ONLY.match(v) for v in values):
                requirements.append(Requirement(key, frozenset(values), op == "notin"))
                continue
        raise InvalidInput(
            f"invalid selector term {term!r} in {text!r}: use k=v, k!=v, k in (a,b) or "
            "k notin (a,b), joined by commas"
        )
    return LabelSelector(tuple(requirements))


def jetpack_tuple(text: str) -> tuple[int, ...]:
    """``'6.2'`` → ``(6, 2)``; :class:`InvalidInput` when it is not a JetPack release."""
    if not _JETPACK.match(text.strip()):
        raise InvalidInput(f"invalid JetPack release {text!r}: use e.g. 6.0 or 5.1.2")
    parts = tuple(int(p) for p in text.strip().split("."))
    return parts + (0,) * (4 - len(parts))


@dataclass(frozen=True)
class Candidate:
    """What targeting needs to know of a device."""

    device_id: str
    labels: Mapping[str, str]
    facts: DeviceFacts | None
    """None before its first report, or when its stored facts are unreadable: then no hardware
    class or JetPack condition matches it."""

    @classmethod
    def of(cls, device: DeviceRecord) -> Candidate:
        """What targeting reads of a stored device."""
        return cls(device.id, device.labels, device.device_facts)


def check_spec(spec: TargetSpec) -> None:
    """Refuse a target spec that cannot be evaluated (400 naming what to fix)."""
    if spec.selector is not None:
        parse_label_selector(spec.selector)
    for bound in (spec.jetpack_min, spec.jetpack_max):
        if bound is not None:
            jetpack_tuple(bound)


def matches(spec: TargetSpec, device: Candidate) -> bool:
    """True when ``device`` satisfies every condition of ``spec``."""
    if spec.devices and device.device_id not in spec.devices:
        return False
    if spec.selector and not parse_label_selector(spec.selector).matches(device.labels):
        return False
    if spec.hardware_class is not None and (
        device_hardware_class(device.facts) != spec.hardware_class
    ):
        return False
    if spec.jetpack_min is None and spec.jetpack_max is None:
        return True
    jetson = device.facts.jetson if device.facts is not None else None
    jetpack = jetson.jetpack if jetson is not None else None
    if jetpack is None or not _JETPACK.match(jetpack):
        return False
    version = jetpack_tuple(jetpack)
    if spec.jetpack_min is not None and version < jetpack_tuple(spec.jetpack_min):
        return False
    return spec.jetpack_max is None or version <= jetpack_tuple(spec.jetpack_max)


def select(spec: TargetSpec, devices: Sequence[Candidate]) -> list[str]:
    """Ids of the matching devices, sorted."""
    check_spec(spec)
    return sorted(d.device_id for d in devices if matches(spec, d))
