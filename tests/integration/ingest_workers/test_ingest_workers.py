"""Telemetry ingest in worker processes (``--ingest-workers``): real Mosquitto with a shared
subscription, real SQLite and PostgreSQL, real worker processes killed with SIGKILL."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest

from controller.errors import ControllerError
from controller.ingest.pool import IngestWorkers
from controller.server import Controller
from controller.settings import Settings
from shared.codec import encode
from shared.topics import Channel, Topics
from shared.transport import MqttAuth
from tests.integration.controller.agent_messages import telemetry
from tests.integration.controller.conftest import MqttPeer, api_client, poll, start_controller
from tests.integration.security_broker.acl_broker import AclMosquitto

EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def prefix() -> str:
    """A topic prefix (and shared-subscription filter) no other test uses."""
    return f"jfiw/{uuid.uuid4().hex[:10]}"


def settings(db_url: str, broker_url: str | None, tmp_path: Path, prefix: str) -> Settings:
    return Settings(
        db_url=db_url,
        broker_url=broker_url,
        data_dir=tmp_path / "data",
        http_port=0,
        embedded_broker_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
        ingest_workers=2,
    )


@pytest.fixture
def workers_controller(
    mosquitto: str, db_url: str, tmp_path: Path, prefix: str
) -> Iterator[Controller]:
    c = start_controller(settings(db_url, mosquitto, tmp_path, prefix))
    yield c
    c.stop()


@pytest.fixture
def agent(mosquitto: str) -> Iterator[MqttPeer]:
    peer = MqttPeer(mosquitto).connect()
    yield peer
    peer.close()


def publish_many(peer: MqttPeer, messages: list[tuple[str, bytes]]) -> None:
    """Publish QoS 1 messages without waiting for each PUBACK in turn, then wait for all."""
    infos = [peer.client.publish(topic, payload, qos=1) for topic, payload in messages]
    for info in infos:
        info.wait_for_publish(30)
        assert info.is_published()


def samples_per_device(controller: Controller) -> dict[str, int]:
    services = controller.services
    assert services is not None
    assert services.telemetry is not None
    return {d: v.samples for d, v in services.telemetry.vitals(EPOCH).items()}


def stored_rows(controller: Controller) -> int:
    services = controller.services
    assert services is not None
    assert services.telemetry is not None
    return services.telemetry.counts()["samples"]


def pool(controller: Controller) -> IngestWorkers:
    assert controller.ingest_workers is not None, "the controller runs no ingest workers"
    return controller.ingest_workers


def test_every_sample_is_stored_once_and_counted(
    workers_controller: Controller, agent: MqttPeer, prefix: str
) -> None:
    topics = Topics(prefix)
    devices, per_device = 20, 40
    messages = [
        (topics.device(f"gw-{d}", Channel.TELEMETRY), encode(telemetry(f"gw-{d}", f"s-{n}")))
        for n in range(per_device)
        for d in range(devices)
    ]
    replayed = messages[:50]  # an agent's spool replaying samples the broker already took
    publish_many(agent, messages + replayed)
    bad = json.loads(encode(telemetry("gw-0", "bad")))
    bad["cpu_percent"] = "lots"
    agent.publish(topics.device("gw-0", Channel.TELEMETRY), json.dumps(bad).encode())

    total = devices * per_device
    poll(lambda: stored_rows(workers_controller) >= total, 60, f"{total} rows")
    assert samples_per_device(workers_controller) == {f"gw-{d}": per_device for d in range(devices)}
    assert len(pool(workers_controller).pids()) == 2

    with api_client(workers_controller) as api:
        stats = poll(
            lambda: (
                (s := api.get("/api/v1/ingest").json())["accepted"] == total + len(replayed)
                and s["rejected"] == 1
                and s
            ),
            30,
            "the workers' counts in GET /api/v1/ingest",
        )
        assert stats["rejected_by_channel"] == {"telemetry": 1}
        assert stats["last_rejection"].startswith("rejected telemetry from gw-0: cpu_percent: ")
        metrics = api.get("/metrics").text
    assert f"jetfleet_ingest_samples_persisted_total {total}\n" in metrics
    assert f"jetfleet_ingest_samples_duplicate_total {len(replayed)}\n" in metrics
    assert stored_rows(workers_controller) == total, "a replayed sample was stored twice"


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_killed_worker_is_restarted_and_stop_leaves_no_process(
    workers_controller: Controller, agent: MqttPeer, prefix: str
) -> None:
    topics = Topics(prefix)
    workers = pool(workers_controller)
    first = workers.pids()
    assert len(first) == 2
    streaming = threading.Event()
    done = threading.Event()

    def stream() -> None:
        n = 0
        while not done.is_set():
            agent.publish(
                topics.device("gw-before", Channel.TELEMETRY),
                encode(telemetry("gw-before", f"b-{n}")),
            )
            n += 1
            streaming.set()

    publisher = threading.Thread(target=stream, daemon=True)
    publisher.start()
    try:
        assert streaming.wait(10)
        os.kill(first[0], signal.SIGKILL)
        back = poll(
            lambda: workers.restarts == 1 and len(p := workers.pids()) == 2 and p,
            60,
            "the killed worker to be restarted and subscribed",
        )
    finally:
        done.set()
        publisher.join(30)
    assert first[0] not in back
    assert first[1] in back

    after = [
        (
            topics.device(f"gw-after-{d}", Channel.TELEMETRY),
            encode(telemetry(f"gw-after-{d}", f"a-{n}")),
        )
        for n in range(30)
        for d in range(10)
    ]
    publish_many(agent, after)
    poll(
        lambda: all(
            samples_per_device(workers_controller).get(f"gw-after-{d}") == 30 for d in range(10)
        ),
        60,
        "every sample published after the restart",
    )

    every_pid = set(first) | set(back)
    workers_controller.stop()
    alive = [
        pid
        for pid in every_pid
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == [], f"ingest worker processes outlived the controller: {alive}"
    # multiprocessing's resource tracker is the interpreter's own helper, shared by every user
    # of multiprocessing; it ends when this process does. Anything else spawned is a leak.
    children = [_cmdline(p) for p in psutil.Process().children(recursive=True)]
    spawned = [c for c in children if "multiprocessing" in c and "resource_tracker" not in c]
    assert spawned == [], spawned


def _cmdline(p: psutil.Process) -> str:
    """A child's command line; a zombie (another test's unreaped child, already dead) has none."""
    try:
        return " ".join(p.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return "(exited)"


def test_embedded_broker_refuses_ingest_workers(
    sqlite_url: str, tmp_path: Path, prefix: str
) -> None:
    controller = Controller(settings(sqlite_url, None, tmp_path, prefix))
    with pytest.raises(ControllerError, match="--ingest-workers needs an external Mosquitto"):
        controller.start()


def test_workers_subscribe_through_the_generated_dynsec_acl(
    mosquitto: str, tmp_path: Path, prefix: str
) -> None:
    broker = AclMosquitto(tmp_path / "mosquitto", prefix).start()
    try:
        s = settings(f"sqlite:///{tmp_path}/jetfleet.db", broker.url, tmp_path, prefix)
        secured = dataclasses.replace(
            s,
            broker_admin="dynsec",
            broker_auth=MqttAuth(broker.controller_user, broker.controller_password),
        )
        controller = start_controller(secured)
        try:
            assert len(pool(controller).pids()) == 2, "the broker granted the shared subscription"
            with api_client(controller) as api:
                assert api.get("/api/v1/ingest").status_code == 200
        finally:
            controller.stop()
    finally:
        broker.stop()
