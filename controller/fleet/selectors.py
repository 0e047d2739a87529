"""Label selectors: ``k=v,k2!=v2``; every term must hold for a device to match (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from controller.errors import InvalidInput

_KEY_TEXT = r"[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?"
_VALUE_TEXT = r"[A-Za-z0-9._:/+-]{0,128}"
_KEY = re.compile(rf"^{_KEY_TEXT}$")
_VALUE = re.compile(rf"^{_VALUE_TEXT}$")
_TERM = rf"\s*{_KEY_TEXT}\s*!?=\s*{_VALUE_TEXT}\s*"
SELECTOR_TEXT = rf"{_TERM}(?:,{_TERM})*"
"""What :func:`parse_selector` accepts, as a regular expression (unanchored, to embed)."""
SELECTOR_PATTERN = rf"^{SELECTOR_TEXT}$"
"""The same, anchored: what the API declares for a selector."""


@dataclass(frozen=True)
class Term:
    """One requirement: label ``key`` equals (or, negated, differs from) ``value``."""

    key: str
    value: str
    negated: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.negated:
            return labels.get(self.key) != self.value
        return labels.get(self.key) == self.value


@dataclass(frozen=True)
class Selector:
    """A conjunction of terms."""

    terms: tuple[Term, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every term holds for ``labels``."""
        return all(term.matches(labels) for term in self.terms)

    def __str__(self) -> str:
        return ",".join(f"{t.key}{'!=' if t.negated else '='}{t.value}" for t in self.terms)


def parse_selector(text: str) -> Selector:
    """Parse ``k=v[,k2=v2][,k3!=v3]``; the error names the offending term."""
    terms: list[Term] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise InvalidInput(f"invalid selector {text!r}: empty term; use k=v[,k2=v2]")
        negated = "!=" in part
        key, sep, value = part.partition("!=" if negated else "=")
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.match(key) or not _VALUE.match(value):
            raise InvalidInput(
                f"invalid selector term {part!r} in {text!r}: use key=value or key!=value "
                "(letters, digits, . _ - / in keys)"
            )
        terms.append(Term(key=key, value=value, negated=negated))
    return Selector(terms=tuple(terms))
