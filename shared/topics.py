"""MQTT topic names: built and parsed here and nowhere else.

Layout: ``<prefix>/<device>/<channel>`` with the prefix ``jetfleet/v1`` by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

DEFAULT_PREFIX = "jetfleet/v1"

DEVICE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)


class Channel(str, Enum):
    """The five per-device channels (docs/architecture.md#the-wire-contract)."""

    DESIRED = "desired"
    REPORTED = "reported"
    TELEMETRY = "telemetry"
    EVENTS = "events"
    STATUS = "status"


AGENT_PUBLISHES = (Channel.REPORTED, Channel.TELEMETRY, Channel.EVENTS, Channel.STATUS)
"""Channels an agent publishes on (and the controller subscribes to)."""


class TopicError(ValueError):
    """A device id or topic that does not fit the contract."""


def check_device_id(device_id: str) -> str:
    """Return ``device_id`` when it is safe as one topic level and one path segment."""
    if not _DEVICE_ID.fullmatch(device_id):
        raise TopicError(
            f"invalid device id {device_id!r}: use 1-64 characters of A-Z a-z 0-9 . _ - "
            "starting with a letter or digit"
        )
    return device_id


@dataclass(frozen=True)
class Topics:
    """Topic builder for one prefix."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix or self.prefix.startswith("/") or self.prefix.endswith("/"):
            raise TopicError(f"invalid topic prefix {self.prefix!r}")
        if any(c in self.prefix for c in "+#"):
            raise TopicError(f"topic prefix {self.prefix!r} must not contain wildcards")

    def device(self, device_id: str, channel: Channel) -> str:
        """The topic of one device's channel."""
        return f"{self.prefix}/{check_device_id(device_id)}/{channel.value}"

    def every_device(self, channel: Channel) -> str:
        """Subscription filter matching ``channel`` of every device."""
        return f"{self.prefix}/+/{channel.value}"

    def parse(self, topic: str) -> tuple[str, Channel] | None:
        """Split a concrete topic into (device id, channel); None when it is not ours."""
        head = self.prefix + "/"
        if not topic.startswith(head):
            return None
        parts = topic[len(head) :].split("/")
        if len(parts) != 2:
            return None
        device_id, channel_name = parts
        try:
            channel = Channel(channel_name)
        except ValueError:
            return None
        if not _DEVICE_ID.fullmatch(device_id):
            return None
        return device_id, channel
