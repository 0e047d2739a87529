"""INT8 calibration from a version's sample inputs: when, and the checked NPZ.

A TensorRT build at precision ``int8`` or ``best`` of a weakly typed network whose config names no
calibration cache calibrates on the device from the ``input:<tensor>`` arrays of the slot's
reference NPZ (first axis = case, :mod:`shared.reference_layout`), when the controller says they
may calibrate (``ModelSlot.reference_calibrates``: the operator gave them, not random ones, and
the model has no Q/DQ nodes). Only then is the reference fetched before the engine is resolved
(otherwise it comes after, for validation), checked from its headers within the reference size
cap, and handed to the build (``BuildRequest.calibration_inputs_path``).

An engine calibrated from other inputs is another engine: its content key names the reference's
sha256 where a calibration cache's would go (:meth:`shared.engine_keys.ContentKey.of`). Every
other build keeps its key.
"""

from __future__ import annotations

from pathlib import Path

from agent.hardware.runtime_kinds import RUNTIMES
from shared.messages import ArtifactRef, ModelSlot
from shared.reference_layout import (
    MAX_REFERENCE_BYTES,
    ReferenceLayoutError,
    read_layout,
    size_text,
)


def calibration_reference(runtime: str, slot: ModelSlot) -> ArtifactRef | None:
    """The reference whose inputs calibrate ``slot``'s build with ``runtime`` here; None when
    the build takes no sample calibration."""
    kind = RUNTIMES.get(runtime)
    if kind is None or not kind.calibration_caches:
        return None
    if slot.reference is None or not slot.reference_calibrates:
        return None
    config = slot.delegate
    int8 = config.precision in ("int8", "best") and not config.strongly_typed
    return slot.reference if int8 and not config.calibration_cache_sha256 else None


def check_samples(path: Path) -> None:
    """:class:`ReferenceLayoutError` unless ``path`` is a reference NPZ a calibrator can take:
    within the size cap (from its ZIP directory and ``.npy`` headers, nothing inflated), with
    ``input:<tensor>`` arrays of one case count."""
    size = path.stat().st_size
    if size > MAX_REFERENCE_BYTES:
        raise ReferenceLayoutError(
            f"{size_text(size)} exceeds the {size_text(MAX_REFERENCE_BYTES)} cap of references"
        )
    layout = read_layout(path.read_bytes())
    if not any(key.startswith("input:") for key in layout.arrays):
        raise ReferenceLayoutError("it holds no input:<name> arrays to calibrate INT8 from")
    layout.cases()
