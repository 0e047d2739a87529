"""What systemd hears: READY exactly once and when, STATUS only on a change of phase."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.service.lifecycle import ServiceNotifications, phase_text, ready_reason
from agent.service.sd_notify import Notifier
from shared.messages import SlotPhase, SlotStatus

NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)


def slot(name: str, phase: SlotPhase, error: str | None = None) -> SlotStatus:
    return SlotStatus(name=name, phase=phase, last_error=error, updated_at=NOW)


def test_ready_when_reported_or_serving_kept_models_or_after_the_grace_period() -> None:
    assert ready_reason(True, False, 0.0) == "reported its state to the broker"
    assert ready_reason(False, True, 0.0) == "serving its kept models; broker not reached yet"
    assert ready_reason(False, False, 29.0, grace_s=30.0) is None
    assert ready_reason(False, False, 30.0, grace_s=30.0) == (
        "serving KServe v2; broker not reached yet"
    )


def test_phase_text_names_what_is_not_serving_and_a_missing_broker() -> None:
    assert phase_text([], desired_known=False, connected=True) == "waiting for the desired state"
    slots = [
        slot("a", SlotPhase.SERVING),
        slot("b", SlotPhase.BUILDING),
        slot("c", SlotPhase.FAILED, "sha256 mismatch: " + "f" * 100),
    ]
    text = phase_text(slots, desired_known=True, connected=False)
    assert text.startswith("serving 1/3 models; b building; c failed: sha256 mismatch: fff")
    assert "..." in text
    assert text.endswith("; broker not connected")


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    yield path, sock
    sock.close()


def received(sock: socket.socket) -> list[list[str]]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode().split("\n"))
        except TimeoutError:
            return out


def test_ready_goes_out_once_and_status_only_when_it_changes(
    listener: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    path, sock = listener
    now = [100.0]
    service = ServiceNotifications(Notifier(path), clock=lambda: now[0], grace_s=30.0)
    service.tick(reported_acked=True, models_ready=False, status="before serving")
    service.serving()
    service.tick(False, False, "waiting for the desired state")
    now[0] += 10
    service.tick(False, False, "waiting for the desired state")
    service.tick(True, False, "waiting for the desired state")
    service.tick(True, False, "waiting for the desired state")
    service.tick(True, True, "serving 1/1 models")
    service.tick(True, True, "serving 1/1 models")
    service.stopping("stopping")
    service.stop()
    assert received(sock) == [
        ["STATUS=before serving"],
        ["STATUS=waiting for the desired state"],
        ["READY=1", "STATUS=waiting for the desired state"],
        ["STATUS=serving 1/1 models"],
        ["STOPPING=1", "STATUS=stopping"],
    ]
    assert service.ready_sent
    assert service.heartbeat.last() == 110.0
