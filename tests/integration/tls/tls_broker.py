"""A real Mosquitto with a TLS listener on a free port, started and stopped by one test."""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.ports import free_port
from tests.tls_ca import TlsFiles


class TlsBroker:
    """``mosquitto -c <generated config>`` serving only ``mqtts://127.0.0.1:<port>``."""

    def __init__(self, files: TlsFiles, directory: Path, require_certificate: bool = False) -> None:
        self.port = free_port()
        self.url = f"mqtts://127.0.0.1:{self.port}"
        self.log_path = directory / "mosquitto.log"
        self.config = directory / "mosquitto.conf"
        lines = [
            f"user {getpass.getuser()}",
            "per_listener_settings false",
            "persistence false",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            f"listener {self.port} 127.0.0.1",
            f"cafile {files.ca_cert}",
            f"certfile {files.server_cert}",
            f"keyfile {files.server_key}",
            "allow_anonymous true",
        ]
        if require_certificate:
            lines.append("require_certificate true")
        self.config.write_text("\n".join(lines) + "\n")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 15.0) -> None:
        exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen([exe, "-c", str(self.config)], stderr=log)
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    log = self.log_path.read_text()
                    raise RuntimeError(f"mosquitto did not listen: {log}") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        self._process = None
