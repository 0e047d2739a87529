"""Engine manifests per (engine key, tuning tag) on SQLite and PostgreSQL (real databases).

A second power mode's build of the same engine key is stored beside the first (409 only for
other bytes under the same tuning), and migration 0008 keeps the engines stored before it.
"""

from __future__ import annotations

import json

import httpx
from alembic import command
from sqlalchemy import text

from controller.db import migrate
from controller.db.engine_store import EngineStoreDb
from controller.db.session import make_engine
from shared.engine_keys import TuningTag
from shared.engines import EngineManifest
from tests.integration.controller.test_engine_store import ENGINE_BYTES, T0, body, manifest

OTHER_BYTES = b"\x01the same engine, timed under other clocks" * 100


def tuned(data: bytes, power_mode: str, clocks: bool, built_by: str) -> EngineManifest:
    return manifest(data, built_by=built_by).model_copy(
        update={"tuning": TuningTag(power_mode=power_mode, jetson_clocks=clocks)}
    )


def test_each_tuning_of_an_engine_key_is_stored_once(db_api: httpx.Client) -> None:
    fast = tuned(ENGINE_BYTES, "MAXN", True, "gw-1")
    slow = tuned(OTHER_BYTES, "15W", False, "gw-2")
    key = fast.engine_key
    assert key == slow.engine_key
    for data in (ENGINE_BYTES, OTHER_BYTES):
        assert db_api.post("/api/v1/artifacts", content=data).status_code == 201

    assert db_api.put(f"/api/v1/engines/{key}", json=body(fast)).status_code == 201
    assert db_api.put(f"/api/v1/engines/{key}", json=body(slow)).status_code == 201
    assert db_api.put(f"/api/v1/engines/{key}", json=body(slow)).status_code == 200
    rebuilt = tuned(ENGINE_BYTES, "15W", False, "gw-3")
    conflict = db_api.put(f"/api/v1/engines/{key}", json=body(rebuilt))
    assert conflict.status_code == 409
    assert "(15W)" in conflict.json()["detail"]

    listed = db_api.get("/api/v1/engines").json()
    assert [(m["engine_key"], m["built_by"]) for m in listed] == [(key, "gw-1"), (key, "gw-2")]
    for tuning, builder in (("MAXN+clocks", "gw-1"), ("15W", "gw-2")):
        got = db_api.get(f"/api/v1/engines/{key}", params={"tuning": tuning})
        assert (got.json()["built_by"], got.headers["Jetfleet-Tuning-Match"]) == (builder, "exact")


def test_0008_keeps_engines_stored_before_it(db_url: str) -> None:
    command.upgrade(migrate.alembic_config(db_url), "0007")
    m = tuned(ENGINE_BYTES, "15W", True, "gw-old")
    sha, key, now = m.sha256, m.engine_key, "2026-01-01 00:00:00"
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"INSERT INTO artifacts VALUES ('{sha}', {m.size}, '{now}')"))
            conn.execute(
                text(
                    "INSERT INTO engines (engine_key, sha256, size, built_by, manifest, "
                    "created_at) VALUES (:k, :s, :n, 'gw-old', :m, :t)"
                ),
                {"k": key, "s": sha, "n": m.size, "m": json.dumps(body(m)), "t": now},
            )
            conn.execute(
                text(f"INSERT INTO build_leases VALUES ('{key}', 'gw-old', '{now}')"),
            )
        migrate.upgrade(db_url)
        store = EngineStoreDb(engine)
        assert store.manifests() == [m]
        assert store.manifest(key, "15W+clocks") == m
        assert store.acquire_lease(key, "gw-new", 60, T0, "15W+clocks").granted
        other = tuned(OTHER_BYTES, "7W", False, "gw-new")
        store.add_artifact(other.sha256, other.size)
        assert store.put_manifest(other, "7W")
        assert [x.built_by for x in store.manifests_of(key)] == ["gw-old", "gw-new"]
        command.downgrade(migrate.alembic_config(db_url), "0007")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT built_by FROM engines")).scalars().all() == ["gw-old"]
    finally:
        engine.dispose()
