"""Publishing every device's document again (a new leader, a reconnect, re-signing) holds the
fleet's lock one chunk of devices at a time: a deploy or a rollout wave arriving meanwhile goes
out after the chunk in progress, not after the whole fleet (at 10,000 devices the new leader's
first wave waited about 10 s behind its own republish; bench/scale.py). Each device still gets
its current document exactly once."""

from __future__ import annotations

import math
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
"""Eight chunks of three."""
WAIT_S = 30.0


class GatedBroker:
    """The bus, as slow as the test says: each ``send_all`` counts itself in, then waits for
    the gate (open unless the test closes it) before it records the devices of the call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.entered: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self._cond = threading.Condition()

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        self.publish_all([(topic, payload)], qos=qos, retain=retain)

    def publish_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> None:
        self.send_all(messages, qos=qos, retain=retain)()

    def send_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> Callable[[], None]:
        devices = [topic.split("/")[-2] for topic, _ in messages]
        with self._cond:
            self.entered.append(devices)
            self._cond.notify_all()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        with self._cond:
            self.calls.append(devices)
            self._cond.notify_all()
        return lambda: None


class Asked:
    """A ``yield_to`` answering ``busy``, counting how often the republish asked."""

    def __init__(self, busy: threading.Event) -> None:
        self.busy = busy
        self.count = 0

    def __call__(self) -> bool:
        self.count += 1
        return self.busy.is_set()


def test_a_deploy_during_a_fleet_republish_goes_out_before_it_ends(
    sqlite_url: str, mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployments, "REPUBLISH_CHUNK", 3)
    with fleet_parts(sqlite_url, mosquitto, tmp_path / "data") as parts:
        for device_id in DEVICES:
            parts.add_device(device_id)
        parts.add_version("detector", "1.0.0")
        broker = GatedBroker()
        fleet = Fleet(
            parts.repo, parts.catalog, parts.configs, broker, parts.topics, PUBLIC_URL,
            signer=parts.signer,
        )  # fmt: skip
        broker.gate.clear()  # the first chunk stays in the broker, holding the fleet lock
        republish = threading.Thread(target=fleet.republish_all)
        republish.start()
        deploy = threading.Thread(
            target=fleet.deploy_to, args=(["gw-23"], "detector", "1.0.0", None)
        )
        try:
            poll(lambda: broker.entered, WAIT_S, "the republish to send its first chunk")
            deploy.start()
            poll(
                lambda: fleet._lock._foreground_waiting > 0,
                WAIT_S,
                "the deploy to wait for the fleet lock",
            )
            assert len(broker.entered) == 1, broker.entered  # nothing else went meanwhile
        finally:
            broker.gate.set()
            republish.join(WAIT_S)
            if deploy.ident is not None:
                deploy.join(WAIT_S)
        assert not republish.is_alive()
        assert not deploy.is_alive()

        index = broker.calls.index(["gw-23"])
        assert index < len(broker.calls) - 1, broker.calls  # not queued behind the whole fleet
        assert index == 1, broker.calls  # right after the chunk in progress
        republished = [d for i, call in enumerate(broker.calls) if i != index for d in call]
        assert sorted(republished) == DEVICES


@contextmanager
def gated_fleet(sqlite_url: str, mosquitto: str, data: Path) -> Iterator[tuple[Fleet, GatedBroker]]:
    """A fleet of DEVICES publishing through a GatedBroker."""
    with fleet_parts(sqlite_url, mosquitto, data) as parts:
        for device_id in DEVICES:
            parts.add_device(device_id)
        broker = GatedBroker()
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
    with gated_fleet(sqlite_url, mosquitto, tmp_path / "data") as (fleet, broker):
        busy = threading.Event()
        busy.set()
        asked = Asked(busy)
        republish = threading.Thread(target=fleet.republish_all, args=(asked,))
        republish.start()
        try:
            # asked again after answering busy: it waited instead of sending the first chunk
            poll(lambda: asked.count >= 5, WAIT_S, "the republish to ask the loop 5 times")
            assert broker.entered == []  # the loop is at work: nothing republished yet
        finally:
            busy.clear()
            republish.join(WAIT_S)
        assert not republish.is_alive()
        assert sorted(d for call in broker.calls for d in call) == DEVICES


def test_a_republish_waits_for_a_busy_rollout_loop_only_so_long(
    sqlite_url: str, mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop that never pauses (one rollout after another) delays the republish by at most
    YIELD_MAX_S in all: a device whose document the broker lost still gets it."""
    monkeypatch.setattr(deployments, "REPUBLISH_CHUNK", 8)
    monkeypatch.setattr(deployments, "YIELD_MAX_S", 1.0)
    with gated_fleet(sqlite_url, mosquitto, tmp_path / "data") as (fleet, broker):
        asked = Asked(threading.Event())
        asked.busy.set()  # never pauses
        began = time.monotonic()
        assert fleet.republish_all(asked) == len(DEVICES)
        assert time.monotonic() - began >= 1.0
        # YIELD_MAX_S in all, not per chunk: the budget is spent before the first chunk (one
        # ask per YIELD_POLL_S) and the three chunks after it do not ask again
        assert asked.count <= math.ceil(1.0 / deployments.YIELD_POLL_S) + 1, asked.count
        assert sorted(d for call in broker.calls for d in call) == DEVICES
