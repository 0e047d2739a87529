"""Default shape profiles: a dynamic input without a profile in its config gets
one from the shapes its version was pushed with (--shape, else the operator's reference inputs)."""

from __future__ import annotations

from shared.codec import encode
from shared.default_profile import GIVEN, REFERENCE, default_profiles
from shared.delegate import DelegateConfig, ShapeProfile, check_config
from shared.engine_keys import ContentKey

IMAGE = {"image": ["batch", 3, 224, 224]}
TRT = DelegateConfig(runtime="tensorrt")
REFUSAL = "input 'image' has dynamic dimensions ['batch', 3, 224, 224]: add a shape profile"


def fixed(name: str, shape: tuple[int, ...]) -> ShapeProfile:
    return ShapeProfile(input=name, min=shape, opt=shape, max=shape)


def problems(config: DelegateConfig, no_default: dict[str, str] | None = None) -> list[str]:
    return check_config(config, IMAGE, has_qdq=False, dla_cores=None, no_default=no_default)


def test_the_given_shape_is_the_profile_as_min_opt_max() -> None:
    found = default_profiles(IMAGE, TRT, given={"image": (2, 3, 224, 224)})
    assert found.profiles == (fixed("image", (2, 3, 224, 224)),)
    assert found.sources == {"image": GIVEN}
    assert found.unusable == {}
    applied = found.apply(TRT)
    assert applied.shapes == found.profiles
    assert applied.default_shapes == ("image",)
    assert problems(applied) == []
    assert found.provenance(None) == "default from the version's warm-up shapes (--shape)"


def test_the_given_shape_is_opt_and_the_profile_also_takes_the_reference_inputs() -> None:
    """The agent validates the engine on the reference's inputs: the engine must take them."""
    found = default_profiles(
        IMAGE, TRT, given={"image": (2, 3, 224, 224)}, reference={"image": [4, 3, 224, 224]}
    )
    assert found.profiles == (
        ShapeProfile(
            input="image", min=(2, 3, 224, 224), opt=(2, 3, 224, 224), max=(4, 3, 224, 224)
        ),
    )
    assert found.sources == {"image": GIVEN}
    smaller = default_profiles(
        IMAGE, TRT, given={"image": (2, 3, 224, 224)}, reference={"image": [1, 3, 224, 224]}
    )
    assert smaller.profiles[0].min == (1, 3, 224, 224)
    assert smaller.profiles[0].max == (2, 3, 224, 224)


def test_without_a_given_shape_the_reference_inputs_shape_is_used() -> None:
    found = default_profiles(IMAGE, TRT, given={}, reference={"image": [4, 3, 224, 224]})
    assert found.profiles == (fixed("image", (4, 3, 224, 224)),)
    assert found.provenance(None) == "default from the version's warm-up shapes (reference inputs)"
    assert found.sources == {"image": REFERENCE}


def test_a_profile_in_the_config_wins_per_input() -> None:
    two = {"image": ["batch", 3, 224, 224], "mask": ["batch", 1, "h", "w"]}
    own = ShapeProfile(
        input="image", min=(1, 3, 224, 224), opt=(4, 3, 224, 224), max=(8, 3, 224, 224)
    )
    config = DelegateConfig(shapes=(own,))
    found = default_profiles(two, config, given={"image": (2, 3, 224, 224), "mask": (2, 1, 64, 64)})
    assert found.profiles == (fixed("mask", (2, 1, 64, 64)),)
    applied = found.apply(config)
    assert applied.shapes == (own, fixed("mask", (2, 1, 64, 64)))
    assert applied.default_shapes == ("mask",)
    assert found.provenance("selector=site=a") == (
        "selector=site=a; default from the version's warm-up shapes (--shape) for mask"
    )
    assert default_profiles(IMAGE, config, given={"image": (2, 3, 224, 224)}).profiles == ()


def test_an_input_with_no_stored_shape_keeps_the_refusal() -> None:
    found = default_profiles(IMAGE, TRT, given={}, reference={})
    assert found.profiles == ()
    assert found.unusable == {}
    assert found.apply(TRT) is TRT
    assert problems(found.apply(TRT), dict(found.unusable)) == [REFUSAL]


def test_static_models_and_onnxruntime_configs_get_nothing() -> None:
    static = {"image": [1, 3, 224, 224]}
    assert default_profiles(static, TRT, given={"image": (1, 3, 224, 224)}).profiles == ()
    ort = DelegateConfig(runtime="onnxruntime")
    assert default_profiles(IMAGE, ort, given={"image": (1, 3, 224, 224)}).profiles == ()


def test_a_given_shape_that_would_not_build_is_not_used_and_the_refusal_says_why() -> None:
    rank = default_profiles(IMAGE, TRT, given={"image": (1, 3, 224)})
    assert rank.profiles == ()
    assert problems(TRT, dict(rank.unusable)) == [
        f"{REFUSAL} (the shape given at push (--shape image=1x3x224) has rank 3, the input has "
        "rank 4, so it is no default profile)"
    ]
    axis = default_profiles(IMAGE, TRT, given={"image": (1, 4, 224, 224)})
    assert axis.profiles == ()
    assert axis.unusable == {
        "image": "the shape given at push (--shape image=1x4x224x224) has 4 at axis 1, fixed at 3 "
        "in the model, so it is no default profile"
    }


def test_a_misfit_given_shape_falls_back_to_the_reference_inputs() -> None:
    found = default_profiles(
        IMAGE, TRT, given={"image": (1, 3, 224)}, reference={"image": [2, 3, 224, 224]}
    )
    assert found.profiles == (fixed("image", (2, 3, 224, 224)),)
    assert found.unusable == {}
    both = default_profiles(
        IMAGE, TRT, given={"image": (1, 3, 224)}, reference={"image": [2, 3, 0, 224]}
    )
    assert both.profiles == ()
    assert "the reference inputs' shape 2x3x0x224 has size 0 at axis 2" in both.unusable["image"]


def test_the_marker_is_not_a_build_field_and_never_leaves_the_controller() -> None:
    """Agents that predate ``default_shapes`` refuse unknown fields in a desired document."""
    profile = fixed("image", (2, 3, 224, 224))
    marked = DelegateConfig(shapes=(profile,), default_shapes=("image",))
    assert ContentKey.of("ab" * 32, marked) == ContentKey.of(
        "ab" * 32, DelegateConfig(shapes=(profile,))
    )
    assert "default_shapes" not in marked.model_dump(mode="json")
    assert b"default_shapes" not in encode(marked)
    assert marked.profile_note() == " with shape profile image=2x3x224x224"
    ranged = ShapeProfile(input="x", min=(1, 4), opt=(2, 4), max=(8, 4))
    assert DelegateConfig(shapes=(profile, ranged)).profile_note() == (
        " with shape profiles image=2x3x224x224, x=1x4..8x4 (opt 2x4)"
    )
    assert DelegateConfig().profile_note() == ""
