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
