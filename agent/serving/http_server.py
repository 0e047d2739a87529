"""The KServe server's thread: uvicorn serves :mod:`agent.serving.app`'s app in a daemon thread.

The uvicorn thread runs under :class:`shared.supervision.Supervised` with policy ``exit``: a
gateway whose KServe server died serves nothing while it goes on reporting, so the process ends
(status 70) and systemd starts it again. Sockets read up to :data:`READ_SIZE` bytes at a time and
set TCP_NODELAY.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agent.errors import StartupError
from shared.supervision import Supervised

log = logging.getLogger(__name__)

SERVE_FD_ENV = "JETFLEET_SERVE_FD"
"""A listening socket handed over by the agent that re-executed itself into another release
(agent.update.restart): served as is, so clients saw a pause, never a refused connection."""

READ_SIZE = 1 << 20
"""Bytes asked of the socket per read. asyncio's default, 256 KiB, splits a 1x3x224x224 FP32
request (600 KB) into three reads, each a turn of the event loop with uvicorn pausing and
resuming the socket in between; reads of up to 1 MiB took 0.2 to 2.5 ms off such a request on
the 2-core VM (bench/results/serving_overhead.md)."""


class _HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, reading up to :data:`READ_SIZE` bytes per ``recv``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # asyncio's selector transport reads ``self.max_size`` bytes per recv (a class
        # attribute); other loops' transports may not have it, and keep their own size.
        if hasattr(transport, "max_size"):
            transport.max_size = READ_SIZE
        super().connection_made(transport)


class ServingServer:
    """Runs an ASGI app with uvicorn in a daemon thread; ``start`` returns the bound port.

    Once started, a server that stops without :meth:`stop` (its loop raised, or it returned on
    its own) calls ``on_fatal(name, exc)``: by default the process exits so systemd restarts it.
    """

    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        on_fatal: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self._host = host
        self._on_fatal = on_fatal
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=_HttpProtocol,
        )
        config.ws = "none"
        self._server = uvicorn.Server(config)
        self._thread: Supervised | None = None
        self.port = port
        self.socket: socket.socket | None = None
        """The listening socket once started."""

    def start(self, timeout_s: float = 15.0) -> int:
        """Bind and start serving; StartupError naming the setting when that is impossible."""
        sock = _inherited(self._host, self.port)
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = sock or socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it: without it, a response written in two parts
            # (head, body) waits for the client's delayed ACK, ~40 ms per request on Linux.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if sock.getsockname()[1] == 0:
                sock.bind((self._host, self.port))
        except OSError as exc:
            sock.close()
            raise StartupError(
                f"cannot serve on {self._host}:{self.port} ({exc.strerror}): "
                "set JETFLEET_SERVE_ADDRESS to a free HOST:PORT"
            ) from exc
        self.port = int(sock.getsockname()[1])
        self.socket = sock
        self._thread = Supervised(
            "kserve", lambda: self._serve(sock), policy="exit", on_fatal=self._on_fatal, logger=log
        ).start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StartupError(f"the KServe server on {self._host}:{self.port} did not start")
            time.sleep(0.02)
        return self.port

    def _serve(self, sock: socket.socket) -> None:
        """The thread's body: serve until :meth:`stop`; any other end raises (fatal).

        A failure before the server started is only logged: :meth:`start` reports it as a
        StartupError, as it does for a port that is taken.
        """
        try:
            self._server.run(sockets=[sock])
        except BaseException:
            if not self._server.started or self._server.should_exit:
                log.exception("the KServe server on %s:%s failed", self._host, self.port)
                return
            raise
        if self._server.started and not self._server.should_exit:
            raise RuntimeError(f"the KServe server on {self._host}:{self.port} stopped by itself")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop accepting requests, let in-flight ones finish, and join the thread."""
        self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)


def _inherited(host: str, port: int) -> socket.socket | None:
    """The listening socket named by ``$JETFLEET_SERVE_FD`` when it is bound to ``host`` (and
    ``port``, unless 0); None otherwise (it is closed then). The variable is consumed."""
    raw = os.environ.pop(SERVE_FD_ENV, "")
    if not raw.isdigit():
        return None
    try:
        sock = socket.socket(fileno=int(raw))
    except OSError:
        return None
    sock.set_inheritable(False)
    bound_host, bound_port = sock.getsockname()[:2]
    if bound_host != host or (port and bound_port != port):
        log.warning("not serving on the handed-over socket %s:%s", bound_host, bound_port)
        sock.close()
        return None
    return sock
