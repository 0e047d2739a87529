"""What the ingest link's persistent session and acknowledge-after-store give,
against the real Mosquitto: nothing the broker accepted is lost while the link is down or its
handler has not stored a read, and replicas in one shared subscription split the messages
between them without losing the share of one that is away. No mocks.

The PUBACKs of a read are written only once its ``done`` is called; a link whose handler never
calls it leaves the messages unacknowledged, and the broker delivers them again to the next
connection under the same client id.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from controller.ingest.link import IngestLink
from tests.integration.controller.conftest import poll
from tests.integration.ingest_link.test_ingest_link import (
    Publisher,
    Received,
    no_leftover_link_thread,
    numbered,
)

__all__ = ["no_leftover_link_thread"]

EXPIRY_S = 120
"""Sessions these tests leave on the shared broker end two minutes after their last connection."""


class NeverStored(Received):
    """An ``on_batch`` whose messages are never stored: ``done`` is never called."""

    def __call__(self, batch: list[tuple[str, bytes]], done: Callable[[], None]) -> None:
        with self._lock:
            self.batches.append(list(batch))


class StoredLater(Received):
    """An ``on_batch`` that stores each read when the test says so (``release``)."""

    def __init__(self) -> None:
        super().__init__()
        self.dones: list[Callable[[], None]] = []
        self.released = threading.Event()

    def __call__(self, batch: list[tuple[str, bytes]], done: Callable[[], None]) -> None:
        with self._lock:
            self.batches.append(list(batch))
            self.dones.append(done)

    def release(self) -> None:
        with self._lock:
            dones, self.dones = self.dones, []
        for done in dones:
            done()


def persistent(url: str, filters: list[str], on_batch: Received, client_id: str) -> IngestLink:
    return IngestLink(url, filters, on_batch, client_id=client_id, session_expiry_s=EXPIRY_S)


def session_id() -> str:
    return f"jftest-session-{uuid.uuid4().hex[:10]}"


def test_messages_sent_while_the_link_is_down_arrive_when_it_connects_again(
    mosquitto: str, no_leftover_link_thread: None
) -> None:
    prefix = f"jflink/{uuid.uuid4().hex[:10]}"
    client_id = session_id()
    first = persistent(mosquitto, [f"{prefix}/+/telemetry"], Received(), client_id)
    first.start()
    assert first.protocol == 5, "Mosquitto speaks MQTT 5.0: session expiry and receive maximum"
    first.stop()

    publisher = Publisher(mosquitto)
    try:
        expected = numbered(300)
        publisher.publish(f"{prefix}/dev-1/telemetry", expected)  # accepted, nobody connected
    finally:
        publisher.close()

    received = Received()
    again = persistent(mosquitto, [f"{prefix}/+/telemetry"], received, client_id)
    again.start()
    try:
        poll(lambda: received.count() >= len(expected), 20.0, "the queued messages")
    finally:
        again.stop()
    assert received.payloads() == expected, "every message the broker accepted, once, in order"


def test_a_clean_session_loses_what_was_sent_while_it_was_down(
    mosquitto: str, no_leftover_link_thread: None
) -> None:
    """The behaviour before persistent sessions, kept for ``JETFLEET_INGEST_SESSION_EXPIRY_S=0``:
    the contrast shows the test above depends on the session, not on timing."""
    prefix = f"jflink/{uuid.uuid4().hex[:10]}"
    client_id = session_id()
    first = IngestLink(mosquitto, [f"{prefix}/+/telemetry"], Received(), client_id=client_id)
    first.start()
    first.stop()
    publisher = Publisher(mosquitto)
    try:
        publisher.publish(f"{prefix}/dev-1/telemetry", numbered(20))
    finally:
        publisher.close()
    received = Received()
    again = IngestLink(mosquitto, [f"{prefix}/+/telemetry"], received, client_id=client_id)
    again.start()
    try:
        publisher = Publisher(mosquitto)
        try:
            publisher.publish(f"{prefix}/dev-1/telemetry", [b"after"])
        finally:
            publisher.close()
        poll(lambda: received.count() >= 1, 20.0, "the message sent after the reconnection")
    finally:
        again.stop()
    assert received.payloads() == [b"after"]


def test_messages_handed_over_but_never_stored_are_delivered_again(
    mosquitto: str, no_leftover_link_thread: None
) -> None:
    """A controller killed between reading a batch and storing it: the broker still holds the
    messages (no PUBACK was written) and sends them again to the same client id."""
    prefix = f"jflink/{uuid.uuid4().hex[:10]}"
    client_id = session_id()
    lost = NeverStored()
    first = persistent(mosquitto, [f"{prefix}/+/telemetry"], lost, client_id)
    first.start()
    publisher = Publisher(mosquitto)
    expected = numbered(500)
    try:
        publisher.publish(f"{prefix}/dev-1/telemetry", expected)
        poll(lambda: lost.count() >= len(expected), 20.0, "the messages read, never stored")
    finally:
        publisher.close()
        first.stop()  # waits for the stores that never come, then leaves without PUBACKs

    received = Received()
    again = persistent(mosquitto, [f"{prefix}/+/telemetry"], received, client_id)
    again.start()
    try:
        poll(lambda: received.count() >= len(expected), 20.0, "the unacknowledged messages again")
    finally:
        again.stop()
    assert received.payloads() == expected


def test_acknowledgements_wait_for_the_store_and_stop_writes_those_that_came(
    mosquitto: str, no_leftover_link_thread: None
) -> None:
    """Stored after the read (``done`` later, from another thread): acknowledged then, and a
    link stopped after storing leaves nothing for the broker to send again."""
    prefix = f"jflink/{uuid.uuid4().hex[:10]}"
    client_id = session_id()
    later = StoredLater()
    link = persistent(mosquitto, [f"{prefix}/+/telemetry"], later, client_id)
    link.start()
    publisher = Publisher(mosquitto)
    expected = numbered(200)
    try:
        publisher.publish(f"{prefix}/dev-1/telemetry", expected)
        poll(lambda: later.count() >= len(expected), 20.0, "the messages read")
        threading.Thread(target=later.release).start()
    finally:
        publisher.close()
        link.stop()

    received = Received()
    again = persistent(mosquitto, [f"{prefix}/+/telemetry"], received, client_id)
    again.start()
    try:
        publisher = Publisher(mosquitto)
        try:
            publisher.publish(f"{prefix}/dev-1/telemetry", [b"marker"])
        finally:
            publisher.close()
        poll(lambda: received.count() >= 1, 20.0, "the marker")
    finally:
        again.stop()
    assert received.payloads() == [b"marker"], "the stored messages were acknowledged"


def test_replicas_in_one_shared_subscription_split_messages_and_keep_an_absent_ones_share(
    mosquitto: str, no_leftover_link_thread: None
) -> None:
    """Two replicas' links in ``$share/jetfleet-ingest/...``: each message goes to one of
    them; while one is away (stopped, or killed) the broker keeps its share in its session,
    and the replica that comes back under its name receives it. Nothing is lost, and no
    message reaches both."""
    prefix = f"jflink/{uuid.uuid4().hex[:10]}"
    shared = [f"$share/jetfleet-ingest/{prefix}/+/telemetry"]
    ids = [session_id(), session_id()]
    one, two = Received(), Received()
    links = [persistent(mosquitto, shared, one, ids[0]), persistent(mosquitto, shared, two, ids[1])]
    for link in links:
        link.start()
    publisher = Publisher(mosquitto)
    try:
        before = numbered(200)
        publisher.publish(f"{prefix}/dev-1/telemetry", before)
        poll(lambda: one.count() + two.count() >= len(before), 20.0, "the first messages")
        assert one.count(), "the broker splits the messages between the links"
        assert two.count(), "the broker splits the messages between the links"
        links[1].stop()
        during = numbered(200, start=200)
        publisher.publish(f"{prefix}/dev-1/telemetry", during)
        back = Received()
        links[1] = persistent(mosquitto, shared, back, ids[1])
        links[1].start()
        total = len(before) + len(during)
        poll(
            lambda: one.count() + two.count() + back.count() >= total,
            20.0,
            "every message, the absent replica's share included",
        )
    finally:
        publisher.close()
        for link in links:
            link.stop()
    everything = one.payloads() + two.payloads() + back.payloads()
    assert sorted(everything) == sorted(before + during), "each message once, none lost"
