"""A version whose warm-up inputs are unknown (ONNX Runtime failed on the inputs tried at push)
is refused for deploys and rollouts, with the fix named."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from controller.errors import Conflict
from controller.fleet.warmup_gate import refuse_unknown_warmup, unknown_warmup
from controller.records import VersionRecord


def _record(**kw: object) -> VersionRecord:
    base = {
        "id": 1,
        "model": "vad",
        "version": "1",
        "sha256": "ab" * 32,
        "size": 10,
        "inputs": [],
        "outputs": [],
        "created_at": datetime(2026, 12, 1, tzinfo=timezone.utc),
    }
    return VersionRecord(**(base | kw))  # type: ignore[arg-type]


def test_unknown_warm_up_inputs_are_refused_naming_the_options() -> None:
    record = _record(warmup_unknown=True, reference_error="Pad reflect requires axis length >= 2")
    why = unknown_warmup(record)
    assert why is not None
    assert "vad:1" in why
    assert "Pad reflect requires axis length >= 2" in why
    for option in ("--shape", "--value", "--inputs", "--reference"):
        assert option in why
    with pytest.raises(Conflict, match="--shape"):
        refuse_unknown_warmup(record)


def test_a_timeout_or_an_unloadable_model_is_not_refused() -> None:
    """Only a run that failed on its inputs says devices will fail: a slow model or an op the
    controller's ONNX Runtime lacks (a device plugin) may well serve."""
    record = _record(reference_error="running the model took longer than 60 s")
    assert unknown_warmup(record) is None
    refuse_unknown_warmup(record)
    refuse_unknown_warmup(_record())
