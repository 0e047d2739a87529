"""Deploys and rollouts of a version whose warm-up inputs are unknown are refused.

When ONNX Runtime failed on the inputs the push used (dynamic dims 1, random values, or what the
operator gave), every device fails the same way at warm-up: the deploy would only fill the fleet
with ``failed`` slots. The refusal names the fix. Pure: a record in, a sentence out.
"""

from __future__ import annotations

from controller.errors import Conflict
from controller.records import VersionRecord


def unknown_warmup(record: VersionRecord) -> str | None:
    """Why ``record`` cannot be deployed (its warm-up inputs are unknown), or None."""
    if not record.warmup_unknown:
        return None
    ref = f"{record.model}:{record.version}"
    return (
        f"{ref} has no inputs it is known to accept: at push, {record.reference_error}; every "
        "device would fail the same way at warm-up. Give inputs the model accepts: push the "
        f"same file again as {ref} with --shape NAME=DIMS (e.g. --shape input=1x512) and "
        "--value NAME=NUMBER (e.g. --value sr=16000), or --inputs sample.npz, or upload "
        "reference outputs with --reference file.npz"
    )


def refuse_unknown_warmup(record: VersionRecord) -> None:
    """:class:`Conflict` (409) when ``record``'s warm-up inputs are unknown."""
    why = unknown_warmup(record)
    if why is not None:
        raise Conflict(why)
