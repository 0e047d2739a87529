"""The in-process MQTT broker for the single-box default.

amqtt is a pure-Python MQTT 3.1.1 broker, so ``jetfleet serve`` works with nothing installed; it
runs on its own asyncio loop in a daemon thread. Retained messages and Last Wills work with paho
clients. It keeps nothing on disk: retained desired documents are republished by the controller.
The broker class is amqtt's with its session, retained-message and size holes closed
(:mod:`controller.broker_admin.amqtt_broker`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from controller.broker_admin.amqtt_broker import GuardedBroker
from controller.broker_admin.embedded import AccessPolicy, amqtt_plugins, close_sessions
from controller.errors import BusError
from shared.supervision import Supervised

logger = logging.getLogger(__name__)

_START_TIMEOUT_S = 15.0

DEFAULT_MAX_PACKET_BYTES = 1024 * 1024 + 64 * 1024
"""The controller's ``--max-mqtt-payload`` default (1 MiB) plus room for topic and headers."""


class EmbeddedBroker:
    """An amqtt broker listening on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 1884,
        policy: AccessPolicy | None = None,
        max_packet_bytes: int = DEFAULT_MAX_PACKET_BYTES,
        on_fatal: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.max_packet_bytes = max_packet_bytes
        """A client announcing a bigger packet is disconnected before it is read."""
        self.policy = policy
        """Logins and topic ACLs to enforce; None keeps the broker anonymous (demo, tests)."""
        self._on_fatal = on_fatal
        """What a crash of the broker's thread does (None: end the process; tests observe it)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: Supervised | None = None
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``mqtt://host:port`` clients on this machine connect to."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"mqtt://{host}:{self.port}"

    def start(self) -> None:
        """Start listening; return once the real port is known."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        # "exit", not "restart": every broker session, retained message and listener lives on
        # this loop, so a loop that died cannot be run again with them, and a controller
        # without its broker publishes nothing and hears no device. amqtt's own errors stay
        # on the loop (its exception handler logs them); only what ends ``run_forever`` (an
        # exception outside ``Exception`` from a callback) gets here. A stop (``loop.stop``)
        # returns normally and is not a crash.
        self._thread = Supervised(
            "jetfleet-embedded-broker", loop.run_forever, policy="exit", on_fatal=self._on_fatal
        ).start()
        future = asyncio.run_coroutine_threadsafe(self._start(), loop)
        try:
            self.port = future.result(_START_TIMEOUT_S)
        except Exception as exc:
            self._stop_loop()
            raise BusError(
                f"cannot start the embedded MQTT broker on {self.host}:{self.port}: {exc}; "
                "choose another --embedded-broker HOST:PORT or give --broker mqtt://host:port"
            ) from exc
        logger.info("embedded MQTT broker listening on %s", self.url)

    async def _start(self) -> int:
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
            }
            if self.policy is None
            else amqtt_plugins(self.policy),
        }
        self._broker = GuardedBroker(config, max_packet_bytes=self.max_packet_bytes)
        await self._broker.start()
        sockets = self._broker._servers["default"].instance.sockets
        return int(sockets[0].getsockname()[1])

    def disconnect(self, username: str) -> int:
        """Close every live connection logged in as ``username``; how many were closed."""
        if self._loop is None or self._broker is None:
            return 0
        future = asyncio.run_coroutine_threadsafe(
            close_sessions(self._broker, username), self._loop
        )
        return int(future.result(_START_TIMEOUT_S))

    def stop(self) -> None:
        """Shut the broker down and end its thread."""
        if self._loop is None:
            return
        if self._broker is not None:
            shutdown = asyncio.wait_for(self._broker.shutdown(), _START_TIMEOUT_S)
            try:
                if self._loop.is_running():
                    future = asyncio.run_coroutine_threadsafe(shutdown, self._loop)
                    future.result(_START_TIMEOUT_S + 1)
                else:  # its thread died (see ``start``): shut down on the stopped loop, here
                    self._loop.run_until_complete(shutdown)
            except Exception:
                logger.exception("embedded broker did not shut down cleanly")
            self._broker = None
        self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(_START_TIMEOUT_S)
        loop.close()
        self._loop = None
        self._thread = None
