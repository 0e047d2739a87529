"""Resolving a config for a dynamic model adds the default shape profile from the version's
warm-up shapes: in the effective config, with its provenance, or the
refusal as before when the version has no shape for the input."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from controller.errors import InvalidInput
from controller.fleet.config_layers import Layer, Scope, validate_values
from controller.fleet.configs import Configs
from controller.records import DeviceRecord, VersionRecord
from shared.delegate import ShapeProfile

TRT = [Layer(Scope("default"), {"runtime": "tensorrt"})]
DEVICE = DeviceRecord(
    id="gw-1",
    labels={},
    online=True,
    last_seen=None,
    desired_generation=0,
    observed_generation=None,
    serve_url=None,
    slots=(),
)
REFUSAL = "input 'x' has dynamic dimensions ['batch', 3, 32, 32]: add a shape profile"


def version(**kw: Any) -> VersionRecord:
    base: dict[str, Any] = {
        "id": 1,
        "model": "m",
        "version": "1",
        "sha256": "ab" * 32,
        "size": 10,
        "inputs": [{"name": "x", "shape": ["batch", 3, 32, 32], "dtype": "float32"}],
        "outputs": [],
        "created_at": datetime(2026, 12, 1, tzinfo=timezone.utc),
    }
    return VersionRecord(**(base | kw))


def test_the_given_shape_becomes_the_profile_with_its_provenance() -> None:
    given = {"shapes": {"x": [2, 3, 32, 32]}, "values": {}}
    result = Configs.resolve_for(TRT, DEVICE, version(warmup_given=given))
    assert result.problems == []
    assert result.delegate.shapes == (
        ShapeProfile(input="x", min=(2, 3, 32, 32), opt=(2, 3, 32, 32), max=(2, 3, 32, 32)),
    )
    assert result.delegate.default_shapes == ("x",)
    assert result.provenance["shapes"] == "default from the version's warm-up shapes (--shape)"
    assert result.provenance["default_shapes"] == result.provenance["shapes"]


def test_the_reference_inputs_shape_serves_when_no_shape_was_given() -> None:
    result = Configs.resolve_for(TRT, DEVICE, version(reference_shapes={"x": [4, 3, 32, 32]}))
    assert result.problems == []
    assert result.delegate.shapes[0].opt == (4, 3, 32, 32)
    assert result.provenance["shapes"] == (
        "default from the version's warm-up shapes (reference inputs)"
    )


def test_without_a_stored_shape_the_refusal_stays_as_it_was() -> None:
    result = Configs.resolve_for(TRT, DEVICE, version())
    assert result.problems == [REFUSAL]
    assert result.delegate.shapes == ()
    assert result.provenance["shapes"] == "default"
    assert "default_shapes" not in result.provenance


def test_a_given_shape_that_does_not_fit_is_refused_saying_why() -> None:
    given = {"shapes": {"x": [2, 4, 32, 32]}, "values": {}}
    result = Configs.resolve_for(TRT, DEVICE, version(warmup_given=given))
    assert result.problems == [
        f"{REFUSAL} (the shape given at push (--shape x=2x4x32x32) has 4 at axis 1, fixed at 3 "
        "in the model, so it is no default profile)"
    ]


def test_a_profile_in_the_config_wins_and_keeps_its_provenance() -> None:
    own = {"input": "x", "min": [1, 3, 32, 32], "opt": [4, 3, 32, 32], "max": [8, 3, 32, 32]}
    layers = [*TRT, Layer(Scope("device", "gw-1"), {"shapes": [own]}, 1)]
    given = {"shapes": {"x": [2, 3, 32, 32]}, "values": {}}
    result = Configs.resolve_for(layers, DEVICE, version(warmup_given=given))
    assert result.problems == []
    assert result.delegate.shapes[0].max == (8, 3, 32, 32)
    assert result.delegate.default_shapes == ()
    assert result.provenance["shapes"] == "device=gw-1"


def test_layers_cannot_set_the_marker() -> None:
    with pytest.raises(InvalidInput, match="unknown delegate config field 'default_shapes'"):
        validate_values({"default_shapes": ["x"]})
