"""A Mosquitto the test owns (stop and restart it on one port) and paho peers around it.

:class:`Qos1Publisher` is the shape the agent's MQTT link needs for the spool's forwarder:
publish one entry, wait for PUBACK, answer ``False`` on timeout or while disconnected. paho
re-sends an unacknowledged QoS 1 message by itself after reconnecting, so a retried entry waits
for that earlier message instead of publishing a second copy.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from agent.link.spool import SpoolEntry


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class MosquittoBroker:
    """``mosquitto -c <dir>/mosquitto.conf`` on ``port`` with persistence in ``directory``."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self.config = directory / "mosquitto.conf"
        # Run as the test's own user: started as root, Mosquitto would otherwise switch to the
        # "mosquitto" user, which cannot write the persistence file into ``directory``, so
        # sessions (and messages queued for them) would not survive the restart.
        self.config.write_text(
            f"user {getpass.getuser()}\n"
            f"listener {port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "persistence true\n"
            f"persistence_location {directory}/\n"
            f"log_dest file {directory}/mosquitto.log\n"
        )

    def start(self, deadline_s: float = 10.0) -> None:
        exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.process = subprocess.Popen(
            [exe, "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + deadline_s
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.directory / "mosquitto.log").read_text(errors="replace")
                raise RuntimeError(f"mosquitto did not start on {self.port}:\n{log}")
            time.sleep(0.05)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _client(client_id: str, clean: bool) -> mqtt.Client:
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean,
        protocol=mqtt.MQTTv311,
    )
    client.reconnect_delay_set(min_delay=1, max_delay=1)
    return client


class Qos1Publisher:
    """Publishes spool entries on ``<prefix>/<channel>`` and waits for the broker's PUBACK."""

    def __init__(self, port: int, prefix: str, timeout_s: float = 2.0) -> None:
        self._prefix = prefix
        self._timeout_s = timeout_s
        self._cond = threading.Condition()
        self._acked: set[int] = set()
        self._pending: dict[str, int] = {}
        self.client = _client("spool-publisher", clean=True)
        self.client.on_publish = self._on_publish
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, props: Any) -> None:
        with self._cond:
            self._acked.add(mid)
            self._cond.notify_all()

    def __call__(self, entry: SpoolEntry) -> bool:
        mid = self._pending.get(entry.key)
        if mid is None:
            if not self.client.is_connected():
                return False
            info = self.client.publish(f"{self._prefix}/{entry.channel}", entry.payload, qos=1)
            mid = info.mid
            self._pending[entry.key] = mid
        with self._cond:
            if not self._cond.wait_for(lambda: mid in self._acked, self._timeout_s):
                return False
            self._acked.discard(mid)
        del self._pending[entry.key]
        return True

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class Subscriber:
    """A persistent-session QoS 1 subscriber that records payloads in arrival order."""

    def __init__(self, port: int, topic: str) -> None:
        self._topic = topic
        self.received: list[bytes] = []
        self._lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = _client("spool-subscriber", clean=False)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *args: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        client.subscribe(self._topic, qos=1)

    def _on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.received.append(message.payload)

    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
