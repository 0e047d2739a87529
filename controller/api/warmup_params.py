"""The warm-up inputs a model push may carry, as query parameters of the upload route.

``PUT /api/v1/models/{name}/versions/{version}?shape=input=1x512&value=sr=16000`` (each
repeatable) and ``inputs_sha256=<sha256>`` (a sample-inputs NPZ uploaded first with
``POST /api/v1/artifacts``): the shapes and values reference outputs are computed with and
stored with the version. Kept apart from the route so other upload kinds
can share it.
"""

from __future__ import annotations

from fastapi import Query

from controller.api.params import rule
from controller.errors import InvalidInput
from shared.warmup_inputs import WarmupSpec, WarmupSpecError, spec_from_options
from shared.wire_model import SHA256_PATTERN

SHAPE_QUERY = Query(
    default=[],
    description="NAME=DIMS (e.g. input=1x512), repeatable: the shape of that input in warm-up, "
    "reference outputs and validation (default: its dims with dynamic ones 1).",
)
VALUE_QUERY = Query(
    default=[],
    description="NAME=NUMBER (e.g. sr=16000), repeatable: every element of that input is this "
    "number (default: seeded random numbers).",
)
INPUTS_QUERY = Query(
    default=None,
    json_schema_extra=rule(SHA256_PATTERN),
    description="sha256 of a sample-inputs NPZ artifact (arrays named after the inputs, "
    "optionally with a leading case axis), used instead of random inputs.",
)


def warmup_given(
    shape: list[str], value: list[str], inputs_sha256: str | None
) -> WarmupSpec | None:
    """What the operator gave (None: nothing); :class:`InvalidInput` (400) when unreadable."""
    if not shape and not value and inputs_sha256 is None:
        return None
    try:
        return spec_from_options(shape, value, inputs_sha256)
    except WarmupSpecError as exc:
        raise InvalidInput(str(exc)) from exc
