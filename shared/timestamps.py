"""Timestamps a request gives as text: RFC 3339 with the offset, nothing else.

Pydantic alone also reads epoch numbers (``0.5``) and times without an offset, which an API
declaring ``format: date-time`` must refuse: :data:`Timestamp` accepts exactly the RFC 3339 text
that format names, then lets pydantic parse it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _rfc3339(value: object) -> object:
    """Only the RFC 3339 text the schema's ``date-time`` names (no epoch numbers, no time
    without its offset); pydantic parses what passes."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError(
            "expected an RFC 3339 date-time with its offset, e.g. 2026-01-31T08:00:00Z"
        )
    return value


Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]
"""An RFC 3339 date-time with its offset (``format: date-time``), refused with 422 otherwise."""
