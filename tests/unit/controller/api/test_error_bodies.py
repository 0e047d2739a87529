"""Error bodies quote the request only in short: long runs clipped, hints kept, validation
errors bounded (controller.api.error_bodies, pure)."""

from __future__ import annotations

from controller.api.error_bodies import (
    DETAIL_CHARS,
    ECHO_CHARS,
    MAX_VALIDATION_ERRORS,
    clip,
    clip_echoes,
    clip_validation_errors,
)


def test_clip_keeps_short_text_and_says_how_long_a_clipped_one_was() -> None:
    assert clip("gw-1") == "gw-1"
    assert clip("x" * ECHO_CHARS) == "x" * ECHO_CHARS
    assert clip("x" * 20_000) == "x" * ECHO_CHARS + "… (20000 characters)"


def test_a_long_quoted_name_is_clipped_and_the_hint_after_it_kept() -> None:
    message = f"unknown rollout '{'r' * 20_000}': see `jetfleet rollouts ls`"
    assert clip_echoes(message) == (
        f"unknown rollout '{'r' * (ECHO_CHARS - 1)}… (20003 characters) see `jetfleet rollouts ls`"
    )


def test_ordinary_messages_pass_unchanged() -> None:
    sha = "ab" * 32
    message = f"no engine {sha} is stored (build it, or ask for its build lease)"
    assert clip_echoes(message) == message


def test_a_long_message_of_short_words_is_clipped_as_a_whole() -> None:
    clipped = clip_echoes("a " * 10_000)
    assert len(clipped) < DETAIL_CHARS + 30
    assert clipped.endswith("… (20000 characters)")


def test_validation_errors_clip_inputs_locations_and_their_number() -> None:
    errors = [
        {"type": "int_parsing", "loc": ["query", "limit"], "msg": "bad", "input": "9" * 5000},
        {"type": "extra_forbidden", "loc": ["body", "k" * 5000], "msg": "no", "input": ["x"] * 999},
        {"type": "missing", "loc": ["body", "model"], "msg": "Field required", "input": None},
    ]
    first, second, third = clip_validation_errors(errors)
    assert first["input"] == "9" * ECHO_CHARS + "… (5000 characters)"
    assert second["loc"] == ["body", "k" * ECHO_CHARS + "… (5000 characters)"]
    assert second["input"].startswith('["x", "x"')
    assert third == errors[2]

    many = clip_validation_errors([errors[2]] * (MAX_VALIDATION_ERRORS + 5))
    assert len(many) == MAX_VALIDATION_ERRORS + 1
    assert many[-1] == {"type": "too_many_errors", "loc": [], "msg": "and 5 more error(s)"}
