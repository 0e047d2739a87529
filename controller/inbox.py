"""The inbox between the MQTT network thread and ingest.

paho acknowledges a QoS 1 message only after ``on_message`` returns. If ingest ran inside that
callback, one slow database write would hold every acknowledgement behind it; the broker then
queues the controller's messages and, past its ``max_queued_messages`` (1,000 by default in
Mosquitto), drops them: a burst of devices reporting at once would silently never enrol. The
inbox makes the callback a queue put; worker threads feed ingest.

Lanes: telemetry is the bulk of the traffic, and state (reported, status, events) is what
deploys and rollouts wait for. Each lane named in ``lanes`` (by the topic's last level) gets its
own FIFO and worker, everything else shares the default lane, so a telemetry backlog never
delays a device's reported state. Order is kept within a lane, which is what matters: one
device's reported documents stay in order, and so do its telemetry samples.

Bounded: when a lane's worker falls ``maxsize`` messages behind, ``put`` blocks the network
thread, which is the backpressure the broker understands. A message is acknowledged once it is
in the inbox, so a controller crash loses what was still queued; reported state and presence are
retained on the broker and arrive again on reconnect, telemetry samples in the queue are lost.

Gated: ``admit`` (ingest's size check) sees every message before it is queued, so an oversized
payload is counted and dropped on the network thread instead of waiting in memory.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

_STOP = ("", b"")


class _Lane:
    def __init__(self, name: str, handle: Callable[[str, bytes], None], maxsize: int) -> None:
        self.queue: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=maxsize)
        self._handle = handle
        self.thread = threading.Thread(target=self._run, name=f"jetfleet-inbox-{name}", daemon=True)
        self.high_water = 0

    def put(self, item: tuple[str, bytes]) -> None:
        self.queue.put(item)
        self.high_water = max(self.high_water, self.queue.qsize())

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _STOP:
                return
            try:
                self._handle(*item)
            except Exception:
                logger.exception("ingest of %s failed; the message was dropped", item[0])


class Inbox:
    """Bounded FIFOs of (topic, payload), one per lane, drained by one worker each."""

    def __init__(
        self,
        handle: Callable[[str, bytes], None],
        lanes: Sequence[str] = (),
        maxsize: int = 100_000,
        admit: Callable[[str, bytes], bool] | None = None,
    ) -> None:
        self._admit = admit
        self._default = _Lane("state", handle, maxsize)
        self._lanes = {name: _Lane(name, handle, maxsize) for name in lanes}

    def _all(self) -> list[_Lane]:
        return [self._default, *self._lanes.values()]

    def start(self) -> None:
        for lane in self._all():
            lane.thread.start()

    def put(self, topic: str, payload: bytes) -> None:
        """Queue one message on its lane (blocks while that lane is full) unless refused."""
        if self._admit is not None and not self._admit(topic, payload):
            return
        lane = self._lanes.get(topic.rpartition("/")[2], self._default)
        lane.put((topic, payload))

    @property
    def depth(self) -> int:
        """Messages waiting now, over all lanes."""
        return sum(lane.queue.qsize() for lane in self._all())

    @property
    def high_water(self) -> int:
        """The most messages that were waiting at once in any one lane."""
        return max(lane.high_water for lane in self._all())

    def stop(self, timeout_s: float = 30.0) -> None:
        """Handle what is queued, then stop the workers."""
        for lane in self._all():
            if lane.thread.is_alive():
                lane.queue.put(_STOP)
        for lane in self._all():
            lane.thread.join(timeout_s)
