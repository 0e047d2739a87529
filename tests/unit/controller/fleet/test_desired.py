from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from controller.fleet.desired import (
    PlannedSlot,
    desired_document,
    plan_deploy,
    plan_redelegate,
    plan_undeploy,
)
from shared.codec import decode, encode
from shared.delegate import DelegateConfig, ShapeProfile
from shared.messages import ArtifactRef, DesiredState

SHA_A1 = "a" * 64
SHA_A2 = "b" * 64
SHA_B1 = "c" * 64


def slot(name: str, version: str, sha: str, precision: str = "fp32") -> PlannedSlot:
    return PlannedSlot(
        name=name,
        version=version,
        sha256=sha,
        size=100,
        delegate=DelegateConfig(precision=precision),  # type: ignore[arg-type]
    )


def test_deploying_a_second_model_adds_a_slot() -> None:
    plan = plan_deploy((slot("a", "1", SHA_A1),), slot("b", "1", SHA_B1))
    assert plan.changed
    assert [(s.name, s.version) for s in plan.slots] == [("a", "1"), ("b", "1")]


def test_new_version_replaces_the_models_slot_in_place() -> None:
    current = (slot("a", "1", SHA_A1), slot("b", "1", SHA_B1))
    plan = plan_deploy(current, slot("a", "2", SHA_A2))
    assert plan.changed
    assert [(s.name, s.version) for s in plan.slots] == [("a", "2"), ("b", "1")]


def test_same_version_and_config_changes_nothing() -> None:
    current = (slot("a", "1", SHA_A1),)
    plan = plan_deploy(current, slot("a", "1", SHA_A1))
    assert not plan.changed
    assert plan.slots == current


def test_new_delegate_config_is_a_change() -> None:
    plan = plan_deploy((slot("a", "1", SHA_A1),), slot("a", "1", SHA_A1, precision="fp16"))
    assert plan.changed
    assert plan.slots[0].delegate.precision == "fp16"


def test_undeploy_removes_only_that_slot() -> None:
    current = (slot("a", "1", SHA_A1), slot("b", "1", SHA_B1))
    plan = plan_undeploy(current, "a")
    assert plan.changed
    assert [s.name for s in plan.slots] == ["b"]
    assert not plan_undeploy(plan.slots, "a").changed


def test_desired_document_points_slots_at_the_artifact_urls() -> None:
    issued = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    doc = desired_document(
        "gw-1", 7, (slot("a", "1", SHA_A1), slot("b", "1", SHA_B1)), "http://ctl:8080/", issued
    )
    assert doc.generation == 7
    assert doc.slots[0].artifact.url == f"http://ctl:8080/api/v1/artifacts/{SHA_A1}"
    assert doc.slots[1].artifact.sha256 == SHA_B1
    assert decode(DesiredState, encode(doc)) == doc


def test_same_slot_under_another_config_name_is_stored_without_a_bump() -> None:
    current = (slot("a", "1", SHA_A1),)
    renamed = replace(slot("a", "1", SHA_A1), config="edge")
    plan = plan_deploy(current, renamed)
    assert not plan.changed
    assert plan.rewrite
    assert plan.slots[0].config == "edge"


def test_redelegate_changes_only_slots_of_that_config() -> None:
    current = (
        replace(slot("a", "1", SHA_A1), config="edge"),
        replace(slot("b", "1", SHA_B1), config="other"),
    )
    fp16 = DelegateConfig(precision="fp16")
    plan = plan_redelegate(current, "edge", {"a": fp16, "b": fp16})
    assert plan.changed
    assert [s.delegate.precision for s in plan.slots] == ["fp16", "fp32"]
    again = plan_redelegate(plan.slots, "edge", {"a": fp16})
    assert not again.changed


def test_a_default_profile_re_resolved_against_a_stored_slot_is_no_change() -> None:
    """The stored slot's delegate comes back from JSON without the controller's own marker
    (``default_shapes`` is never serialised): a config edit must not redeploy it for that."""
    profile = ShapeProfile(input="x", min=(2, 4), opt=(2, 4), max=(2, 4))
    stored = DelegateConfig.model_validate(DelegateConfig(shapes=(profile,)).model_dump())
    current = (replace(slot("a", "1", SHA_A1), config="edge", delegate=stored),)
    resolved = DelegateConfig(shapes=(profile,), default_shapes=("x",))
    assert not plan_redelegate(current, "edge", {"a": resolved}).changed
    wider = DelegateConfig(shapes=(profile.model_copy(update={"max": (8, 4)}),))
    assert plan_redelegate(current, "edge", {"a": wider}).changed


def test_the_slots_whose_reference_inputs_calibrate_say_so_and_no_other_does() -> None:
    """``reference_calibrates`` only for a version the catalog names (the
    operator's sample inputs, no Q/DQ) that has a reference; left out of the JSON otherwise,
    so documents signed before it still verify."""
    issued = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    ref = ArtifactRef(url="http://ctl/r", sha256="d" * 64, size=10)
    a = replace(slot("a", "1", SHA_A1), model_version_id=1)
    b = replace(slot("b", "1", SHA_B1), model_version_id=2)
    c = replace(slot("c", "1", SHA_A2), model_version_id=3)
    refs = {SHA_A1: ref, SHA_B1: ref}
    doc = desired_document("gw-1", 1, (a, b, c), "http://ctl/", issued, refs, calibrating={1, 3})
    assert [s.reference_calibrates for s in doc.slots] == [True, False, False]  # c: no reference
    assert decode(DesiredState, encode(doc)) == doc
    assert b'"reference_calibrates":true' in encode(doc)
    plain = desired_document("gw-1", 1, (b,), "http://ctl/", issued, refs)
    assert b"reference_calibrates" not in encode(plain)
