"""The update's pure decisions: orders, what a restart means, when to confirm."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agent.update.decisions import after_start, decide_order, ready_to_confirm, serving_names
from agent.update.journal import UpdateJournal
from agent.update.layout import RolledBack
from shared.agent_releases import AgentReleaseArtifact, AgentReleaseOrder
from shared.messages import SlotPhase, SlotStatus

SHA = "a" * 64


def order(
    version: str = "0.3.0", allow_downgrade: bool = False, sha: str = SHA
) -> AgentReleaseOrder:
    return AgentReleaseOrder(
        version=version,
        arch="x86_64",
        artifact=AgentReleaseArtifact(url="/r.tar.gz", sha256=sha, size=10, format="tar.gz"),
        allow_downgrade=allow_downgrade,
    )


def journal(phase: str, version: str = "0.3.0") -> UpdateJournal:
    return UpdateJournal(
        order=order(version),
        phase=phase,  # type: ignore[arg-type]
        previous="0.2.0",
        at=datetime.now(timezone.utc),
        serving_before=("a",),
    )


def status(name: str, phase: SlotPhase) -> SlotStatus:
    return SlotStatus(name=name, phase=phase, updated_at=datetime.now(timezone.utc))


def test_no_order_and_the_running_version_are_no_ops() -> None:
    assert decide_order(None, "0.2.0", "x86_64", None).action == "ignore"
    assert decide_order(order("0.2.0"), "0.2.0", "x86_64", None).action == "ignore"


def test_a_newer_release_installs() -> None:
    assert decide_order(order("0.10.0"), "0.9.1", "x86_64", None).action == "install"


def test_an_older_release_is_refused_unless_the_downgrade_is_allowed() -> None:
    refused = decide_order(order("0.1.0"), "0.2.0", "x86_64", None)
    assert refused.action == "refuse"
    assert refused.reason is not None
    assert "older than the running 0.2.0" in refused.reason
    assert decide_order(order("0.1.0", allow_downgrade=True), "0.2.0", "x86_64", None).action == (
        "install"
    )


def test_another_architecture_is_refused() -> None:
    refused = decide_order(order(), "0.2.0", "aarch64", None)
    assert refused.action == "refuse"
    assert "built for x86_64" in (refused.reason or "")


def test_the_journalled_order_is_kept_not_restarted_even_when_it_ended() -> None:
    for phase in ("downloading", "confirming", "rolled_back", "failed", "refused"):
        assert decide_order(order(), "0.2.0", "x86_64", journal(phase)).action == "keep"


def test_the_same_version_with_other_bytes_is_a_new_order() -> None:
    decision = decide_order(order(sha="b" * 64), "0.2.0", "x86_64", journal("rolled_back"))
    assert decision.action == "install"


@pytest.mark.parametrize("phase", ["downloading", "verifying", "unpacking", "checking"])
def test_a_restart_before_the_switch_starts_over(phase: str) -> None:
    resumed = after_start(journal(phase), "0.2.0", None, None)
    assert resumed is not None
    assert resumed.phase == "downloading"


def test_a_restart_into_the_new_release_confirms_next() -> None:
    for phase in ("switching", "restarting"):
        resumed = after_start(journal(phase), "0.3.0", "0.3.0", None)
        assert resumed is not None
        assert resumed.phase == "confirming"
    assert after_start(journal("confirming"), "0.3.0", "0.3.0", None) is None


def test_a_switch_that_never_moved_the_link_starts_over() -> None:
    resumed = after_start(journal("switching"), "0.2.0", None, None)
    assert resumed is not None
    assert resumed.phase == "downloading"


def test_the_launchers_rollback_is_reported_with_its_reason() -> None:
    now = int(datetime.now(timezone.utc).timestamp())
    record = RolledBack("0.3.0", "did not confirm in 3 starts", now)
    resumed = after_start(journal("confirming"), "0.2.0", None, record)
    assert resumed is not None
    assert (resumed.phase, resumed.error) == ("rolled_back", "did not confirm in 3 starts")


def test_an_older_rollback_record_does_not_count_for_this_update() -> None:
    record = RolledBack("0.2.5", "old", 1)
    resumed = after_start(journal("restarting"), "0.2.0", "0.3.0", record)
    assert resumed is not None
    assert resumed.phase == "failed"


def test_terminal_phases_stay() -> None:
    for phase in ("confirmed", "rolled_back", "failed", "refused"):
        assert after_start(journal(phase), "0.2.0", None, None) is None


def test_confirmation_waits_for_the_broker_and_the_slots_that_served() -> None:
    serving = [status("a", SlotPhase.SERVING), status("b", SlotPhase.DOWNLOADING)]
    assert serving_names(serving) == ("a",)
    assert not ready_to_confirm(False, serving, ("a",))
    assert ready_to_confirm(True, serving, ("a",))
    assert not ready_to_confirm(True, [status("a", SlotPhase.SWAPPING)], ("a",))
    assert not ready_to_confirm(True, [], ("a",)), "nothing applied yet"
    assert ready_to_confirm(True, [status("c", SlotPhase.SERVING)], ("a",)), "a is undeployed"
    assert ready_to_confirm(True, [], ())
