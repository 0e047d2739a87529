"""``jetfleet-agent run`` under a fake systemd: READY once it reported, watchdog pings, STOPPING.

The test binds the datagram socket systemd would, passes it as ``$NOTIFY_SOCKET`` to a real agent
process against the real Mosquitto, and reads what arrives. The same idle agent is checked for
what it keeps resident before its first model.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from shared.codec import decode
from shared.messages import ReportedState
from tests.ports import free_port

DEVICE = "gw-notify"
AGENT = Path(sys.executable).with_name("jetfleet-agent")


class NotifySocket:
    """A bound AF_UNIX datagram socket collecting notify messages on a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[list[str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.messages.append(data.decode().split("\n"))

    def count(self, field: str) -> int:
        with self._lock:
            return sum(1 for m in self.messages if field in m)

    def first(self, field: str) -> list[str] | None:
        with self._lock:
            return next((m for m in self.messages if field in m), None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def wait_for(check: Any, what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def retained_reported(broker_url: str, topic: str) -> ReportedState | None:
    """The retained ReportedState on ``topic`` (what the controller would find), if any."""
    parts = urlsplit(broker_url)
    got: list[bytes] = []
    arrived = threading.Event()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"probe-{uuid.uuid4().hex}")

    def on_message(c: Any, u: Any, msg: mqtt.MQTTMessage) -> None:
        got.append(bytes(msg.payload))
        arrived.set()

    client.on_message = on_message
    client.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
    client.loop_start()
    client.subscribe(topic, qos=1)
    arrived.wait(5)
    client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
    client.loop_stop()
    client.disconnect()
    return decode(ReportedState, got[0]) if got and got[0] else None


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(tmp_path / "notify")
    try:
        yield listener
    finally:
        listener.close()


def agent_env(mosquitto: str, prefix: str, state_dir: Path, notify: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETFLEET_", "WATCHDOG_"))}
    env.update(
        JETFLEET_DEVICE_ID=DEVICE,
        JETFLEET_BROKER_URL=mosquitto,
        JETFLEET_STATE_DIR=str(state_dir),
        JETFLEET_SERVE_ADDRESS=f"127.0.0.1:{free_port()}",
        JETFLEET_TOPIC_PREFIX=prefix,
        JETFLEET_RUNTIME="onnxruntime",
        JETFLEET_TELEMETRY_INTERVAL_S="1",
        NOTIFY_SOCKET=str(notify),
        WATCHDOG_USEC="2000000",
    )
    return env


def test_ready_once_after_reporting_watchdog_pings_and_stopping_on_sigterm(
    mosquitto: str, notify: NotifySocket, tmp_path: Path
) -> None:
    prefix = f"notify-{uuid.uuid4().hex[:8]}/v1"
    env = agent_env(mosquitto, prefix, tmp_path / "state", notify.path)
    log_path = tmp_path / "agent.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [str(AGENT), "run"], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: notify.count("READY=1") >= 1, "READY=1")
        reported = retained_reported(mosquitto, f"{prefix}/{DEVICE}/reported")
        assert reported is not None, "READY came before the broker held a reported state"
        assert reported.device_id == DEVICE
        ready = notify.first("READY=1")
        assert ready is not None
        assert "STATUS=waiting for the desired state" in ready
        wait_for(lambda: notify.count("WATCHDOG=1") >= 3, "three watchdog pings", 20)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        wait_for(lambda: notify.count("STOPPING=1") == 1, "STOPPING=1", 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    output = log_path.read_text(errors="replace")
    assert notify.count("READY=1") == 1, notify.messages
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    started = {
        "logger": "agent.service.lifecycle",
        "msg": "started: reported its state to the broker",
    }
    assert started in [{"logger": r["logger"], "msg": r["msg"]} for r in records], output[-2000:]


def test_without_watchdog_usec_no_pings_are_sent(
    mosquitto: str, notify: NotifySocket, tmp_path: Path
) -> None:
    prefix = f"notify-{uuid.uuid4().hex[:8]}/v1"
    env = agent_env(mosquitto, prefix, tmp_path / "state", notify.path)
    del env["WATCHDOG_USEC"]
    proc = subprocess.Popen(
        [str(AGENT), "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: notify.count("READY=1") >= 1, "READY=1")
        time.sleep(1.5)  # an absence: three would-be watchdog periods pass without a ping
        assert notify.count("WATCHDOG=1") == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_an_idle_agent_has_loaded_neither_numpy_nor_onnx_runtime(
    mosquitto: str, notify: NotifySocket, tmp_path: Path
) -> None:
    """Until its first model, the agent reports and serves health without the tensor libraries:
    on a gateway they are resident memory taken from the models (docs/benchmarks.md, idle agent)."""
    prefix = f"notify-{uuid.uuid4().hex[:8]}/v1"
    env = agent_env(mosquitto, prefix, tmp_path / "state", notify.path)
    proc = subprocess.Popen(
        [str(AGENT), "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: notify.count("READY=1") >= 1, "READY=1")
        wait_for(lambda: notify.count("WATCHDOG=1") >= 3, "three watchdog pings", 20)
        health = httpx.get(f"http://{env['JETFLEET_SERVE_ADDRESS']}/v2/health/live", timeout=5)
        assert health.status_code == 200
        maps = Path(f"/proc/{proc.pid}/maps").read_text(encoding="utf-8", errors="replace")
        loaded = {line.split()[-1] for line in maps.splitlines() if "/" in line}
        tensor_libraries = sorted(p for p in loaded if "/numpy" in p or "/onnxruntime" in p)
        assert not tensor_libraries, tensor_libraries
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
