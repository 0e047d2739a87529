"""Delegate-config validation: the mistakes an operator makes, caught before any build."""

import pytest
from pydantic import ValidationError

from shared.delegate import DelegateConfig, ShapeProfile, check_config

IMAGE = {"image": ("batch", 3, 224, 224)}


def problems(
    config: DelegateConfig, *, qdq: bool = False, dla: int | None = 2, samples: bool = False
) -> list[str]:
    return check_config(
        config,
        IMAGE,
        has_qdq=qdq,
        dla_cores=dla,
        has_samples=samples,
        device_class="orin-nano-8gb",
    )


def profile(**kw: tuple[int, ...]) -> ShapeProfile:
    base = {"min": (1, 3, 224, 224), "opt": (4, 3, 224, 224), "max": (8, 3, 224, 224)}
    return ShapeProfile(input="image", **{**base, **kw})


def test_a_sound_config_has_no_problems() -> None:
    assert problems(DelegateConfig(precision="fp16", shapes=(profile(),))) == []


INT8_REFUSAL = (
    "precision int8 needs a calibration cache (calibration_cache_sha256), a model with Q/DQ "
    "nodes, or sample inputs to calibrate on the device: push the version again with --inputs "
    "samples.npz (representative inputs; random ones calibrate poorly)"
)


def test_int8_needs_calibration_or_qdq() -> None:
    assert problems(DelegateConfig(precision="int8", shapes=(profile(),))) == [INT8_REFUSAL]
    assert problems(DelegateConfig(precision="int8", shapes=(profile(),)), qdq=True) == []
    calibrated = DelegateConfig(
        precision="int8", calibration_cache_sha256="ab" * 32, shapes=(profile(),)
    )
    assert problems(calibrated) == []


def test_int8_calibrates_from_the_operators_sample_inputs() -> None:
    """A version whose reference holds the operator's sample inputs needs no
    calibration cache (the device calibrates from them); random inputs do not count (the
    caller says ``has_samples`` only for the operator's), nor does a strongly typed network,
    which takes no calibrated scales."""
    int8 = DelegateConfig(precision="int8", shapes=(profile(),))
    assert problems(int8, samples=True) == []
    typed = int8.model_copy(update={"strongly_typed": True})
    assert problems(typed, samples=True) == [INT8_REFUSAL]
    assert problems(typed, samples=True, qdq=True) == []


def test_dla_on_a_device_class_without_one() -> None:
    config = DelegateConfig(precision="fp16", dla_core=0, shapes=(profile(),))
    assert problems(config, dla=0) == ["dla_core 0 requested but orin-nano-8gb has no DLA"]
    assert (
        "has 1 DLA core(s) (0-0)" in problems(config.model_copy(update={"dla_core": 1}), dla=1)[0]
    )
    assert problems(config, dla=None) == []


def test_dla_needs_reduced_precision() -> None:
    found = problems(DelegateConfig(dla_core=0, shapes=(profile(),)))
    assert found == ["the DLA runs fp16 or int8 only: set precision fp16 or int8"]


def test_shape_profiles_must_match_the_model_inputs() -> None:
    wrong_name = ShapeProfile(input="img", min=(1,), opt=(1,), max=(1,))
    found = problems(DelegateConfig(shapes=(wrong_name,)))
    assert "shape profile names 'img', not an input (inputs: image)" in found
    assert (
        "input 'image' has dynamic dimensions ['batch', 3, 224, 224]: add a shape profile" in found
    )

    fixed_axis = profile(max=(8, 3, 320, 320))
    assert problems(DelegateConfig(shapes=(fixed_axis,))) == [
        "shape profile 'image' axis 2 is fixed at 224 in the model and must be the same in "
        "min/opt/max",
        "shape profile 'image' axis 3 is fixed at 224 in the model and must be the same in "
        "min/opt/max",
    ]
    rank = ShapeProfile(input="image", min=(1, 3), opt=(1, 3), max=(1, 3))
    assert "has rank 2, the input has rank 4" in problems(DelegateConfig(shapes=(rank,)))[0]


def test_onnxruntime_path_does_not_need_profiles() -> None:
    assert problems(DelegateConfig(runtime="onnxruntime")) == []


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"min": (2, 3), "opt": (1, 3), "max": (4, 3)}, "0 < min <= opt <= max"),
        ({"min": (1, 3), "opt": (1,), "max": (4, 3)}, "same rank"),
        ({"min": (0, 3), "opt": (1, 3), "max": (4, 3)}, "0 < min <= opt <= max"),
    ],
)
def test_malformed_profiles_are_refused_at_parse(
    kw: dict[str, tuple[int, ...]], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ShapeProfile(input="x", **kw)


def test_unknown_keys_and_bad_values_are_refused() -> None:
    with pytest.raises(ValidationError, match="workspace_mb"):
        DelegateConfig.model_validate({"workspace_mb": 1})
    with pytest.raises(ValidationError, match="builder_optimization_level"):
        DelegateConfig.model_validate({"builder_optimization_level": 9})
