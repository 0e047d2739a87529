"""The agent's events: numbered per boot and sent through the disk spool.

Every part that tells the fleet something happened (the slot pipeline, the engine resolver and
cache, the trust checks, power modes, jobs) is handed :meth:`EventPublisher.emit` as its
``emit(kind, slot, message, **data)``. The spool (:mod:`agent.link.outbox`) keeps events across a
broker outage; before it is open (the first instants of start-up) an event is logged, not sent.

Concurrency: ``emit`` is called from the loop, jobs, builder-output and store threads alike; the
sequence number is taken under a lock, the outbox is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from agent.link.outbox import Outbox
from agent.slots.records import utcnow
from shared.messages import Event, EventKind
from shared.topics import Channel

log = logging.getLogger(__name__)


class EventPublisher:
    """Events of one agent boot: ids ``<device>:<boot>:e<n>``."""

    def __init__(self, device_id: str, boot: str) -> None:
        self._device_id = device_id
        self.boot = boot
        """This run's id (telemetry samples carry it too)."""
        self._seq = 0
        self._lock = threading.Lock()
        self._outbox: Outbox | None = None

    def attach(self, outbox: Outbox) -> None:
        """Send through ``outbox`` from now on."""
        self._outbox = outbox

    def emit(self, kind: EventKind, slot: str | None, message: str, **data: Any) -> None:
        """Publish an Event (thread-safe)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        event = Event(
            device_id=self._device_id,
            event_id=f"{self._device_id}:{self.boot}:e{seq}",
            ts=utcnow(),
            kind=kind,
            slot=slot,
            message=message,
            data=data,
        )
        outbox = self._outbox
        if outbox is None:
            log.debug("event before the outbox opened, not sent: %s", message)
            return
        outbox.send(Channel.EVENTS, event, event.event_id)
