"""Resolving an int8 config without a calibration cache: accepted for a version
whose reference inputs the operator gave (the device calibrates from them), refused for one whose
inputs the controller made up at random, naming ``--inputs``."""

from __future__ import annotations

from controller.fleet.config_layers import Layer, Scope
from controller.fleet.configs import Configs
from tests.unit.controller.fleet.test_config_default_profiles import DEVICE, version

INT8 = [
    Layer(
        Scope("default"),
        {"runtime": "tensorrt", "precision": "int8", "shapes": [
            {"input": "x", "min": [1, 3, 32, 32], "opt": [1, 3, 32, 32], "max": [1, 3, 32, 32]}
        ]},
    )
]  # fmt: skip


def test_int8_resolves_for_a_version_with_the_operators_sample_inputs() -> None:
    given = version(reference_shapes={"x": [1, 3, 32, 32]})
    assert Configs.resolve_for(INT8, DEVICE, given).problems == []


def test_int8_is_refused_for_a_version_with_random_reference_inputs() -> None:
    (problem,) = Configs.resolve_for(INT8, DEVICE, version()).problems
    assert "sample inputs to calibrate on the device" in problem
    assert "--inputs samples.npz" in problem
