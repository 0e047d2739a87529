"""Which inputs warm-up, reference outputs and validation feed a model: the
pure decision, profile opt → reference → given → dims with dynamic ones 1."""

from __future__ import annotations

import pytest

from shared.warmup_inputs import (
    WarmupSpec,
    WarmupSpecError,
    parse_shape,
    parse_value,
    plan_inputs,
    spec_from_options,
)

VAD = [("input", ["batch", "sequence"]), ("state", [2, "batch", 128]), ("sr", [])]


def _shapes(plans: list) -> dict:
    return {p.name: (p.shape, p.source, p.fill) for p in plans}


def test_without_anything_dynamic_dims_are_one() -> None:
    assert _shapes(plan_inputs(VAD)) == {
        "input": ((1, 1), "default", None),
        "state": ((2, 1, 128), "default", None),
        "sr": ((), "default", None),
    }


def test_given_shape_and_value_are_used() -> None:
    given = spec_from_options(["input=1x512", "state=2x1x128"], ["sr=16000"])
    assert _shapes(plan_inputs(VAD, given=given)) == {
        "input": ((1, 512), "given", None),
        "state": ((2, 1, 128), "given", None),
        "sr": ((), "given", 16000.0),
    }


def test_profile_opt_beats_reference_which_beats_given() -> None:
    given = spec_from_options(["input=1x512"], [])
    plans = plan_inputs(
        VAD,
        profile_opt={"input": (4, 1024)},
        reference_shapes={"input": (1, 256), "state": (2, 1, 128)},
        given=given,
    )
    assert _shapes(plans)["input"] == ((4, 1024), "profile", None)
    assert _shapes(plan_inputs(VAD, reference_shapes={"input": (1, 256)}, given=given))[
        "input"
    ] == ((1, 256), "reference", None)


def test_a_reference_or_profile_that_does_not_fit_the_model_is_passed_over() -> None:
    plans = plan_inputs(VAD, profile_opt={"input": (1, 2, 3)}, reference_shapes={"input": (5,)})
    assert _shapes(plans)["input"] == ((1, 1), "default", None)


def test_given_names_and_shapes_are_checked_against_the_model() -> None:
    with pytest.raises(WarmupSpecError, match=r"no input named audio .*input \[\?, \?\]"):
        plan_inputs(VAD, given=spec_from_options(["audio=1x512"], []))
    with pytest.raises(WarmupSpecError, match="does not fit input state"):
        plan_inputs(VAD, given=spec_from_options(["state=2x1x64"], []))
    with pytest.raises(WarmupSpecError, match="does not fit input input"):
        plan_inputs(VAD, given=spec_from_options(["input=512"], []))


def test_option_text_is_parsed_or_refused_with_an_example() -> None:
    assert parse_shape("input=1x512") == ("input", (1, 512))
    assert parse_shape("a/b:0=2X3") == ("a/b:0", (2, 3))
    assert parse_shape("sr=") == ("sr", ())
    assert parse_value("sr=16000") == ("sr", 16000.0)
    for bad in ("input", "input=1xa", "input=0x4"):
        with pytest.raises(WarmupSpecError, match=r"input=1x512|at least 1"):
            parse_shape(bad)
    with pytest.raises(WarmupSpecError, match="sr=16000"):
        parse_value("sr=fast")
    with pytest.raises(WarmupSpecError, match="given twice for sr"):
        spec_from_options([], ["sr=8000", "sr=16000"])


def test_spec_round_trips_through_json() -> None:
    spec = spec_from_options(["input=1x512"], ["sr=16000", "gain=0.5"], "ab" * 32)
    assert WarmupSpec.from_json(spec.as_json()) == spec
    assert spec.as_json()["values"] == {"sr": 16000, "gain": 0.5}
    assert WarmupSpec.from_json(None).empty
