"""Lightweight simulated agents: one paho client per device, no runtime, no processes.

Each answers its retained desired document the way the real agent does: ``serving`` with the
new version, or (for devices told to fail) ``failed`` with ``last_error`` while it keeps
serving the old version. It can send Telemetry, and optionally download the artifact (sha256
checked) before it reports serving. Used by the rollout tests and bench/rollout_convergence.py.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import httpx
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.settings import parse_broker_url
from shared.codec import decode, encode
from shared.facts import DeviceFacts
from shared.messages import DesiredState, ReportedState, SlotPhase, SlotStatus, Status
from shared.telemetry import ModelStats, Telemetry
from shared.topics import Channel, Topics


def _now() -> datetime:
    return datetime.now(timezone.utc)


class SimAgent:
    """One simulated gateway."""

    def __init__(
        self,
        broker_url: str,
        topics: Topics,
        device_id: str,
        labels: dict[str, str] | None = None,
        *,
        fail_versions: Iterable[str] = (),
        download: bool = False,
        token: str | None = None,
    ) -> None:
        self.device_id = device_id
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.labels = labels or {}
        self.fail_versions = set(fail_versions)
        self.download = download
        self.topics = topics
        self.active: dict[str, str] = {}
        """Model → version serving now."""
        self.generation = -1
        self.failures: dict[str, tuple[str, str]] = {}
        """Model → (version that failed, error)."""
        self.documents = 0
        self._lock = threading.Lock()
        self._host, self._port = parse_broker_url(broker_url)
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"sim-{device_id}-{uuid.uuid4().hex[:6]}",
            protocol=mqtt.MQTTv311,
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.will_set(
            topics.device(device_id, Channel.STATUS),
            encode(Status(device_id=device_id, state="offline")),
            qos=1,
            retain=True,
        )
        self.connected = threading.Event()

    def start(self) -> SimAgent:
        self.client.connect_async(self._host, self._port, keepalive=60)
        self.client.loop_start()
        return self

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client: mqtt.Client, *_args: Any) -> None:
        client.subscribe(self.topics.device(self.device_id, Channel.DESIRED), qos=1)
        status = Status(device_id=self.device_id, state="online", ts=_now())
        client.publish(
            self.topics.device(self.device_id, Channel.STATUS), encode(status), 1, retain=True
        )
        self.report()
        self.connected.set()

    def _on_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        desired = decode(DesiredState, bytes(msg.payload))
        if self.download:
            threading.Thread(target=self._apply, args=(desired,), daemon=True).start()
        else:
            self._apply(desired)

    def _apply(self, desired: DesiredState) -> None:
        if self.download:
            for slot in desired.slots:
                if self.active.get(slot.name) != slot.version:
                    data = httpx.get(slot.artifact.url, headers=self._headers, timeout=60).content
                    assert hashlib.sha256(data).hexdigest() == slot.artifact.sha256
        with self._lock:
            self.documents += 1
            wanted = {s.name: s.version for s in desired.slots}
            for name in list(self.active):
                if name not in wanted:
                    del self.active[name]
                    self.failures.pop(name, None)
            for name, version in wanted.items():
                if version in self.fail_versions:
                    self.failures[name] = (
                        version,
                        f"engine for {name}:{version} failed validation",
                    )
                else:
                    self.active[name] = version
                    self.failures.pop(name, None)
            self.generation = desired.generation
        self.report()

    def state(self) -> ReportedState:
        with self._lock:
            names = sorted(set(self.active) | set(self.failures))
            slots = []
            for name in names:
                failed = self.failures.get(name)
                slots.append(
                    SlotStatus(
                        name=name,
                        desired_version=failed[0] if failed else self.active.get(name),
                        active_version=self.active.get(name),
                        phase=SlotPhase.FAILED if failed else SlotPhase.SERVING,
                        last_error=failed[1] if failed else None,
                        updated_at=_now(),
                    )
                )
            return ReportedState(
                device_id=self.device_id,
                observed_generation=self.generation,
                reported_at=_now(),
                slots=tuple(slots),
                labels=self.labels,
                facts=DeviceFacts(
                    hostname=self.device_id, os="Linux", arch="x86_64", simulated=True
                ),
                agent_version="sim",
            )

    def report(self) -> None:
        self.client.publish(
            self.topics.device(self.device_id, Channel.REPORTED),
            encode(self.state()),
            qos=1,
            retain=True,
        )

    def send_telemetry(self, model: str, requests: int, errors: int, p99_ms: float) -> None:
        version = self.active.get(model)
        sample = Telemetry(
            device_id=self.device_id,
            sample_id=uuid.uuid4().hex,
            ts=_now(),
            interval_s=5.0,
            cpu_percent=10.0,
            memory_used_bytes=1,
            memory_total_bytes=2,
            models=(
                ModelStats(
                    name=model,
                    version=version,
                    requests=requests,
                    errors=errors,
                    latency_p99_ms=p99_ms,
                ),
            ),
        )
        info = self.client.publish(
            self.topics.device(self.device_id, Channel.TELEMETRY), encode(sample), qos=1
        )
        info.wait_for_publish(10)
