"""Publishing every device's document again (a new leader, a reconnect, re-signing) holds the
fleet's lock one chunk of devices at a time: a deploy or a rollout wave arriving meanwhile goes
out after the chunk in progress, not after the whole fleet (at 10,000 devices the new leader's
first wave waited about 10 s behind its own republish; bench/scale.py). Each device still gets
its current document exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from controller.fleet import deployments
from controller.fleet.deployments import Fleet
from tests.integration.controller.conftest import poll
from tests.integration.fleet_parts import PUBLIC_URL, fleet_parts

DEVICES = [f"gw-{i:02d}" for i in range(24)]
"""Eight chunks of three at 0.5 s each: the deploy has 3.5 s to go out before the republish ends
(with 4 chunks of 0.2 s, a deploy on a loaded machine sometimes came after the last one)."""


class SlowBroker:
    """The bus: each ``publish_all`` takes 0.5 s; records the devices of each call, in order."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        self.publish_all([(topic, payload)], qos=qos, retain=retain)

    def publish_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> None:
        self.send_all(messages, qos=qos, retain=retain)()

    def send_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> Callable[[], None]:
        time.sleep(0.5)
        with self._lock:
            self.calls.append([topic.split("/")[-2] for topic, _ in messages])
        return lambda: None


def test_a_deploy_during_a_fleet_republish_goes_out_before_it_ends(
    sqlite_url: str, mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployments, "REPUBLISH_CHUNK", 3)
    with fleet_parts(sqlite_url, mosquitto, tmp_path / "data") as parts:
        for device_id in DEVICES:
            parts.add_device(device_id)
        parts.add_version("detector", "1.0.0")
        broker = SlowBroker()
        fleet = Fleet(
            parts.repo, parts.catalog, parts.configs, broker, parts.topics, PUBLIC_URL,
            signer=parts.signer,
        )  # fmt: skip
        republish = threading.Thread(target=fleet.republish_all)
        republish.start()
        poll(lambda: broker.calls, 10, "the republish to send its first chunk")
        fleet.deploy_to(["gw-23"], "detector", "1.0.0", None)
        republish.join(30)

        deploy = broker.calls.index(["gw-23"])
        assert deploy < len(broker.calls) - 1, broker.calls  # not queued behind the whole fleet
        republished = [d for i, call in enumerate(broker.calls) if i != deploy for d in call]
        assert sorted(republished) == DEVICES


@contextmanager
def slow_fleet(sqlite_url: str, mosquitto: str, data: Path) -> Iterator[tuple[Fleet, SlowBroker]]:
    """A fleet of DEVICES publishing through a SlowBroker."""
    with fleet_parts(sqlite_url, mosquitto, data) as parts:
        for device_id in DEVICES:
            parts.add_device(device_id)
        broker = SlowBroker()
        fleet = Fleet(
            parts.repo, parts.catalog, parts.configs, broker, parts.topics, PUBLIC_URL,
            signer=parts.signer,
        )  # fmt: skip
        yield fleet, broker


def test_a_republish_waits_while_the_rollout_loop_is_at_work(
    sqlite_url: str, mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new leader's republish of every document yields to the rollout it took over: no chunk
    goes out while the loop is busy; once it is idle, every device gets its document once."""
    monkeypatch.setattr(deployments, "REPUBLISH_CHUNK", 8)
    with slow_fleet(sqlite_url, mosquitto, tmp_path / "data") as (fleet, broker):
        busy = threading.Event()
        busy.set()
        republish = threading.Thread(target=fleet.republish_all, args=(busy.is_set,))
        republish.start()
        time.sleep(1.5)
        assert broker.calls == []  # the loop is at work: nothing republished yet
        busy.clear()
        republish.join(30)
        assert not republish.is_alive()
        assert sorted(d for call in broker.calls for d in call) == DEVICES


def test_a_republish_waits_for_a_busy_rollout_loop_only_so_long(
    sqlite_url: str, mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop that never pauses (one rollout after another) delays the republish by at most
    YIELD_MAX_S in all: a device whose document the broker lost still gets it."""
    monkeypatch.setattr(deployments, "REPUBLISH_CHUNK", 8)
    monkeypatch.setattr(deployments, "YIELD_MAX_S", 1.0)
    with slow_fleet(sqlite_url, mosquitto, tmp_path / "data") as (fleet, broker):
        began = time.monotonic()
        assert fleet.republish_all(lambda: True) == len(DEVICES)
        assert time.monotonic() - began >= 1.0
        assert sorted(d for call in broker.calls for d in call) == DEVICES
