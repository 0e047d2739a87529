"""Desired documents are republished by one replica, not by each (issue 17 item 1): three
replicas started at once publish every device's retained document once, and when that replica
is killed the one that takes the rollout lease republishes. Real ``jetfleet serve`` processes,
PostgreSQL and Mosquitto."""

from __future__ import annotations

import time

from tests.integration.controller.conftest import poll
from tests.integration.replicas.conftest import Cluster, Replica

REPUBLISHED = "republished the desired state of"
LEFT = "desired documents are republished by the replica running the rollouts"


def republishers(replicas: list[Replica]) -> list[Replica]:
    return [r for r in replicas if r.alive and REPUBLISHED in r.text()]


def test_three_replicas_starting_together_republish_once_and_a_new_leader_does_again(
    cluster: Cluster,
) -> None:
    replicas = cluster.start(3)
    [first] = poll(lambda: republishers(replicas) or None, 30, "a replica to republish")
    time.sleep(2.0)  # the others have connected and decided by now
    assert republishers(replicas) == [first], "exactly one replica republished"
    assert first.holder() is not None, "the one that republished runs the rollouts"
    others = [r for r in replicas if r is not first]
    assert all(LEFT in r.text() for r in others), "the others said they left it to the leader"

    first.kill9()
    survivors = others
    [second] = poll(
        lambda: [r for r in survivors if r.holder() is not None] or None,
        30,
        "another replica to take the rollout lease",
    )
    poll(lambda: REPUBLISHED in second.text(), 30, "the new leader to republish")
