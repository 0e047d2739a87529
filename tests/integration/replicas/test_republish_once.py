"""Desired documents are republished by one replica, not by each, and a
document published again by another replica is the same document (database generations).

Three replicas started at once publish every device's retained document once; when that replica
is killed, the one that takes the rollout lease republishes, and every device sees its document
again at the generation it already observed: nothing for an agent to do twice. Real
``jetfleet serve`` processes, PostgreSQL and Mosquitto; simulated agents on MQTT."""

from __future__ import annotations

import json
import threading
import uuid
from collections import defaultdict

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from shared.transport import parse_broker_url
from tests.integration.controller.conftest import poll
from tests.integration.replicas.conftest import Cluster, Replica
from tests.integration.rollouts.conftest import Fleet as SimFleet
from tests.integration.rollouts.conftest import prepare

REPUBLISHED = "republished the desired state of"
LEFT = "desired documents are republished by the replica running the rollouts"
DEVICES = 4


def republishers(replicas: list[Replica]) -> list[Replica]:
    return [r for r in replicas if r.alive and REPUBLISHED in r.text()]


def decided(replica: Replica) -> bool:
    """The replica said whether it republishes: left to the leader, or republished."""
    text = replica.text()
    return LEFT in text or REPUBLISHED in text


class DesiredRecorder:
    """Every desired document the broker delivers, per device: (generation, what its slots
    ask for: model, version, artifact, delegate config)."""

    def __init__(self, broker_url: str, prefix: str) -> None:
        address = parse_broker_url(broker_url)
        self._lock = threading.Lock()
        self.seen: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"jftest-rec-{uuid.uuid4().hex[:8]}"
        )
        self.client.on_message = self._on_message
        self.client.connect(address.host, address.port, keepalive=30)
        self.client.subscribe(f"{prefix}/+/desired", qos=1)
        self.client.loop_start()

    def _on_message(self, _client: mqtt.Client, _userdata: object, msg: mqtt.MQTTMessage) -> None:
        document = json.loads(msg.payload)
        # What the agent acts on; the rollback authorization is signed afresh at each publish.
        slots = json.dumps(
            [
                (s["name"], s["version"], s["artifact"]["sha256"], s["delegate"])
                for s in document["slots"]
            ],
            sort_keys=True,
        )
        with self._lock:
            self.seen[msg.topic.split("/")[-2]].append((int(document["generation"]), slots))

    def copies(self) -> dict[str, list[tuple[int, str]]]:
        with self._lock:
            return {device: list(docs) for device, docs in self.seen.items()}

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.mark.slow
def test_three_replicas_starting_together_republish_once_and_a_new_leader_does_again(
    cluster: Cluster, mosquitto: str
) -> None:
    replicas = cluster.start(3)
    [first] = poll(lambda: republishers(replicas) or None, 30, "a replica to republish")
    # Every replica decides on each broker connect and logs what it decided: LEFT (not the
    # leader) or, once its republish ran, REPUBLISHED. Wait until each has logged a decision.
    poll(lambda: all(decided(r) for r in replicas), 30, "every replica to log its decision")
    assert republishers(replicas) == [first], "exactly one replica republished"
    assert first.holder() is not None, "the one that republished runs the rollouts"
    others = [r for r in replicas if r is not first]
    assert all(LEFT in r.text() for r in others), "the others said they left it to the leader"

    sims = SimFleet(mosquitto, cluster.prefix)
    api = cluster.api(others[0])
    recorder = DesiredRecorder(mosquitto, cluster.prefix)
    try:
        prepare(api, sims, DEVICES, set())  # a document per device, at some generation

        # the recorder is a separate client: wait until it holds what the agents acted on
        def caught_up() -> dict[str, list[tuple[int, str]]] | None:
            seen = recorder.copies()
            done = len(seen) == DEVICES and all(
                seen[d][-1][0] == a.generation for d, a in sims.agents.items()
            )
            return seen if done else None

        before = poll(caught_up, 10, "the recorder to hold every device's document")
        first.kill9()
        [second] = poll(
            lambda: [r for r in others if r.holder() is not None] or None,
            30,
            "another replica to take the rollout lease",
        )
        poll(lambda: REPUBLISHED in second.text(), 30, "the new leader to republish")
        poll(
            lambda: all(len(recorder.copies()[d]) > len(before[d]) for d in before),
            30,
            "every device's document published again",
        )
        after = recorder.copies()
        observed = {d: a.generation for d, a in sims.agents.items()}
    finally:
        recorder.close()
        sims.stop()
        api.close()
    for device, docs in after.items():
        last_before = before[device][-1]
        assert all(doc == last_before for doc in docs[len(before[device]) :]), (
            f"{device}: the new leader's copy is the document it had, at the same generation"
        )
        assert observed[device] == last_before[0], f"{device} stays at the generation it had"
