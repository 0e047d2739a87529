"""A real HTTP artifact server for agent tests: bytes by path, Range support, a request log.

``answers`` scripts trouble: each request (GET or POST) takes the next status from it and gets
that status with a JSON ``detail`` instead of the file, until the list is empty.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from shared.canonical import sha256_hex
from shared.messages import ArtifactRef

_RANGE = re.compile(r"^bytes=(\d+)-$")


@dataclass
class SeenRequest:
    path: str
    range: str | None
    status: int
    authorization: str | None = None


@dataclass
class ArtifactServer:
    """Serves ``files`` on 127.0.0.1; ``requests`` records what clients asked for."""

    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _scripted(self) -> bool:
                if not server.answers:
                    return False
                status = server.answers.pop(0)
                body = json.dumps({"detail": f"scripted {status}"}).encode()
                self._answer(status, body, self.headers.get("Range"))
                return True

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self._scripted():
                    self._answer(404, b"not found", None)

            def do_GET(self) -> None:
                if self._scripted():
                    return
                data = server.files.get(self.path.split("?", 1)[0])
                header = self.headers.get("Range")
                if data is None:
                    self._answer(404, b"not found", header)
                    return
                match = _RANGE.match(header or "")
                if header and match and int(match[1]) < len(data):
                    start = int(match[1])
                    self._answer(
                        206,
                        data[start:],
                        header,
                        {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"},
                    )
                elif header:
                    self._answer(416, b"", header, {"Content-Range": f"bytes */{len(data)}"})
                else:
                    self._answer(200, data, header)

            def _answer(
                self, status: int, body: bytes, rng: str | None, extra: dict[str, str] | None = None
            ) -> None:
                seen = SeenRequest(self.path, rng, status, self.headers.get("Authorization"))
                server.requests.append(seen)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(10)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def add(self, name: str, data: bytes) -> ArtifactRef:
        """Serve ``data`` at ``/artifacts/<name>`` and return its reference."""
        path = f"/artifacts/{name}"
        self.files[path] = data
        return ArtifactRef(url=self.base_url + path, sha256=sha256_hex(data), size=len(data))
