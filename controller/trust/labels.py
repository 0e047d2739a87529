"""Device labels: what a valid label is, and who may set one (pure).

Selectors (deployments, config layers, rollouts) target devices by label, so a label is an
authorisation decision: it comes from the operator (``jetfleet devices label``, or the labels
of the enrolment token they created), never from the device. Labels an agent reports in its
``ReportedState`` or asks for at enrolment are ignored; enrolment logs the ones it ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from controller.errors import InvalidInput

MAX_LABELS = 64
LABEL_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$"
LABEL_VALUE_PATTERN = r"^[^,=\x00-\x1f\x7f]{0,256}$"
LABELS_SCHEMA: dict[str, Any] = {
    "maxProperties": MAX_LABELS,
    "propertyNames": {"pattern": LABEL_KEY_PATTERN},
    "additionalProperties": {"type": "string", "pattern": LABEL_VALUE_PATTERN},
}
"""What :func:`check_labels` accepts, as the JSON Schema the API declares for a label set."""
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels as the controller's selectors can use them; InvalidInput names a bad one."""
    if len(labels) > MAX_LABELS:
        raise InvalidInput(f"{len(labels)} labels: at most {MAX_LABELS}")
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(key):
            raise InvalidInput(
                f"label key {key!r}: use up to 63 letters, digits and . _ / - "
                "(starting with a letter or digit)"
            )
        if not _LABEL_VALUE.fullmatch(value):
            raise InvalidInput(
                f"label {key}={value!r}: at most 256 characters, no ',' or '=', no control "
                "characters (newline, NUL, ...)"
            )
    return dict(labels)


def ignored_labels(asked: Mapping[str, str], granted: Mapping[str, str]) -> dict[str, str]:
    """The labels a device asked for that it does not get (absent from, or other than, the
    ``granted`` ones)."""
    return {key: value for key, value in asked.items() if granted.get(key) != value}


def describe(labels: Mapping[str, str], limit: int = 8) -> str:
    """``k=v,k2=v2`` for a log line: at most ``limit`` labels of at most 64 characters each."""
    shown = [f"{key}={value}"[:64] for key, value in sorted(labels.items())[:limit]]
    more = len(labels) - len(shown)
    return ",".join(shown) + (f" (+{more} more)" if more > 0 else "")
