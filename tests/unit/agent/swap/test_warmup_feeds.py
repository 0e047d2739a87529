"""The agent warms a new engine up on inputs the model accepts: the
reference's first case (its shapes and values), or the config's shape profile opt, not 1 in
every dynamic dimension and zeros, on real ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.errors import AgentError
from agent.runtimes.ort import load_ort
from agent.swap.validation import parse_reference, validate, warmup_feeds
from controller.analysis.reference_outputs import ReferenceOutputsError, reference_npz
from shared.warmup_inputs import spec_from_options
from tests.model_corpus import reflect_pad_rate

GIVEN = spec_from_options(["input=1x512"], ["sr=16000"])


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "vad.onnx"
    path.write_bytes(reflect_pad_rate().data)
    return path


def test_warm_up_uses_the_reference_inputs_and_validation_passes(model_path: Path) -> None:
    reference = parse_reference(reference_npz(reflect_pad_rate().data, given=GIVEN))
    model = load_ort(model_path)
    feeds = warmup_feeds(list(model.inputs), reference)
    assert feeds["input"].shape == (1, 512)
    assert int(feeds["sr"]) == 16000
    report = validate(model, reference, "fp32")
    assert report.ok, report.problems
    assert report.checked == "4 reference case(s) at fp32"


def test_the_config_shape_profile_opt_sets_the_warm_up_shape(model_path: Path) -> None:
    reference = parse_reference(reference_npz(reflect_pad_rate().data, given=GIVEN))
    model = load_ort(model_path)
    feeds = warmup_feeds(list(model.inputs), reference, {"input": (2, 64)})
    assert feeds["input"].shape == (2, 64)
    assert int(feeds["sr"]) == 16000  # not in the profile: still the reference's value
    assert validate(model, reference, "fp32", profile_opt={"input": (2, 64)}).ok


def test_without_inputs_it_accepts_the_model_fails_at_warm_up(model_path: Path) -> None:
    with pytest.raises(ReferenceOutputsError, match="Pad reflect requires axis length >= 2"):
        reference_npz(reflect_pad_rate().data)
    with pytest.raises(AgentError, match="Pad reflect"):
        validate(load_ort(model_path), None, "fp32")
    assert np.all(warmup_feeds(list(load_ort(model_path).inputs), None)["sr"] == 0)
