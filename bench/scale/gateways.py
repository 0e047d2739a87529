"""Simulated gateways: thousands of MQTT connections per process on one asyncio loop.

Each gateway logs in with its own broker credential (user ``dev-<id>``, its agent's client id,
a Last Will saying offline), subscribes to its retained desired document and answers every
newer generation with reported state at that generation, ``serving`` the document's versions;
an older generation is counted as stale and ignored, as the real agent refuses replays. It sends
telemetry every ``telemetry_interval_s`` (each gateway at its own random phase) at QoS 1 with
ids ``<device>:<boot>:<seq>``, keeps each sample until the broker acknowledges it and sends the
unacknowledged ones again after a reconnect, as the real agent's spool does. No runtime, no
downloads, no signature checks: what the controller and the broker see is a real fleet's
traffic, what the gateway does with it is not simulated.

paho needs a thread (or a loop pass) per client; one selector loop over raw sockets with the
packet splitter of :mod:`shared.mqtt_wire` holds 2,500 gateways in one process.
:mod:`bench.scale.gateway_procs` runs a :class:`Fleet` per process and asks it over a pipe for
counts, per device state, to stop sending telemetry, and to stop.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing.connection import Connection
from typing import Any

from bench.scale.wire import connect_packet, puback_id, publish_packet
from shared.codec import encode
from shared.facts import DeviceFacts
from shared.messages import ReportedState, SlotPhase, SlotStatus, Status
from shared.mqtt_wire import DISCONNECT, PINGREQ, read_publishes, split_packets, subscribe_packet
from shared.telemetry import ModelStats, Telemetry
from shared.topics import Channel, Topics
from shared.transport import agent_client_id

KEEPALIVE_S = 60
TICK_S = 0.25


@dataclass(frozen=True)
class FleetSpec:
    """What every gateway of one process shares."""

    host: str
    port: int
    prefix: str
    model: str
    telemetry_interval_s: float = 30.0
    connect_per_s: float = 50.0
    """New connections this process opens per second (first connects and reconnects)."""
    seed: int = 1


@dataclass(frozen=True)
class Credential:
    """One gateway: device id, broker user name and password."""

    device_id: str
    username: str
    password: str


@dataclass
class Counts:
    """One process's gateways, summed."""

    devices: int = 0
    connected: int = 0
    connects: int = 0
    lost: int = 0
    """Connections that ended without the gateway asking (broker kick, network)."""
    refused: int = 0
    documents: int = 0
    stale: int = 0
    """Desired documents older than the generation the gateway had (ignored)."""
    produced: int = 0
    acked: int = 0
    waiting: int = 0
    """Samples produced but not acknowledged by the broker yet."""
    serving: dict[str, int] = field(default_factory=dict)
    """Version of the model → gateways serving it."""

    def add(self, other: Counts) -> Counts:
        serving = dict(self.serving)
        for version, n in other.serving.items():
            serving[version] = serving.get(version, 0) + n
        return Counts(
            self.devices + other.devices,
            self.connected + other.connected,
            self.connects + other.connects,
            self.lost + other.lost,
            self.refused + other.refused,
            self.documents + other.documents,
            self.stale + other.stale,
            self.produced + other.produced,
            self.acked + other.acked,
            self.waiting + other.waiting,
            serving,
        )


@dataclass(frozen=True)
class DeviceView:
    """One gateway at the end: where it stands and when it saw each version."""

    device_id: str
    generation: int
    version: str | None
    received: dict[str, float]
    """Version → wall time of the first desired document carrying it."""
    reported: dict[str, float]
    """Version → wall time the gateway reported serving it."""
    produced: int
    boot: str
    stale: int
    waiting: tuple[str, ...]
    """Sample ids not acknowledged by the broker yet."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Gateway:
    """One simulated gateway's state; it outlives its connections."""

    def __init__(self, cred: Credential, fleet: Fleet) -> None:
        self.cred = cred
        self.fleet = fleet
        topics = Topics(fleet.spec.prefix)
        self.t_desired = topics.device(cred.device_id, Channel.DESIRED)
        self.t_reported = topics.device(cred.device_id, Channel.REPORTED)
        self.t_status = topics.device(cred.device_id, Channel.STATUS)
        self.t_telemetry = topics.device(cred.device_id, Channel.TELEMETRY)
        self.facts = DeviceFacts(
            hostname=cred.device_id, os="Linux", arch="aarch64", simulated=True
        )
        self.boot = uuid.uuid4().hex[:8]
        self.generation = -1
        self.active: dict[str, str] = {}
        self.received: dict[str, float] = {}
        self.reported: dict[str, float] = {}
        self.documents = 0
        self.stale = 0
        self.seq = 0
        self.acked = 0
        self.waiting: dict[str, bytes] = {}
        """Sample id → payload, until the broker's PUBACK (insertion order = production order)."""
        self.inflight: dict[int, str] = {}
        self.next_id = 0
        self.conn: _Connection | None = None
        self.online = False
        self.last_send = 0.0

    # --- sending ---------------------------------------------------------------------------

    def _packet_id(self) -> int:
        while True:
            self.next_id = self.next_id % 65535 + 1
            if self.next_id not in self.inflight:
                return self.next_id

    def _write(self, data: bytes) -> None:
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.write(data)
            self.last_send = time.monotonic()

    def _publish(self, topic: str, payload: bytes, retain: bool = False) -> int:
        pid = self._packet_id()
        self._write(publish_packet(topic, payload, packet_id=pid, retain=retain))
        return pid

    def report(self) -> None:
        slots = tuple(
            SlotStatus(
                name=name,
                desired_version=version,
                active_version=version,
                phase=SlotPhase.SERVING,
                updated_at=_now(),
            )
            for name, version in sorted(self.active.items())
        )
        state = ReportedState(
            device_id=self.cred.device_id,
            observed_generation=self.generation,
            reported_at=_now(),
            slots=slots,
            facts=self.facts,
            agent_version="scale-sim",
        )
        self._publish(self.t_reported, encode(state), retain=True)

    def produce(self) -> None:
        """One telemetry sample: kept until acknowledged, sent now when connected."""
        self.seq += 1
        sample_id = f"{self.cred.device_id}:{self.boot}:{self.seq}"
        model = self.fleet.spec.model
        version = self.active.get(model)
        rng = self.fleet.rng
        models = (
            ()
            if version is None
            else (
                ModelStats(
                    name=model,
                    version=version,
                    requests=rng.randint(100, 300),
                    errors=0,
                    latency_p99_ms=round(rng.uniform(8.0, 12.0), 2),
                ),
            )
        )
        sample = Telemetry(
            device_id=self.cred.device_id,
            sample_id=sample_id,
            ts=_now(),
            interval_s=self.fleet.spec.telemetry_interval_s,
            cpu_percent=round(rng.uniform(5.0, 40.0), 1),
            memory_used_bytes=3 * 2**30,
            memory_total_bytes=8 * 2**30,
            models=models,
        )
        payload = encode(sample)
        self.waiting[sample_id] = payload
        if self.online:
            self.inflight[self._publish(self.t_telemetry, payload)] = sample_id

    # --- receiving -------------------------------------------------------------------------

    def on_connack(self, code: int) -> None:
        if code:
            self.fleet.counts.refused += 1
            if self.conn is not None and self.conn.transport is not None:
                self.conn.transport.close()
            return
        self.online = True
        self._write(subscribe_packet(self._packet_id(), [self.t_desired]))
        online = Status(device_id=self.cred.device_id, state="online", ts=_now())
        self._publish(self.t_status, encode(online), retain=True)
        self.report()
        self.inflight.clear()
        for sample_id, payload in self.waiting.items():  # the spool, oldest first
            pid = self._packet_id()
            self._write(publish_packet(self.t_telemetry, payload, packet_id=pid, dup=True))
            self.inflight[pid] = sample_id

    def on_puback(self, pid: int) -> None:
        sample_id = self.inflight.pop(pid, None)
        if sample_id is not None and self.waiting.pop(sample_id, None) is not None:
            self.acked += 1

    def on_desired(self, payload: bytes) -> None:
        if not payload:
            return
        doc = json.loads(payload)
        generation = int(doc["generation"])
        self.documents += 1
        if generation < self.generation:
            self.stale += 1
            return
        if generation == self.generation:
            return
        now = time.time()
        self.generation = generation
        self.active = {str(s["name"]): str(s["version"]) for s in doc.get("slots", ())}
        for version in self.active.values():
            self.received.setdefault(version, now)
        self.report()
        for version in self.active.values():
            self.reported.setdefault(version, time.time())

    def on_lost(self, asked: bool) -> None:
        self.conn = None
        self.online = False
        self.inflight.clear()
        if not asked:
            self.fleet.counts.lost += 1
            self.fleet.reconnect_later(self)

    def view(self) -> DeviceView:
        return DeviceView(
            device_id=self.cred.device_id,
            generation=self.generation,
            version=self.active.get(self.fleet.spec.model),
            received=dict(self.received),
            reported=dict(self.reported),
            produced=self.seq,
            boot=self.boot,
            stale=self.stale,
            waiting=tuple(self.waiting),
        )


class _Connection(asyncio.Protocol):
    """One gateway's TCP connection to the broker."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        g = self.gateway
        g.conn = self
        will = encode(Status(device_id=g.cred.device_id, state="offline"))
        transport.write(
            connect_packet(
                agent_client_id(g.cred.device_id),
                g.cred.username,
                g.cred.password,
                KEEPALIVE_S,
                g.t_status,
                will,
            )
        )
        g.last_send = time.monotonic()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        packets, used = split_packets(self.buf)
        del self.buf[:used]
        if not packets:
            return
        messages, acks, other = read_publishes(packets)
        g = self.gateway
        if acks and self.transport is not None:
            self.transport.write(acks)
        for first, body in other:
            kind = first >> 4
            if kind == 4:
                g.on_puback(puback_id(body))
            elif kind == 2:
                g.on_connack(body[1] if len(body) > 1 else 255)
            elif kind == 9 and len(body) > 2 and body[2] == 0x80:
                g.fleet.counts.refused += 1
        for topic, payload in messages:
            if topic == g.t_desired:
                g.on_desired(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.gateway.on_lost(self.closing)


class Fleet:
    """The gateways of one process and the loop that drives them."""

    def __init__(self, spec: FleetSpec, creds: list[Credential]) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.counts = Counts(devices=len(creds))
        self.gateways = [Gateway(c, self) for c in creds]
        self.producing = True
        self.stopping = False
        self._connect_queue: asyncio.Queue[Gateway] = asyncio.Queue()
        self._due: list[tuple[float, int]] = []

    def reconnect_later(self, gateway: Gateway) -> None:
        if self.stopping:
            return
        loop = asyncio.get_running_loop()
        loop.call_later(self.rng.uniform(1.0, 3.0), self._connect_queue.put_nowait, gateway)

    async def _connector(self) -> None:
        loop = asyncio.get_running_loop()
        pause = 1.0 / self.spec.connect_per_s
        while not self.stopping:
            gateway = await self._connect_queue.get()
            if self.stopping or gateway.conn is not None:
                continue
            self.counts.connects += 1
            try:
                await loop.create_connection(
                    functools.partial(_Connection, gateway), self.spec.host, self.spec.port
                )
            except OSError:
                self.reconnect_later(gateway)
            await asyncio.sleep(pause)

    async def _ticker(self) -> None:
        interval = self.spec.telemetry_interval_s
        start = time.monotonic()
        self._due = [(start + self.rng.uniform(0, interval), i) for i in range(len(self.gateways))]
        heapq.heapify(self._due)
        next_ping = start + 5.0
        while not self.stopping:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            while self._due and self._due[0][0] <= now:
                due, i = heapq.heappop(self._due)
                if self.producing:
                    self.gateways[i].produce()
                heapq.heappush(self._due, (due + interval, i))
            if now >= next_ping:
                next_ping = now + 5.0
                for g in self.gateways:
                    if g.online and now - g.last_send > KEEPALIVE_S / 2:
                        g._write(PINGREQ)

    def summary(self) -> Counts:
        c = self.counts
        serving: dict[str, int] = {}
        produced = acked = waiting = connected = documents = stale = 0
        for g in self.gateways:
            version = g.active.get(self.spec.model)
            if version is not None:
                serving[version] = serving.get(version, 0) + 1
            produced += g.seq
            acked += g.acked
            waiting += len(g.waiting)
            connected += g.online
            documents += g.documents
            stale += g.stale
        return Counts(
            c.devices, connected, c.connects, c.lost, c.refused, documents, stale, produced,
            acked, waiting, serving,
        )  # fmt: skip

    def answer(self, command: str) -> Any:
        if command == "counts":
            return self.summary()
        if command == "stop_telemetry":
            self.producing = False
            return True
        if command == "views":
            return [g.view() for g in self.gateways]
        raise ValueError(f"unknown command {command!r}")

    async def serve(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def on_command() -> None:
            try:
                command = conn.recv()
            except EOFError:
                command = "stop"
            if command == "stop":
                loop.remove_reader(conn.fileno())
                if not done.done():
                    done.set_result(None)
                return
            try:
                conn.send(self.answer(command))
            except Exception as exc:  # noqa: BLE001 - the bench sees it instead of a hang
                conn.send(exc)

        loop.add_reader(conn.fileno(), on_command)
        for g in self.gateways:
            self._connect_queue.put_nowait(g)
        tasks = [asyncio.create_task(self._connector()), asyncio.create_task(self._ticker())]
        await done
        self.stopping = True
        for g in self.gateways:
            if g.conn is not None and g.conn.transport is not None:
                g.conn.closing = True
                g.conn.transport.write(DISCONNECT)
                g.conn.transport.close()
        for task in tasks:
            task.cancel()
        await asyncio.sleep(0.5)
        conn.send(True)
