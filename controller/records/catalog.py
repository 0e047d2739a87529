"""Model versions and named delegate configs as the database stores them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

AnalysisState = Literal["pending", "done", "failed"]
"""Where a version's static analysis stands: queued or running, stored, or given up on."""


@dataclass(frozen=True)
class VersionRecord:
    """One stored model version."""

    id: int
    model: str
    version: str
    sha256: str
    size: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    created_at: datetime
    has_qdq: bool = False
    analysis: dict[str, Any] = field(default_factory=dict)
    """The analysis report (JSON) per TensorRT version; empty unless ``analysis_state`` is done."""
    analysis_state: AnalysisState = "done"
    analysis_error: str | None = None
    """Why the analysis failed (``analysis_state`` failed)."""
    warmup_given: dict[str, Any] = field(default_factory=dict)
    """Shapes and values the operator gave at push (``shared.warmup_inputs.WarmupSpec`` JSON)."""
    reference_shapes: dict[str, list[int]] = field(default_factory=dict)
    """Per-case shape of each input array of the reference NPZ when the operator gave those
    arrays (``--inputs``, or an uploaded reference); empty when the controller made them up."""
    reference_error: str | None = None
    """Why reference outputs could not be computed at push (None: computed, or pushed before
    this was recorded)."""
    warmup_unknown: bool = False
    """ONNX Runtime failed on the inputs used at push (not a timeout): devices would fail the
    same way at warm-up, so deploys are refused until inputs or references are given."""


@dataclass(frozen=True)
class ConfigLayerRecord:
    """One stored layer of a named delegate config (``order``: creation order)."""

    name: str
    scope: str
    values: dict[str, Any]
    order: int
    created_at: datetime
    updated_at: datetime
