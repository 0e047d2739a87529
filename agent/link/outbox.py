"""The agent's outgoing telemetry and events: spooled on disk first, forwarded in order.

Every sample and event is committed to the :class:`~agent.link.spool.Spool` under its idempotency
key
(``sample_id``, ``event_id``) and then handed to the :class:`~agent.link.spool.Forwarder`, which
publishes the oldest waiting message until the broker acknowledges it. A broker outage therefore
only delays messages; when the spool's size or age bound is reached the oldest go first and the
count is reported in every sample (``spool_dropped``).

When the spool cannot be written (the state directory is full), messages wait in memory, in
order, up to :data:`HELD_MAX` (the oldest go first beyond it, counted in ``dropped``), and are
spooled at the next ``send`` once there is space again: a full disk delays telemetry, it does
not lose it (found by the soak bench).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path

from pydantic import BaseModel

from agent.errors import StartupError
from agent.link.spool import SPOOL_FILE, Forwarder, Publish, Spool, SpoolError, entry_size
from shared.codec import encode
from shared.topics import Channel

log = logging.getLogger(__name__)

HELD_MAX = 3600
"""Messages kept in memory while the spool cannot be written (an hour of 1 s telemetry)."""


class Outbox:
    """A spool and its forwarder; ``send`` never blocks on the network."""

    def __init__(self, spool: Spool, publish: Publish, retry_cap_s: float = 30.0) -> None:
        self.spool = spool
        self._forwarder = Forwarder(spool, publish, retry_cap_s=retry_cap_s)
        self._lock = threading.Lock()
        self._closed = False
        self._held: deque[tuple[str, bytes, str]] = deque()
        """Messages the spool could not take yet (disk full), oldest first."""
        self._held_dropped = 0

    @classmethod
    def open(cls, state_dir: Path, max_bytes: int, max_age_s: float, publish: Publish) -> Outbox:
        """The outbox over ``state_dir/spool.sqlite3``; StartupError when it cannot be opened."""
        try:
            spool = Spool(state_dir / SPOOL_FILE, max_bytes=max_bytes, max_age_s=max_age_s)
        except SpoolError as exc:
            raise StartupError(str(exc)) from exc
        return cls(spool, publish)

    def start(self) -> None:
        """Start forwarding on a background thread."""
        self._forwarder.start()

    def wake(self) -> None:
        """Try forwarding now (e.g. the broker is back) instead of after the backoff."""
        self._forwarder.notify()

    def send(self, channel: Channel, message: BaseModel, key: str) -> bool:
        """Spool ``message`` under ``key`` and wake the forwarder; False if it could not be kept.

        While the spool cannot be written the message waits in memory (bounded) and is spooled,
        after the ones waiting before it, by a later ``send`` once the spool takes writes again.
        """
        payload = encode(message)
        with self._lock:
            if self._closed:
                log.debug("outbox closed; not sending %s", key)
                return False
            if entry_size(channel.value, key, payload) > self.spool.max_bytes:
                log.error(
                    "cannot spool %s %s: %d bytes never fit a spool of %d bytes; raise "
                    "spool_max_mib", channel.value, key, len(payload), self.spool.max_bytes,
                )  # fmt: skip
                return False
            self._held.append((channel.value, payload, key))
            if len(self._held) > HELD_MAX:
                self._held.popleft()
                self._held_dropped += 1
            try:
                self._spool_held()
            except SpoolError as exc:
                log.error(
                    "cannot spool %s %s: %s; kept in memory until the spool can be written "
                    "(%d waiting, at most %d)",
                    channel.value, key, exc, len(self._held), HELD_MAX,
                )  # fmt: skip
                return True
        self._forwarder.notify()
        return True

    def _spool_held(self) -> None:
        """Move waiting messages into the spool, oldest first (caller holds the lock)."""
        while self._held:
            channel, payload, key = self._held[0]
            self.spool.append(channel, payload, key)
            self._held.popleft()

    @property
    def dropped(self) -> int | None:
        """Messages dropped to stay within the spool's bounds, ever; None once closed."""
        with self._lock:
            return None if self._closed else self.spool.dropped + self._held_dropped

    def close(self) -> None:
        """Stop forwarding and close the spool; waiting messages stay on disk for the next run."""
        self._forwarder.stop()
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._spool_held()
                except SpoolError as exc:
                    log.error("%d messages lost at stop: %s", len(self._held), exc)
                self.spool.close()
