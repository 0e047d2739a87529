"""The controller's HTTP side (:mod:`controller.server`): its socket, uvicorn's config and server.

:func:`bind_http` binds the listening socket before anything else starts, so a port in use is
refused first; :func:`http_config` is uvicorn's configuration of the API (:mod:`controller.api`);
:class:`HttpServer` tells the controller when a signal starts the shutdown.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import FrameType

import uvicorn

from controller.api.app import create_app
from controller.errors import ControllerError
from controller.services import Services
from controller.settings import Settings


class HttpServer(uvicorn.Server):
    """uvicorn's server, telling the controller when a signal starts the shutdown."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def bind_http(host: str, port: int) -> socket.socket:
    """The HTTP API's listening socket; ControllerError naming ``--http`` when it cannot bind."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on connections of a socket whose
    # proto says TCP; with the default 0 every keep-alive answer whose body follows its headers
    # waited ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ControllerError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --http HOST:PORT"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def http_config(s: Settings, services: Services) -> uvicorn.Config:
    """uvicorn's configuration of the API over ``services`` (HTTPS with the TLS files)."""
    return uvicorn.Config(
        create_app(services),
        lifespan="off",
        log_config=None,
        access_log=False,
        ssl_certfile=s.tls_cert_file,
        ssl_keyfile=s.tls_key_file,
        # X-Forwarded-For names the client (rate limits, audit) only from listed proxies:
        # uvicorn's default trusts it from loopback, where any local process can forge it.
        proxy_headers=bool(s.trusted_proxies),
        forwarded_allow_ips=list(s.trusted_proxies) or None,
    )
