"""The inbox asks ingest's size check before queueing: a refused message never reaches ingest."""

from __future__ import annotations

import threading

from controller.ingest.inbox import Inbox


def test_refused_messages_are_not_queued_and_admitted_ones_are_handled_in_order() -> None:
    handled: list[tuple[str, bytes]] = []
    refused: list[str] = []
    done = threading.Event()

    def handle(topic: str, payload: bytes) -> None:
        handled.append((topic, payload))
        if payload == b"last":
            done.set()

    def admit(topic: str, payload: bytes) -> bool:
        if len(payload) > 4:
            refused.append(topic)
            return False
        return True

    inbox = Inbox(handle, lanes=("telemetry",), admit=admit)
    inbox.start()
    try:
        inbox.put("p/gw/reported", b"ok")
        inbox.put("p/gw/reported", b"x" * 5)
        inbox.put("p/gw/reported", b"last")
        assert done.wait(10)
    finally:
        inbox.stop()
    assert handled == [("p/gw/reported", b"ok"), ("p/gw/reported", b"last")]
    assert refused == ["p/gw/reported"]
