"""What the fleet publishes through, and what it asks about each document it builds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from shared.agent_releases import AgentReleaseOrder

AgentOrders = Callable[[Sequence[str]], Mapping[str, AgentReleaseOrder]]
"""The agent release each of these devices is ordered to run (devices with none left out)."""


class Publisher(Protocol):
    """Publishes one MQTT message (the bus)."""

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        """Publish and wait for the broker's acknowledgement."""

    def publish_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> None:
        """Publish every message, then wait for all the acknowledgements."""

    def send_all(
        self, messages: Sequence[tuple[str, bytes]], *, qos: int = 1, retain: bool = True
    ) -> Callable[[], None]:
        """Publish every message; the returned call waits for all the acknowledgements."""
