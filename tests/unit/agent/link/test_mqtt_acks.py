"""PUBACK bookkeeping: an ack counts only when it came after the waiter's mark."""

from __future__ import annotations

import threading

from agent.link.mqtt_link import Acks


def test_an_ack_that_beats_publish_returning_still_counts() -> None:
    acks = Acks()
    since = acks.mark()
    acks.add(7)
    assert acks.wait(7, since, timeout_s=0.01, alive=lambda: True)


def test_an_old_ack_of_a_reused_message_id_does_not_count() -> None:
    acks = Acks()
    acks.add(7)
    since = acks.mark()
    assert not acks.seen(7, since)
    assert not acks.wait(7, since, timeout_s=0.05, alive=lambda: True)
    acks.add(7)
    assert acks.seen(7, since)


def test_waiting_ends_early_when_the_connection_is_lost() -> None:
    acks = Acks()
    since = acks.mark()
    lost = threading.Event()
    timer = threading.Timer(0.1, lost.set)
    timer.start()
    assert not acks.wait(7, since, timeout_s=30, alive=lambda: not lost.is_set())
    timer.join()


def test_an_ack_from_another_thread_wakes_the_waiter() -> None:
    acks = Acks()
    since = acks.mark()
    timer = threading.Timer(0.05, acks.add, args=(3,))
    timer.start()
    assert acks.wait(3, since, timeout_s=10, alive=lambda: True)
    timer.join()
