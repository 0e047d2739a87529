"""The agent's outgoing telemetry and events: spooled on disk first, forwarded in order.

Every sample and event is committed to the :class:`~agent.link.spool.Spool` under its idempotency
key
(``sample_id``, ``event_id``) and then handed to the :class:`~agent.link.spool.Forwarder`, which
publishes the oldest waiting message until the broker acknowledges it. A broker outage therefore
only delays messages; when the spool's size or age bound is reached the oldest go first and the
count is reported in every sample (``spool_dropped``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from pydantic import BaseModel

from agent.errors import StartupError
from agent.link.spool import SPOOL_FILE, Forwarder, Publish, Spool, SpoolError
from shared.codec import encode
from shared.topics import Channel

log = logging.getLogger(__name__)


class Outbox:
    """A spool and its forwarder; ``send`` never blocks on the network."""

    def __init__(self, spool: Spool, publish: Publish, retry_cap_s: float = 30.0) -> None:
        self.spool = spool
        self._forwarder = Forwarder(spool, publish, retry_cap_s=retry_cap_s)
        self._lock = threading.Lock()
        self._closed = False

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
        """Spool ``message`` under ``key`` and wake the forwarder; False if it could not be kept."""
        payload = encode(message)
        with self._lock:
            if self._closed:
                log.debug("outbox closed; not sending %s", key)
                return False
            try:
                self.spool.append(channel.value, payload, key)
            except (SpoolError, ValueError) as exc:
                log.error("cannot spool %s %s: %s", channel.value, key, exc)
                return False
        self._forwarder.notify()
        return True

    @property
    def dropped(self) -> int | None:
        """Messages dropped to stay within the spool's bounds, ever; None once closed."""
        with self._lock:
            return None if self._closed else self.spool.dropped

    def close(self) -> None:
        """Stop forwarding and close the spool; waiting messages stay on disk for the next run."""
        self._forwarder.stop()
        with self._lock:
            if not self._closed:
                self._closed = True
                self.spool.close()
