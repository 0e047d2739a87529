"""A TCP relay between HTTP clients and the S3 server that records each connection's request
bytes and can cut a response part-way (loopback only; the test starts and stops it)."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Exchange:
    """One connection: what the client sent, how many bytes came back."""

    request: bytearray = field(default_factory=bytearray)
    received: int = 0


class HttpTap:
    """Listens on 127.0.0.1:<port> and relays to ``target``, one thread per direction.

    ``cut_after(marker, n)``: the next connection whose request contains ``marker`` is closed
    after ``n`` bytes of its answer came back (once).
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.exchanges: list[Exchange] = []
        self._cut: tuple[bytes, int] | None = None
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def start(self) -> HttpTap:
        self._spawn(self._accept)
        return self

    def cut_after(self, marker: bytes, n: int) -> None:
        with self._lock:
            self._cut = (marker, n)

    def requests_with(self, marker: bytes) -> list[bytes]:
        with self._lock:
            return [bytes(e.request) for e in self.exchanges if marker in e.request]

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)  # wakes the relay threads blocked in recv
                with contextlib.suppress(OSError):
                    s.close()
        for t in self._threads:
            t.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=10)
            upstream.settimeout(None)
            exchange = Exchange()
            with self._lock:
                self.exchanges.append(exchange)
                self._sockets += [client, upstream]
            self._spawn(self._upward, client, upstream, exchange)
            self._spawn(self._downward, upstream, client, exchange)

    def _upward(self, src: socket.socket, dst: socket.socket, exchange: Exchange) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                with self._lock:
                    exchange.request += data
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _downward(self, src: socket.socket, dst: socket.socket, exchange: Exchange) -> None:
        limit: int | None = None
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                with self._lock:
                    if limit is None and self._cut and self._cut[0] in exchange.request:
                        limit, self._cut = self._cut[1], None
                    if limit is not None and exchange.received + len(data) > limit:
                        data = data[: max(0, limit - exchange.received)]
                    exchange.received += len(data)
                dst.sendall(data)
                if limit is not None and exchange.received >= limit:
                    break
        for s in (dst, src):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # close() alone waits for the other relay's recv
            with contextlib.suppress(OSError):
                s.close()
