"""Which stored tuning of an engine the store answers for a device's own tuning (pure)."""

from __future__ import annotations

from datetime import datetime, timezone

from controller.artifacts.engines import best_manifest
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey, engine_key
from shared.engines import EngineManifest

VALIDITY = ValidityKey(runtime="tensorrt", runtime_version="10.3.0", platform="linux-aarch64-tegra")
CONTENT = ContentKey.of("a" * 64, DelegateConfig())


def built(power_mode: str | None, clocks: bool | None, by: str) -> EngineManifest:
    return EngineManifest(
        engine_key=engine_key(VALIDITY, CONTENT),
        sha256=by[-1] * 64,
        size=1,
        validity=VALIDITY,
        content=CONTENT,
        tuning=TuningTag(power_mode=power_mode, jetson_clocks=clocks),
        built_by=by,
        build_seconds=1,
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )


OLDEST_FIRST = [
    built("15W", False, "gw-a"),
    built("MAXN", True, "gw-b"),
    built("MAXN", None, "gw-c"),
]


def choose(tuning: str | None) -> tuple[str, str] | None:
    best = best_manifest(OLDEST_FIRST, tuning)
    return None if best is None else (best[0].built_by, best[1])


def test_the_manifest_tuned_under_the_asked_tag_wins() -> None:
    assert choose("MAXN+clocks") == ("gw-b", "exact")
    assert choose("MAXN") == ("gw-c", "exact")
    assert choose("15W") == ("gw-a", "exact")


def test_without_an_exact_match_the_oldest_valid_build_is_answered_and_marked_other() -> None:
    assert choose("7W") == ("gw-a", "other")
    assert choose("15W+clocks") == ("gw-a", "other")


def test_no_tuning_asked_answers_the_oldest_and_nothing_stored_answers_none() -> None:
    assert choose(None) == ("gw-a", "any")
    assert best_manifest([], "15W") is None
    assert best_manifest([], None) is None
