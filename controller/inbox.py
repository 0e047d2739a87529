"""The inbox between the MQTT network thread and ingest.

paho acknowledges a QoS 1 message only after ``on_message`` returns. If ingest ran inside that
callback, one slow database write would hold every acknowledgement behind it; the broker then
queues the controller's messages and, past its ``max_queued_messages`` (1,000 by default in
Mosquitto), drops them: a burst of devices reporting at once would silently never enrol. The
inbox makes the callback a queue put, and one worker thread feeds ingest in arrival order.

Bounded: when the worker falls ``maxsize`` messages behind, ``put`` blocks the network thread,
which is the backpressure the broker understands. A message is acknowledged once it is in the
inbox, so a controller crash loses what was still queued; reported state and presence are
retained on the broker and arrive again on reconnect, telemetry samples in the queue are lost.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

_STOP = ("", b"")


class Inbox:
    """A bounded FIFO of (topic, payload) drained by one worker thread into ``handle``."""

    def __init__(self, handle: Callable[[str, bytes], None], maxsize: int = 100_000) -> None:
        self._handle = handle
        self._queue: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=maxsize)
        self._thread = threading.Thread(target=self._run, name="jetfleet-inbox", daemon=True)
        self._high_water = 0

    def start(self) -> None:
        self._thread.start()

    def put(self, topic: str, payload: bytes) -> None:
        """Queue one message (blocks while the inbox is full)."""
        self._queue.put((topic, payload))
        self._high_water = max(self._high_water, self._queue.qsize())

    @property
    def depth(self) -> int:
        """Messages waiting now."""
        return self._queue.qsize()

    @property
    def high_water(self) -> int:
        """The most messages that were waiting at once."""
        return self._high_water

    def stop(self, timeout_s: float = 30.0) -> None:
        """Handle what is queued, then stop the worker."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._handle(*item)
            except Exception:
                logger.exception("ingest of %s failed; the message was dropped", item[0])
