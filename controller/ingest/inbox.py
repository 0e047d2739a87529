"""The inbox between the MQTT network thread and ingest.

paho acknowledges a QoS 1 message only after ``on_message`` returns. If ingest ran inside that
callback, one slow database write would hold every acknowledgement behind it; the broker then
queues the controller's messages and, past its ``max_queued_messages`` (1,000 by default in
Mosquitto), drops them: a burst of devices reporting at once would silently never enrol. The
inbox makes the callback a queue put; worker threads feed ingest.

Lanes: each lane named in ``lanes`` (by the topic's last level) gets its own FIFO and worker,
everything else shares the default lane, so a backlog on one channel never delays another.
(Telemetry, the bulk of the traffic, no longer comes through here: it has its own connection,
:class:`controller.ingest.link.IngestLink`, so it cannot delay a device's reported state.)
Order is kept within a lane, which is what matters: one device's reported documents stay in
order.

Bounded: when a lane's worker falls ``maxsize`` messages behind, ``put`` blocks the network
thread, which is the backpressure the broker understands. A message is acknowledged once it is
in the inbox, so a controller crash loses what was still queued; reported state and presence are
retained on the broker and arrive again on reconnect, telemetry samples in the queue are lost.

Gated: ``admit`` (ingest's size check) sees every message before it is queued, so an oversized
payload is counted and dropped on the network thread instead of waiting in memory.

Supervised: a message whose ingest raises is logged and dropped, and the lane goes on. Anything
that still ends a lane's loop (an exception outside ``Exception``, such as a ``SystemExit`` from
a library, or a bug in the lane itself) would leave its queue filling until ``put`` blocked the
network thread for good; each worker runs under :class:`shared.supervision.Supervised`
(``restart``), which logs it with the thread's name and runs the lane again after a back-off.
Its queue lives outside the loop, so nothing queued is lost by a restart.

Batched: given ``handle_many``, a lane with a backlog hands it up to :data:`BATCH_MAX` messages
at once, in order (the controller stores their reported states in one transaction); a message
that finds its lane empty is handled alone at once, as before.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence

from shared.supervision import Supervised

logger = logging.getLogger(__name__)

_STOP = ("", b"")
BATCH_MAX = 500
"""The most queued messages a lane hands to ``handle_many`` at once."""


class _Lane:
    """One FIFO and its worker thread.

    The network thread's ``put`` is a ``deque.append`` (atomic under the GIL) plus a flag test;
    it sets ``_wake`` only when the worker said it is about to sleep, and waits on ``_room`` only
    when the lane is full. A ``queue.Queue`` took a lock and notified a condition per message,
    which showed up as a fifth of the network thread's time at thousands of messages a second.
    """

    def __init__(
        self,
        name: str,
        handle: Callable[[str, bytes], None],
        maxsize: int,
        handle_many: Callable[[list[tuple[str, bytes]]], None] | None = None,
    ) -> None:
        self._items: deque[tuple[str, bytes]] = deque()
        self._maxsize = maxsize
        self._handle = handle
        self._handle_many = handle_many
        self._wake = threading.Event()
        self._sleeping = False
        self._room = threading.Event()
        self._waiting_for_room = False
        self.guard = Supervised(f"jetfleet-inbox-{name}", self._run, policy="restart")
        self.high_water = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: tuple[str, bytes]) -> None:
        while len(self._items) >= self._maxsize:
            self._room.clear()
            self._waiting_for_room = True
            if len(self._items) >= self._maxsize:
                self._room.wait(0.5)
        self._items.append(item)
        if self._sleeping:
            self._wake.set()
        depth = len(self._items)
        if depth > self.high_water:
            self.high_water = depth

    def put_stop(self) -> None:
        """Queue the end marker past the bound (stop must not wait for room)."""
        self._items.append(_STOP)
        self._wake.set()

    def _run(self) -> None:
        items = self._items
        while True:
            try:
                item = items.popleft()
            except IndexError:
                self._sleep()
                continue
            if self._waiting_for_room:
                self._waiting_for_room = False
                self._room.set()
            if item is _STOP:
                return
            if self._handle_many is not None and items:
                if self._many(item):
                    return
                continue
            try:
                self._handle(*item)
            except Exception:
                logger.exception("ingest of %s failed; the message was dropped", item[0])

    def _many(self, first: tuple[str, bytes]) -> bool:
        """Hand ``first`` and what is queued behind it (up to :data:`BATCH_MAX`) over at once;
        True when the end marker came among them (handled after the messages before it)."""
        assert self._handle_many is not None
        batch, items, stop = [first], self._items, False
        while len(batch) < BATCH_MAX:
            try:
                item = items.popleft()
            except IndexError:
                break
            if item is _STOP:
                stop = True
                break
            batch.append(item)
        if self._waiting_for_room:
            self._waiting_for_room = False
            self._room.set()
        try:
            self._handle_many(batch)
        except Exception:
            logger.exception("ingest of %d messages failed; they were dropped", len(batch))
        return stop

    def _sleep(self) -> None:
        """Wait for ``put``: announce the sleep first, then look once more, so no wake is lost."""
        self._wake.clear()
        self._sleeping = True
        if not self._items:
            self._wake.wait(1.0)
        self._sleeping = False


class Inbox:
    """Bounded FIFOs of (topic, payload), one per lane, drained by one worker each."""

    def __init__(
        self,
        handle: Callable[[str, bytes], None],
        lanes: Sequence[str] = (),
        maxsize: int = 100_000,
        admit: Callable[[str, bytes], bool] | None = None,
        handle_many: Callable[[list[tuple[str, bytes]]], None] | None = None,
    ) -> None:
        self._admit = admit
        self._default = _Lane("state", handle, maxsize, handle_many)
        self._lanes = {name: _Lane(name, handle, maxsize, handle_many) for name in lanes}

    def _all(self) -> list[_Lane]:
        return [self._default, *self._lanes.values()]

    def start(self) -> None:
        for lane in self._all():
            lane.guard.start()

    def put(self, topic: str, payload: bytes) -> None:
        """Queue one message on its lane (blocks while that lane is full) unless refused."""
        if self._admit is not None and not self._admit(topic, payload):
            return
        lane = self._lanes.get(topic.rpartition("/")[2], self._default)
        lane.put((topic, payload))

    @property
    def depth(self) -> int:
        """Messages waiting now, over all lanes."""
        return sum(len(lane) for lane in self._all())

    @property
    def high_water(self) -> int:
        """The most messages that were waiting at once in any one lane."""
        return max(lane.high_water for lane in self._all())

    def stop(self, timeout_s: float = 30.0) -> None:
        """Handle what is queued, then stop the workers."""
        for lane in self._all():
            if lane.guard.is_alive():
                lane.put_stop()
        for lane in self._all():
            lane.guard.join(timeout_s)
