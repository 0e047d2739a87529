"""systemd's notify protocol over ``$NOTIFY_SOCKET``, without libsystemd.

A unit with ``Type=notify`` waits for ``READY=1`` before it counts as started, and with
``WatchdogSec=`` kills and restarts the service when ``WATCHDOG=1`` stops arriving. The protocol is
one AF_UNIX datagram of newline-separated ``KEY=value`` lines; an address starting with ``@`` is in
the abstract namespace. Outside systemd (no ``$NOTIFY_SOCKET``) every call is a no-op.

The watchdog must prove the reconcile loop is alive, not merely that the process exists: the loop
calls :meth:`Heartbeat.beat` each tick and :class:`Watchdog` pings only while the last beat is
recent (:func:`loop_alive`), so a stuck loop stops the pings and systemd restarts the agent.
The pinging thread itself runs under :class:`shared.supervision.Supervised` (policy
``restart``): a poll that raises is logged and pinging resumes, instead of the watchdog going
silent and systemd killing a healthy agent.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

from shared.supervision import Supervised

log = logging.getLogger(__name__)

Clock = Callable[[], float]


def socket_address(value: str) -> str:
    """The address to send to: ``@name`` → abstract ``\\0name``; a path stays a path."""
    if value.startswith("@"):
        return "\0" + value[1:]
    return value


def watchdog_interval_s(env: Mapping[str, str], pid: int) -> float | None:
    """``WatchdogSec`` in seconds when systemd expects pings from process ``pid``, else None."""
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(usec) / 1_000_000


def loop_alive(now: float, last_tick: float | None, watchdog_s: float) -> bool:
    """True while the loop ticked within half the watchdog interval (systemd's advice)."""
    return last_tick is not None and 0 <= now - last_tick <= watchdog_s / 2


class Notifier:
    """Sends notify messages to systemd; silent where the agent was not started by it."""

    def __init__(self, address: str | None = None) -> None:
        raw = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self.address = socket_address(raw) if raw else None
        self._warned = False

    @property
    def enabled(self) -> bool:
        """Whether a notify socket was given."""
        return self.address is not None

    def notify(self, *fields: str) -> bool:
        """Send ``KEY=value`` fields as one datagram; False (logged once) when it cannot."""
        if self.address is None:
            return False
        payload = "\n".join(fields).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self.address)
                sock.sendall(payload)
        except OSError as exc:
            if not self._warned:
                log.warning("cannot notify systemd at %r: %s", self.address, exc)
                self._warned = True
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: the agent serves or has reported its first state."""
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        """``STATUS=...``: the phase ``systemctl status`` shows."""
        return self.notify(f"STATUS={text}")

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: one keep-alive ping."""
        return self.notify("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: shutdown began; systemd stops expecting pings."""
        return self.notify("STOPPING=1", *([f"STATUS={status}"] if status else []))


class Heartbeat:
    """The reconcile loop's last tick, written by the loop thread, read by the watchdog."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._last: float | None = None

    def beat(self) -> None:
        """Record that the loop completed a tick now."""
        self._last = self._clock()

    def last(self) -> float | None:
        """When the loop last ticked (``clock`` time), None before the first tick."""
        return self._last


class Watchdog:
    """Pings systemd's watchdog while the heartbeat is fresh; silent once the loop is stuck."""

    def __init__(
        self,
        notifier: Notifier,
        watchdog_s: float,
        last_tick: Callable[[], float | None],
        clock: Clock = time.monotonic,
    ) -> None:
        self.notifier = notifier
        self.watchdog_s = watchdog_s
        self._last_tick = last_tick
        self._clock = clock
        self._stop = threading.Event()
        self._thread: Supervised | None = None

    @classmethod
    def from_environment(
        cls, notifier: Notifier, last_tick: Callable[[], float | None]
    ) -> Watchdog | None:
        """A watchdog for ``$WATCHDOG_USEC``, or None when systemd set no watchdog for us."""
        interval = watchdog_interval_s(os.environ, os.getpid())
        if interval is None or not notifier.enabled:
            return None
        return cls(notifier, interval, last_tick)

    def poll(self) -> bool:
        """Ping once if the loop is alive; True when a ping was sent."""
        if not loop_alive(self._clock(), self._last_tick(), self.watchdog_s):
            return False
        return self.notifier.watchdog()

    def start(self) -> None:
        """Poll every quarter interval in a supervised daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = Supervised(
            "sd-watchdog", self._run, policy="restart", stop=self._stop, logger=log
        ).start()

    def stop(self) -> None:
        """Stop polling (no more pings)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        period = max(self.watchdog_s / 4, 0.01)
        while not self._stop.wait(period):
            self.poll()
