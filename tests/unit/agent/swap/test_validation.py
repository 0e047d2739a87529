"""Validation against reference outputs by precision, on real ONNX Runtime models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.runtimes.ort import load_ort
from agent.swap.validation import compare, parse_reference, validate
from controller.analysis.reference_outputs import ReferenceOutputsError, check_npz, reference_npz
from controller.demo.sample_models import classifier


def test_same_model_passes_and_other_weights_fail_at_fp32(tmp_path: Path) -> None:
    ref = parse_reference(reference_npz(classifier(seed=1)))
    same, other = tmp_path / "same.onnx", tmp_path / "other.onnx"
    same.write_bytes(classifier(seed=1))
    other.write_bytes(classifier(seed=2))
    assert validate(load_ort(same), ref, "fp32").ok
    report = validate(load_ort(other), ref, "fp32")
    assert not report.ok
    assert "probabilities" in report.problems[0]


def test_tolerance_depends_on_precision() -> None:
    want = np.array([[0.1, 0.7, 0.2]], dtype=np.float32)
    close = want + np.float32(0.002)
    assert compare(close, want, "fp32", "p")
    assert not compare(close, want, "fp16", "p")
    swapped = np.array([[0.7, 0.1, 0.2]], dtype=np.float32)
    problems = compare(swapped, want, "int8", "p")
    assert any("top-1" in p for p in problems)


def test_nan_fails_whatever_the_precision() -> None:
    got = np.array([[np.nan, 1.0]], dtype=np.float32)
    for precision in ("fp32", "fp16", "int8"):
        assert compare(got, np.zeros((1, 2), np.float32), precision, "x") == [
            "output 'x' has NaN or Inf"
        ]


def test_uploaded_npz_must_name_every_tensor() -> None:
    with pytest.raises(ReferenceOutputsError, match="input:image"):
        check_npz(classifier(), reference_npz(classifier()).replace(b"input:", b"inpXt:"))


def _reordered(npz: bytes, names: tuple[str, ...], flip: bool) -> bytes:
    """``npz`` with the rows of outputs ``names`` of every case in reverse order."""
    import io

    with np.load(io.BytesIO(npz)) as stored:
        arrays = {key: stored[key] for key in stored.files}
    for name in names:
        arrays[f"output:{name}"] = arrays[f"output:{name}"][:, ::-1] if flip else arrays[name]
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def test_a_selection_in_another_row_order_passes_and_a_batch_in_another_order_fails(
    tmp_path: Path,
) -> None:
    """Real 8.5.2/8.6.0 TensorRT ordered NonMaxSuppression's selections unlike ONNX Runtime (by
    score, not per class): the same rows in another order are the same answer. A batch's rows
    in another order are not."""
    from shared.warmup_inputs import WarmupSpec
    from tests.model_corpus import dynamic_image
    from tests.model_families import feeds, nms_detector

    family = nms_detector()
    source = tmp_path / "nms.onnx"
    source.write_bytes(family.data)
    given = WarmupSpec(shapes=family.shapes)
    npz = reference_npz(family.data, given=given, sample=feeds(family))
    flipped = _reordered(npz, ("selected_indices", "detection_boxes"), flip=True)
    model = load_ort(source)
    assert validate(model, parse_reference(flipped), "fp32").ok
    batched = dynamic_image()
    batch_path = tmp_path / "batched.onnx"
    batch_path.write_bytes(batched.data)
    spec = WarmupSpec(shapes={"images": (4, 3, 16, 16)})
    batch = _reordered(reference_npz(batched.data, given=spec), ("scores",), flip=True)
    report = validate(load_ort(batch_path), parse_reference(batch), "fp32")
    assert not report.ok
    assert "scores" in report.problems[0]
