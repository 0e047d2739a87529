"""Simulated gateways that take agent release orders, over the real broker.

Each is a :class:`tests.integration.rollouts.sim_agents.SimAgent` (it serves the slots of its
desired document) that also reports an agent version and architecture, and answers an
:class:`~shared.agent_releases.AgentReleaseOrder` the way the real agent ends an update:
``confirm`` (it runs the new release and reports ``confirmed``), ``roll_back`` (the new release
did not confirm: the previous one runs again and it reports ``rolled_back``) or ``refuse``.
It sends the final phase as an ``agent_update`` event too, and keeps every raw desired
document it received (to check what was signed and what the JSON holds).
"""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone
from typing import Any, Literal

import paho.mqtt.client as mqtt

from shared.agent_releases import AgentReleaseOrder, AgentUpdateStatus
from shared.codec import encode
from shared.facts import DeviceFacts
from shared.messages import DesiredState, Event, ReportedState
from shared.topics import Channel, Topics
from tests.integration.rollouts.sim_agents import SimAgent

Outcome = Literal["confirm", "roll_back", "refuse"]


class UpdatingAgent(SimAgent):
    """A simulated gateway running agent ``agent_version`` on ``arch``."""

    def __init__(
        self,
        broker_url: str,
        topics: Topics,
        device_id: str,
        labels: dict[str, str],
        *,
        agent_version: str = "0.2.0",
        arch: str = "x86_64",
        outcome: Outcome = "confirm",
    ) -> None:
        super().__init__(broker_url, topics, device_id, labels)
        self.agent_version = agent_version
        self.arch = arch
        self.outcome = outcome
        self.update: AgentUpdateStatus | None = None
        self.orders: list[AgentReleaseOrder] = []
        """Every order received, in order (one per document that carried one)."""
        self.raw: list[bytes] = []
        """Every desired document received, as published."""
        self._agent_lock = threading.Lock()

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with self._agent_lock:
            self.raw.append(bytes(msg.payload))
        super()._on_message(client, userdata, msg)

    def _apply(self, desired: DesiredState) -> None:
        order = desired.agent
        if order is not None:
            with self._agent_lock:
                self.orders.append(order)
                new = self.update is None or self.update.version != order.version
                if new and order.version != self.agent_version:
                    self._finish(order)
        super()._apply(desired)

    def _finish(self, order: AgentReleaseOrder) -> None:
        previous = self.agent_version
        now = datetime.now(timezone.utc)
        if self.outcome == "confirm":
            self.agent_version = order.version
            self.update = AgentUpdateStatus(
                version=order.version, phase="confirmed", previous=previous, at=now
            )
        elif self.outcome == "roll_back":
            self.update = AgentUpdateStatus(
                version=order.version,
                phase="rolled_back",
                previous=previous,
                error="the new agent exited at start (status 1) three times",
                at=now,
            )
        else:
            self.update = AgentUpdateStatus(
                version=order.version,
                phase="refused",
                previous=previous,
                error="release signed by another key",
                at=now,
            )
        self.send_event(self.update)

    def send_event(self, update: AgentUpdateStatus) -> None:
        """An ``agent_update`` event with ``update`` as its data."""
        event = Event(
            device_id=self.device_id,
            event_id=uuid.uuid4().hex,
            ts=update.at,
            kind="agent_update",
            message=f"agent update {update.version}: {update.phase}",
            data=update.model_dump(mode="json"),
        )
        self.client.publish(self.topics.device(self.device_id, Channel.EVENTS), encode(event), 1)

    def state(self) -> ReportedState:
        base = super().state()
        facts = DeviceFacts(hostname=self.device_id, os="Linux", arch=self.arch, simulated=True)
        return base.model_copy(
            update={
                "agent_version": self.agent_version,
                "agent_update": self.update,
                "facts": facts,
            }
        )
