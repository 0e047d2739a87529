"""Exactly one replica runs the rollouts; ``kill -9`` of it mid-rollout hands the lease to another
within the lease TTL (+ 5 s) and the rollout completes from its persisted state."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.controller.conftest import poll
from tests.integration.replicas.conftest import LEASE_TTL_S, Cluster, Replica
from tests.integration.rollouts.conftest import Fleet as SimFleet
from tests.integration.rollouts.conftest import prepare

DEVICES = 12


def lease(db_url: str) -> tuple[str, datetime] | None:
    """The ``rollouts`` lease row: (holder, expires_at), None when there is none."""
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute(
            "SELECT holder, expires_at FROM controller_leases WHERE name = 'rollouts'"
        ).fetchone()
    return None if row is None else (str(row[0]), row[1])


def leader(replicas: list[Replica], holder: str) -> Replica | None:
    return next((r for r in replicas if r.holder() == holder), None)


def rollout(api: httpx.Client, rollout_id: str) -> dict[str, Any]:
    answer = api.get(f"/api/v1/rollouts/{rollout_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.slow
def test_leader_killed_mid_rollout_another_takes_over_and_completes_it(
    cluster: Cluster, mosquitto: str
) -> None:
    replicas = cluster.start(3)
    sims = SimFleet(mosquitto, cluster.prefix)
    api = cluster.api(replicas[0])
    try:
        prepare(api, sims, DEVICES, set())
        body = {
            "model": "detector",
            "version": "2.0.0",
            "targets": {"selector": "site=plant"},
            "strategy": {"waves": "1,3,50%,100%", "device_timeout_s": 60, "soak_s": 2.0},
        }
        created = api.post("/api/v1/rollouts", json=body)
        assert created.status_code == 201, created.text
        rid = created.json()["id"]
        poll(lambda: rollout(api, rid)["current_wave"] >= 1, 30, "the second wave to start")

        # one lease row names the replica that runs the rollouts; kill that one
        # (the lease row is committed before its holder's log line is written: wait for both)
        row = poll(
            lambda: (now := lease(cluster.db_url)) is not None and leader(replicas, now[0]) and now,
            10,
            "a replica to hold the rollout lease and log taking it",
        )
        first = leader(replicas, row[0])
        assert first is not None
        # the lease lasts the configured TTL, not the built-in 10 s
        ahead = (row[1] - datetime.now(timezone.utc)).total_seconds()
        assert ahead <= LEASE_TTL_S + 0.5, f"lease expires {ahead:.1f} s ahead"

        first.kill9()
        survivors = [r for r in replicas if r is not first]
        with cluster.api(survivors[0]) as on_survivor:
            row = poll(
                lambda: (
                    (now := lease(cluster.db_url)) is not None
                    and now[0] != first.holder()
                    and leader(survivors, now[0])
                    and now
                ),
                LEASE_TTL_S + 5,
                "another replica to take the rollout lease and log it",
            )
            successor = leader(survivors, row[0])
            assert successor is not None

            last: list[dict[str, Any]] = []

            def finished() -> dict[str, Any] | None:
                last[:] = [rollout(on_survivor, rid)]
                return last[0] if last[0]["state"] not in ("running", "pending") else None

            try:
                done = poll(finished, 60, "the rollout to finish under the new leader")
            except pytest.fail.Exception:
                print(json.dumps(last, indent=1, default=str))
                raise
            assert done["state"] == "succeeded", done
            assert {t["status"] for t in done["targets"]} == {"succeeded"}
            poll(
                lambda: all(a.active.get("detector") == "2.0.0" for a in sims.agents.values()),
                30,
                "every agent serving 2.0.0",
            )
            devices = on_survivor.get("/api/v1/devices").json()
            assert len(devices) == DEVICES
            assert all(d["observed_generation"] == d["desired_generation"] for d in devices)
            assert successor.alive
    finally:
        api.close()
        sims.stop()
