"""plan(): what the agent does for a desired document, given what it has."""

from __future__ import annotations

from datetime import datetime, timezone

from agent.slots.plan import Actual, ActualSlot, Download, Load, Unload, plan
from shared.messages import ArtifactRef, DesiredState, ModelSlot

SHA_A1 = "a1" * 32
SHA_A2 = "a2" * 32
SHA_B1 = "b1" * 32


def slot(name: str, version: str, sha: str) -> ModelSlot:
    return ModelSlot(
        name=name,
        version=version,
        artifact=ArtifactRef(url=f"http://c/{sha}", sha256=sha, size=10),
    )


def desired(*slots: ModelSlot) -> DesiredState:
    return DesiredState(
        device_id="gw-1", generation=3, issued_at=datetime.now(timezone.utc), slots=slots
    )


def test_new_slot_is_downloaded_then_loaded() -> None:
    a = slot("cls", "1", SHA_A1)
    assert plan(desired(a), Actual()) == [Download(a), Load(a)]


def test_already_downloaded_artifact_is_only_loaded() -> None:
    a = slot("cls", "1", SHA_A1)
    assert plan(desired(a), Actual(downloaded=frozenset({SHA_A1}))) == [Load(a)]


def test_serving_the_desired_version_needs_nothing() -> None:
    a = slot("cls", "1", SHA_A1)
    actual = Actual(slots={"cls": ActualSlot("cls", "1", SHA_A1)}, downloaded=frozenset({SHA_A1}))
    assert plan(desired(a), actual) == []


def test_new_version_replaces_the_old_one() -> None:
    a2 = slot("cls", "2", SHA_A2)
    actual = Actual(slots={"cls": ActualSlot("cls", "1", SHA_A1)}, downloaded=frozenset({SHA_A1}))
    assert plan(desired(a2), actual) == [Download(a2), Load(a2)]


def test_removed_slot_is_unloaded_first_and_others_follow_in_order() -> None:
    b = slot("anomaly", "1", SHA_B1)
    a = slot("cls", "1", SHA_A1)
    actual = Actual(slots={"old": ActualSlot("old", "7", SHA_A2)})
    assert plan(desired(b, a), actual) == [
        Unload("old"),
        Download(b),
        Load(b),
        Download(a),
        Load(a),
    ]


def test_permanently_failed_artifact_is_not_retried_but_a_new_one_is() -> None:
    a2 = slot("cls", "2", SHA_A2)
    failed = ActualSlot("cls", "1", SHA_A1, failed_sha256=SHA_A2)
    assert plan(desired(a2), Actual(slots={"cls": failed})) == []
    fixed = slot("cls", "2", SHA_B1)
    assert plan(desired(fixed), Actual(slots={"cls": failed})) == [Download(fixed), Load(fixed)]


def test_same_version_with_different_bytes_is_reloaded() -> None:
    a = slot("cls", "1", SHA_A2)
    actual = Actual(slots={"cls": ActualSlot("cls", "1", SHA_A1)}, downloaded=frozenset({SHA_A2}))
    assert plan(desired(a), actual) == [Load(a)]


def test_empty_desired_unloads_everything() -> None:
    actual = Actual(slots={"a": ActualSlot("a", "1", SHA_A1), "b": ActualSlot("b", "1", SHA_B1)})
    assert plan(desired(), actual) == [Unload("a"), Unload("b")]


def test_an_engine_tuned_under_another_power_mode_is_retuned_once() -> None:
    a = slot("cls", "1", SHA_A1)
    mistuned = ActualSlot("cls", "1", SHA_A1, tuning_matches=False)
    assert plan(desired(a), Actual(slots={"cls": mistuned})) == [Load(a, retune=True)]
    gave_up = ActualSlot("cls", "1", SHA_A1, tuning_matches=False, retune_failed=True)
    assert plan(desired(a), Actual(slots={"cls": gave_up})) == []
    tuned = ActualSlot("cls", "1", SHA_A1, tuning_matches=True)
    assert plan(desired(a), Actual(slots={"cls": tuned})) == []
