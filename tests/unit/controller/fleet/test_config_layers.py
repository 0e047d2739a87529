"""Layered delegate configs: precedence, selector order, provenance and validation."""

from __future__ import annotations

from typing import Any

import pytest

from controller.errors import InvalidInput
from controller.fleet.config_layers import Layer, flatten, parse_scope, resolve, validate_values
from shared.delegate import DelegateConfig

ORIN = "jetson-orin-nano-8gb/jp6.2"


def layer(scope: str, order: int, **values: Any) -> Layer:
    return Layer(parse_scope(scope), validate_values(values), order)


LAYERS = [
    layer("device=gw-1", 1, streams=4),
    layer("selector=site=a", 2, precision="int8", workspace_mib=512),
    layer(f"class={ORIN}", 3, precision="fp16", dla_core=0, workspace_mib=256),
    layer("default", 4, precision="fp32", power_mode="15W"),
    layer("selector=cam=ir", 5, precision="best"),
]


def test_no_layers_resolve_to_the_fleet_wide_default() -> None:
    config, provenance = resolve([], "gw-1", {}, None)
    assert config == DelegateConfig()
    assert set(provenance.values()) == {"default"}
    assert set(provenance) == set(flatten(config))


def test_device_beats_selector_beats_class_beats_default() -> None:
    config, provenance = resolve(LAYERS, "gw-1", {"site": "a"}, ORIN)
    assert (config.precision, config.dla_core, config.workspace_mib) == ("int8", 0, 512)
    assert (config.streams, config.power_mode) == (4, "15W")
    assert provenance["precision"] == "selector=site=a"
    assert provenance["dla_core"] == f"class={ORIN}"
    assert provenance["streams"] == "device=gw-1"
    assert provenance["power_mode"] == "default"
    assert provenance["gpu_fallback"] == "default"


def test_layers_that_do_not_apply_are_ignored() -> None:
    config, provenance = resolve(LAYERS, "gw-2", {"site": "b"}, "cpu-x86_64")
    assert (config.precision, config.streams, config.dla_core) == ("fp32", 1, None)
    assert provenance["precision"] == "default"


def test_later_created_selector_wins_over_an_earlier_one() -> None:
    config, provenance = resolve(LAYERS, "gw-3", {"site": "a", "cam": "ir"}, None)
    assert config.precision == "best"
    assert provenance["precision"] == "selector=cam=ir"
    assert provenance["workspace_mib"] == "selector=site=a"


def test_onnxruntime_options_merge_option_by_option() -> None:
    layers = [
        layer("default", 1, onnxruntime={"providers": ["CUDAExecutionProvider"]}),
        layer("device=gw-1", 2, onnxruntime={"graph_optimization_level": "basic"}),
    ]
    config, provenance = resolve(layers, "gw-1", {}, None)
    assert config.onnxruntime.providers == ("CUDAExecutionProvider",)
    assert config.onnxruntime.graph_optimization_level == "basic"
    assert provenance["onnxruntime.providers"] == "default"
    assert provenance["onnxruntime.graph_optimization_level"] == "device=gw-1"


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"precison": "fp16"}, "unknown delegate config field 'precison'"),
        ({"precision": "fp8"}, "precision"),
        ({"streams": 0}, "streams"),
        ({"dla_core": "zero"}, "dla_core"),
        ({"onnxruntime": {"providers": ["TpuProvider"]}}, "onnxruntime.providers"),
        ({"shapes": [{"input": "x", "min": [2], "opt": [1], "max": [3]}]}, "shapes"),
    ],
)
def test_wrong_values_name_the_field(values: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidInput, match="field") as caught:
        validate_values(values)
    assert needle in str(caught.value)


def test_values_are_kept_partial_and_normalised() -> None:
    assert validate_values({"shapes": [{"input": "x", "min": [1], "opt": [2], "max": [4]}]}) == {
        "shapes": [{"input": "x", "min": [1], "opt": [2], "max": [4]}]
    }
    assert validate_values({"onnxruntime": {"trt_min_subgraph_size": 3}}) == {
        "onnxruntime": {"trt_min_subgraph_size": 3}
    }


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("default", "default"),
        (f"class={ORIN}", f"class={ORIN}"),
        ("selector= site=a , cam=ir", "selector=site=a,cam=ir"),
        ("device=gw-1", "device=gw-1"),
    ],
)
def test_scopes_parse_to_a_canonical_form(text: str, canonical: str) -> None:
    assert str(parse_scope(text)) == canonical


@pytest.mark.parametrize("text", ["", "site=a", "class=", "device=-bad", "selector=,", "class=A B"])
def test_bad_scopes_say_what_is_accepted(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_scope(text)
