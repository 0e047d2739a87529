"""Telemetry across replicas: two replicas split every device's telemetry
through the shared subscription; ``kill -9`` of one while gateways keep sending, then its restart
under the same replica id (as systemd's ``Restart=on-failure`` does), loses nothing the broker
accepted and stores nothing twice. Real Mosquitto, PostgreSQL and ``jetfleet serve`` processes.

What the broker had sent the killed replica but not seen acknowledged (the controller writes a
read's PUBACKs only once it is stored), and the share it queued for the dead session meanwhile,
is delivered to the restarted replica."""

from __future__ import annotations

import threading
import time
import uuid

import paho.mqtt.client as mqtt
import psycopg
from paho.mqtt.enums import CallbackAPIVersion

from shared.transport import parse_broker_url
from tests.integration.controller.conftest import poll
from tests.integration.health.samples import sample
from tests.integration.replicas.conftest import Cluster

DEVICES = 20
SAMPLES_EACH = 40


def stored(db_url: str, prefix: str) -> tuple[int, int]:
    """(rows, distinct sample ids) of the test's devices in ``telemetry_samples``."""
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT (device_id, sample_id)) FROM telemetry_samples "
            "WHERE device_id LIKE %s",
            (f"{prefix}-%",),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class Gateways:
    """One paho client publishing every device's samples at QoS 1, round robin, at a steady
    pace, counting what the broker acknowledged."""

    def __init__(self, broker_url: str, topic_prefix: str, device_prefix: str) -> None:
        address = parse_broker_url(broker_url)
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"jftest-gw-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv311,
        )
        self.client.connect(address.host, address.port, keepalive=30)
        self.client.loop_start()
        self.topic_prefix = topic_prefix
        self.device_prefix = device_prefix
        self.acknowledged = 0
        self.sent = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        infos = []
        for n in range(SAMPLES_EACH):
            for d in range(DEVICES):
                device = f"{self.device_prefix}-{d}"
                payload = sample(device, n).model_dump_json()
                infos.append(
                    self.client.publish(f"{self.topic_prefix}/{device}/telemetry", payload, qos=1)
                )
            time.sleep(0.1)  # 200 samples a second
        for info in infos:
            info.wait_for_publish(30)
            self.acknowledged += int(info.is_published())
        self.sent.set()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_a_replica_killed_while_gateways_send_loses_and_duplicates_no_sample(
    cluster: Cluster, mosquitto: str
) -> None:
    replicas = cluster.start(2)
    device_prefix = f"tf{cluster.run_id}"
    gateways = Gateways(mosquitto, cluster.prefix, device_prefix)
    total = DEVICES * SAMPLES_EACH
    try:
        gateways.start()
        poll(lambda: stored(cluster.db_url, device_prefix)[0] >= total // 4, 30, "a quarter")
        replicas[1].kill9()
        time.sleep(2.0)  # gateways keep sending; the dead replica's share waits on the broker
        replicas[1].start()
        poll(replicas[1].ready, 60, "the restarted replica")
        assert gateways.sent.wait(60), "the gateways could not send everything"
        assert gateways.acknowledged == total, "the broker accepted every sample"
        poll(lambda: stored(cluster.db_url, device_prefix)[0] >= total, 60, "every sample stored")
        time.sleep(1.0)  # anything delivered twice would be written by now
    finally:
        gateways.close()
    rows, distinct = stored(cluster.db_url, device_prefix)
    assert (rows, distinct) == (total, total), "each sample stored once, none lost"
    with cluster.api(replicas[0]) as api:
        survivor = api.get("/api/v1/ingest").json()["accepted"]
    assert survivor < 0.8 * total, (
        f"the replica that stayed up handled {survivor} of {total} samples: the replicas split "
        "telemetry instead of each one receiving all of it"
    )
    killed_log = replicas[1].text()
    assert killed_log.count("(MQTT 5.0, persistent session)") >= 2, "it came back to its session"
    assert f"jetfleet-telemetry-{cluster.run_id}-r1" in killed_log
