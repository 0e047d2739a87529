"""The rollout lease outlives a long tick: it is renewed while the leader works, not only
between ticks. Before, a tick longer than the TTL (a 5,000-device wave, or the republish of
10,000 documents at a takeover, on a busy host) let another replica take the lease halfway, so
two replicas led at once and each takeover republished every document (bench/scale.py at
10,000 devices: the lease changed hands every few seconds without any replica dying). A tick
stuck for longer than ``max_tick_s`` still lets the lease lapse."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from sqlalchemy import Engine

from controller.db import migrate
from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.db.schema import utcnow
from controller.db.session import make_engine
from controller.fleet.deployments import Fleet
from controller.rollouts.loop import LEASE, RolloutLoop

TTL_S = 1.0


class SlowTick(RolloutStore):
    """The rollouts table; listing the rollouts to run takes until ``release`` is set."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.release = threading.Event()
        self.ticking = threading.Event()

    def to_run(self) -> list[str]:
        self.ticking.set()
        self.release.wait(30)
        return []


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[Engine]:
    migrate.upgrade(sqlite_url)
    made = make_engine(sqlite_url)
    yield made
    made.dispose()


def loop(store: RolloutStore, holder: str, **kw: Any) -> RolloutLoop:
    fleet = cast(Fleet, None)  # these ticks never reach a rollout
    return RolloutLoop(
        store, Repository(store._engine), fleet, lease_ttl_s=TTL_S, holder=holder, **kw
    )


def holder(engine: Engine) -> str | None:
    return RolloutStore(engine).lease_holder(LEASE, utcnow())


def test_a_tick_longer_than_the_lease_keeps_it(engine: Engine) -> None:
    slow = SlowTick(engine)
    leader = loop(slow, "a")
    other = loop(RolloutStore(engine), "b")
    leader.start()
    try:
        assert slow.ticking.wait(10)
        assert holder(engine) == "a"
        until = time.monotonic() + 4 * TTL_S
        while time.monotonic() < until:
            assert not other.run_once(), "b took the lease while a was still ticking"
            time.sleep(0.1)
        assert holder(engine) == "a"
    finally:
        slow.release.set()
        leader.stop()


def test_a_tick_stuck_past_max_tick_lets_the_lease_lapse(engine: Engine) -> None:
    slow = SlowTick(engine)
    leader = loop(slow, "a", max_tick_s=2 * TTL_S)
    other = loop(RolloutStore(engine), "b")
    leader.start()
    try:
        assert slow.ticking.wait(10)
        deadline = time.monotonic() + 10 * TTL_S
        while not other.run_once():
            assert time.monotonic() < deadline, "the stuck leader kept the lease"
            time.sleep(0.1)
        assert holder(engine) == "b"
    finally:
        slow.release.set()
        leader.stop()
