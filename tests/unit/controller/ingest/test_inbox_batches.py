"""A lane with a backlog hands it over at once (``handle_many``: the controller stores the
reported states of a backlog in one transaction), in arrival order, at most BATCH_MAX at a time;
a message that finds the lane empty is handled alone; what is queued before ``stop`` is handled."""

from __future__ import annotations

import threading

from controller.ingest.inbox import BATCH_MAX, Inbox


def test_a_backlog_is_handed_over_in_order_in_batches_and_nothing_is_left_at_stop() -> None:
    gate, took = threading.Event(), threading.Event()
    singles: list[bytes] = []
    batches: list[list[bytes]] = []

    def handle(_topic: str, payload: bytes) -> None:
        singles.append(payload)
        took.set()
        gate.wait(10)  # the first message holds the lane while the backlog builds up

    def handle_many(items: list[tuple[str, bytes]]) -> None:
        batches.append([payload for _topic, payload in items])

    inbox = Inbox(handle, handle_many=handle_many)
    inbox.start()
    sent = [str(i).encode() for i in range(BATCH_MAX + 250)]
    try:
        inbox.put("p/gw-1/reported", b"first")
        assert took.wait(10), "the lane took the first message"
        for payload in sent:
            inbox.put("p/gw-1/reported", payload)
        gate.set()
    finally:
        inbox.stop()
    assert singles == [b"first"]
    assert [len(b) for b in batches] == [BATCH_MAX, 250]
    assert [p for b in batches for p in b] == sent
