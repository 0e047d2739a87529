"""A gateway as the update tests run it: the real launcher, the real agent, a stand-in systemd.

systemd cannot run here, so :class:`Supervisor` stands in for the unit's
``Restart=on-failure``: it runs ``packaging/scripts/agent-launch run`` (each run in its own
process group), and runs it again, at once (the unit waits RestartSec=10), whenever it ends
with a failure status or a signal; it stops on a clean exit or when asked. The agent inside
re-executes the launcher itself to restart into a new release (same PID), as under systemd.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from agent.update.journal import JOURNAL_FILE
from shared.agent_releases import AgentReleaseArtifact, AgentReleaseOrder
from shared.codec import encode
from shared.messages import DesiredState, ModelSlot
from shared.topics import Channel, Topics
from tests.agent_pause import UPDATE_ENV, pythonpath

ROOT = Path(__file__).resolve().parents[3]
LAUNCHER = ROOT / "packaging" / "scripts" / "agent-launch"
FACTORY_ENTRY = ROOT / ".venv" / "bin" / "jetfleet-agent"
FACTORY_VERSION = "0.2.0"
DEVICE = "gw-update"


class Supervisor:
    """Runs the launcher like systemd's Restart=on-failure (see the module's docstring)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._env = env
        self._log = log
        self._stop = False
        self._groups: list[int] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            with self._log.open("ab") as log:
                proc = subprocess.Popen(
                    [str(LAUNCHER), "run"],
                    env=self._env,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            self._groups.append(proc.pid)
            self.proc = proc
            self.starts += 1
            if proc.wait() == 0 or self._stop:
                return

    def kill_agent(self) -> None:
        """``kill -9`` the running agent (the launcher's PID: it executed the agent)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)

    def stop(self) -> None:
        """Kill everything it started (the agent, the launchers' watchdogs): no graceful stop,
        the tests judge what was on disk and served before."""
        self._stop = True
        for group in self._groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        self._thread.join(30)


class Gateway:
    """One device: its state directory, its supervisor, its KServe port, its desired topic."""

    def __init__(self, broker: str, state: Path, port: int, pause_at: str | None = None) -> None:
        self.state = state
        self.releases = state / "releases"
        self.url = f"http://127.0.0.1:{port}"
        self.topics = Topics(f"upd-{uuid.uuid4().hex[:10]}/v1")
        env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
        env |= {
            "JETFLEET_DEVICE_ID": DEVICE,
            "JETFLEET_BROKER_URL": broker,
            "JETFLEET_STATE_DIR": str(state),
            "JETFLEET_SERVE_ADDRESS": f"127.0.0.1:{port}",
            "JETFLEET_TOPIC_PREFIX": self.topics.prefix,
            "JETFLEET_RUNTIME": "onnxruntime",
            "JETFLEET_DISABLED_COLLECTORS": '["jetson", "jtop", "nvml"]',
            "JETFLEET_RELEASES_DIR": str(self.releases),
            "JETFLEET_FACTORY_ENTRY": str(FACTORY_ENTRY),
        }
        if pause_at:
            env[UPDATE_ENV] = pause_at
            env["PYTHONPATH"] = pythonpath(env)
        self.log = state / "agent.log"
        parts = urlsplit(broker)
        self._mqtt = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"t-{uuid.uuid4().hex}")
        self.reported: dict[str, Any] | None = None
        self.update_events: list[str] = []
        """The phases of the ``agent_update`` events, in the order they arrived."""
        self._mqtt.on_message = self._on_message
        self._mqtt.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
        self._mqtt.subscribe(self.topics.device(DEVICE, Channel.REPORTED), qos=1)
        self._mqtt.subscribe(self.topics.device(DEVICE, Channel.EVENTS), qos=1)
        self._mqtt.loop_start()
        self.supervisor = Supervisor(env, self.log)
        self._generation = 0

    def _on_message(self, client: object, userdata: object, message: mqtt.MQTTMessage) -> None:
        if not message.payload:
            return
        data = json.loads(message.payload)
        if message.topic.endswith("/reported"):
            self.reported = data
        elif data.get("kind") == "agent_update":
            self.update_events.append(data["data"]["phase"])

    def close(self) -> None:
        self.supervisor.stop()
        topic = self.topics.device(DEVICE, Channel.DESIRED)
        self._mqtt.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        self._mqtt.loop_stop()
        self._mqtt.disconnect()

    def publish(
        self,
        order: AgentReleaseOrder | None,
        slots: tuple[ModelSlot, ...] = (),
    ) -> None:
        """A new desired generation with ``slots`` and the agent ``order``."""
        self._generation += 1
        desired = DesiredState(
            device_id=DEVICE,
            generation=self._generation,
            issued_at=datetime.now(timezone.utc),
            slots=slots,
            agent=order,
        )
        topic = self.topics.device(DEVICE, Channel.DESIRED)
        self._mqtt.publish(topic, encode(desired), qos=1, retain=True).wait_for_publish(5)

    def server(self) -> dict[str, Any] | None:
        """``GET /v2`` (name and version of the agent serving), or None when nothing answers."""
        try:
            return dict(httpx.get(f"{self.url}/v2", timeout=5).json())
        except (httpx.TransportError, ValueError):
            return None

    def journal(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.state / JOURNAL_FILE).read_text()))
        except (OSError, ValueError):
            return None

    def phase(self) -> str | None:
        journal = self.journal()
        return None if journal is None else str(journal["phase"])

    def current(self) -> str | None:
        try:
            return Path(os.readlink(self.releases / "current")).name
        except OSError:
            return None

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 60) -> None:
        """Wait until ``check()`` holds; fail naming ``what`` and the agent's log tail."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
                raise AssertionError(
                    f"timed out waiting for {what} (update events {self.update_events}); "
                    f"agent log:\n{tail}"
                )
            time.sleep(0.05)

    def wait_serving(self, version: str, timeout: float = 60) -> None:
        def serving() -> bool:
            got = self.server()
            return got is not None and got.get("version") == version

        self.wait(f"agent {version} serving", serving, timeout)


def order_for(
    ref_url: str, sha256: str, size: int, version: str, allow_downgrade: bool = False
) -> AgentReleaseOrder:
    """An order to run release ``version`` from a tar.gz at ``ref_url``."""
    import platform

    return AgentReleaseOrder(
        version=version,
        arch="aarch64" if platform.machine() == "aarch64" else "x86_64",
        artifact=AgentReleaseArtifact(url=ref_url, sha256=sha256, size=size, format="tar.gz"),
        allow_downgrade=allow_downgrade,
        confirm_within_s=60,
    )
