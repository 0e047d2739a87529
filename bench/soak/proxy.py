"""A TCP proxy the bench controls, between one agent and the broker (loopback only).

Modes: ``forward`` (normal), ``drop`` (every open connection is cut and new ones are closed at
once: the link is down and the agent sees it), ``hold`` (connections stay open but no byte
moves either way: a silent partition the agent only detects by its keepalive). Going back to
``forward`` lets held bytes through and accepts new connections again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

FORWARD, DROP, HOLD = "forward", "drop", "hold"


class LinkProxy:
    """Listens on 127.0.0.1:<port> and relays to ``target``; one selector thread."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.mode = FORWARD
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._pending: dict[socket.socket, bytes] = {}
        self._stop = threading.Event()
        self.cuts = 0
        self._thread = threading.Thread(target=self._loop, name="soak-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> LinkProxy:
        self._thread.start()
        return self

    def set_mode(self, mode: str) -> None:
        with self._lock:
            self.mode = mode
            if mode == DROP:
                for sock in list(self._peers):
                    self._close(sock)
                self.cuts += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for sock in list(self._peers):
                self._close(sock)
        self._sel.close()
        self._listener.close()

    def _close(self, sock: socket.socket) -> None:
        other = self._peers.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self._peers.pop(s, None)
            self._pending.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(s)
            s.close()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        if self.mode == DROP:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=2)
        except OSError:
            client.close()  # the broker is down: the agent sees a refused link
            return
        for s in (client, upstream):
            s.setblocking(False)
            self._sel.register(s, selectors.EVENT_READ, None)
        self._peers[client] = upstream
        self._peers[upstream] = client

    def _relay(self, sock: socket.socket) -> None:
        other = self._peers.get(sock)
        if other is None:
            return
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock)
            return
        if self.mode == HOLD:
            self._pending[other] = self._pending.get(other, b"") + data
            return
        self._send(other, data)

    def _send(self, sock: socket.socket, data: bytes) -> None:
        try:
            sock.setblocking(True)
            sock.sendall(data)
            sock.setblocking(False)
        except OSError:
            self._close(sock)

    def _loop(self) -> None:
        while not self._stop.is_set():
            events = self._sel.select(0.1)
            with self._lock:
                if self.mode == FORWARD and self._pending:
                    for sock, data in list(self._pending.items()):
                        self._pending.pop(sock, None)
                        self._send(sock, data)
                for key, _ in events:
                    ready = key.fileobj
                    if not isinstance(ready, socket.socket):
                        continue
                    if ready is self._listener:
                        self._accept()
                    elif ready in self._peers:
                        self._relay(ready)
