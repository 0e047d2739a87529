"""The ingest link runs again after an unexpected error ends its loop (here the batch handler
raising): it reconnects, subscribes again, and what agents publish then arrives. Real
Mosquitto."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import pytest

from controller.ingest.link import IngestLink
from tests.integration.controller.conftest import poll
from tests.integration.ingest_link.test_ingest_link import (
    Publisher,
    Received,
    no_leftover_link_thread,
    numbered,
)

__all__ = ["no_leftover_link_thread"]


class HandlerFailingOnce(Received):
    """The ``on_batch`` of a link; the first batch raises an unexpected error."""

    failed = False

    def __call__(self, batch: list[tuple[str, bytes]], done: Callable[[], None]) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected: the batch could not be handed over")
        super().__call__(batch, done)


def test_messages_arrive_after_the_link_loop_crashed(
    mosquitto: str, no_leftover_link_thread: None, caplog: pytest.LogCaptureFixture
) -> None:
    topic = f"jflink/{uuid.uuid4().hex[:10]}/dev-1/telemetry"
    received = HandlerFailingOnce()
    link = IngestLink(mosquitto, [topic.replace("dev-1", "+")], received)
    publisher = Publisher(mosquitto)
    with caplog.at_level(logging.ERROR, logger="shared.supervision"):
        link.start()
        try:
            publisher.publish(topic, [b"lost with the crashed session"])
            poll(lambda: link.restarts == 1 and link.connected, 20.0, "the link back")
            expected = numbered(100)
            publisher.publish(topic, expected)
            poll(lambda: received.count() >= len(expected), 20.0, "100 messages after the crash")
        finally:
            publisher.close()
            link.stop()
    assert received.payloads() == expected
    assert any(
        "background thread jetfleet-ingest-link crashed" in r.getMessage() for r in caplog.records
    )
