"""A lane whose ingest ends its thread is run again: the messages queued behind the one that
killed it are still ingested, in order (before, the lane stopped without a word and its queue
filled until ``put`` blocked the MQTT network thread)."""

from __future__ import annotations

import logging
import threading

import pytest

from controller.ingest.inbox import Inbox


def test_messages_behind_one_that_ended_the_lane_are_still_ingested(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handled: list[bytes] = []
    done = threading.Event()

    def handle(_topic: str, payload: bytes) -> None:
        if payload == b"exit":
            raise SystemExit(3)  # a library calling sys.exit(): outside Exception's tree
        if payload == b"bad":
            raise ValueError("undecodable")  # an ordinary failure: dropped, the lane goes on
        handled.append(payload)
        if payload == b"last":
            done.set()

    inbox = Inbox(handle)
    with caplog.at_level(logging.ERROR):
        inbox.start()
        try:
            for payload in (b"one", b"bad", b"two", b"exit", b"three", b"last"):
                inbox.put("p/gw-1/reported", payload)
            assert done.wait(15), f"the lane stopped after {handled}"
        finally:
            inbox.stop()
    assert handled == [b"one", b"two", b"three", b"last"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("background thread jetfleet-inbox-state crashed" in m for m in messages)
    assert any("ingest of p/gw-1/reported failed" in m for m in messages)
