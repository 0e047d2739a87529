"""The engine store over HTTP and its build leases on SQLite and PostgreSQL (real databases)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from controller.db import migrate
from controller.db.engine_store import EngineStoreDb
from controller.db.session import make_engine
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey, engine_key
from shared.engines import EngineManifest

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
ENGINE_BYTES = b"\x00plan bytes of a pretend engine" * 100


def manifest(data: bytes, *, size: int | None = None, built_by: str = "gw-1") -> EngineManifest:
    validity = ValidityKey(
        runtime="tensorrt",
        runtime_version="10.3.0.30",
        platform="linux-aarch64-tegra",
        compute_capability="8.7",
        device_name="p3767-0005",
    )
    content = ContentKey.of("a" * 64, DelegateConfig(precision="fp16"))
    return EngineManifest(
        engine_key=engine_key(validity, content),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data) if size is None else size,
        validity=validity,
        content=content,
        tuning=TuningTag(power_mode="15W", jetson_clocks=True),
        built_by=built_by,
        build_seconds=42.5,
        created_at=T0,
    )


def body(m: EngineManifest) -> dict[str, Any]:
    return m.model_dump(mode="json")


@pytest.fixture
def leases(db_url: str) -> Iterator[EngineStoreDb]:
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    yield EngineStoreDb(engine)
    engine.dispose()


def race(leases: EngineStoreDb, key: str) -> dict[str, bool]:
    """Two devices ask for the lease of ``key`` at the same instant; who got it."""
    barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def ask(device: str) -> None:
        barrier.wait()
        results[device] = leases.acquire_lease(key, device, 60, T0).granted

    threads = [threading.Thread(target=ask, args=(d,)) for d in ("gw-a", "gw-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_two_devices_racing_for_a_lease_get_exactly_one_grant(leases: EngineStoreDb) -> None:
    for round_ in range(5):
        key = hashlib.sha256(f"race-{round_}".encode()).hexdigest()
        results = race(leases, key)
        assert sorted(results.values()) == [False, True], results


def test_racing_for_an_expired_lease_also_has_one_winner(leases: EngineStoreDb) -> None:
    for round_ in range(5):
        key = hashlib.sha256(f"expired-{round_}".encode()).hexdigest()
        assert leases.acquire_lease(key, "gw-dead", 60, T0 - timedelta(seconds=120)).granted
        results = race(leases, key)
        assert sorted(results.values()) == [False, True], results


def test_renewal_expiry_and_release(leases: EngineStoreDb) -> None:
    key = "b" * 64
    assert leases.acquire_lease(key, "gw-1", 60, T0).granted
    denied = leases.acquire_lease(key, "gw-2", 60, T0 + timedelta(seconds=30))
    assert not denied.granted
    assert (denied.lease.holder, denied.lease.expires_at) == ("gw-1", T0 + timedelta(seconds=60))
    renewed = leases.acquire_lease(key, "gw-1", 60, T0 + timedelta(seconds=50))
    assert renewed.granted
    assert renewed.lease.expires_at == T0 + timedelta(seconds=110)
    assert not leases.acquire_lease(key, "gw-2", 60, T0 + timedelta(seconds=100)).granted
    taken = leases.acquire_lease(key, "gw-2", 60, T0 + timedelta(seconds=110))
    assert taken.granted
    assert taken.lease.holder == "gw-2"
    leases.release_lease(key, "gw-1")  # not the holder: nothing happens
    assert not leases.acquire_lease(key, "gw-1", 60, T0 + timedelta(seconds=120)).granted
    leases.release_lease(key, "gw-2")
    assert leases.acquire_lease(key, "gw-1", 60, T0 + timedelta(seconds=120)).granted


def test_upload_an_engine_then_a_twin_finds_and_downloads_it(db_api: httpx.Client) -> None:
    m = manifest(ENGINE_BYTES)
    key = m.engine_key
    assert db_api.get(f"/api/v1/engines/{key}").status_code == 404

    tag = {"tuning": "15W+clocks"}  # the manifest's TuningTag.label()
    lease = db_api.post(
        f"/api/v1/engines/{key}/lease", json={"device_id": "gw-1", "ttl_s": 600} | tag
    )
    assert lease.status_code == 200
    assert lease.json()["granted"] is True
    twin = db_api.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-2"} | tag).json()
    assert (twin["granted"], twin["holder"]) == (False, "gw-1")

    up = db_api.post(
        "/api/v1/artifacts",
        content=ENGINE_BYTES,
        params={"sha256": m.sha256},
        headers={"Content-Type": "application/octet-stream"},
    )
    assert up.status_code == 201, up.text
    assert up.json() == {"sha256": m.sha256, "size": len(ENGINE_BYTES)}
    again = db_api.post("/api/v1/artifacts", content=ENGINE_BYTES)
    assert again.status_code == 200

    put = db_api.put(f"/api/v1/engines/{key}", json=body(m))
    assert put.status_code == 201, put.text
    assert db_api.put(f"/api/v1/engines/{key}", json=body(m)).status_code == 200

    # storing the manifest released the builder's lease: the twin may now take it
    assert db_api.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-2"} | tag).json()[
        "granted"
    ]
    got = EngineManifest.model_validate(db_api.get(f"/api/v1/engines/{key}").json())
    assert got.model_copy(update={"signed": None}) == m
    assert got.signed is not None, "the controller signs the engines it accepts"
    assert (got.signed.manifest.name, got.signed.manifest.sha256) == (key, m.sha256)
    assert [e["engine_key"] for e in db_api.get("/api/v1/engines").json()] == [key]
    download = db_api.get(f"/api/v1/artifacts/{m.sha256}")
    assert download.content == ENGINE_BYTES


def test_manifest_checks(api: httpx.Client) -> None:
    m = manifest(ENGINE_BYTES)
    key = m.engine_key
    missing = api.put(f"/api/v1/engines/{key}", json=body(m))
    assert missing.status_code == 400
    assert "POST the engine bytes" in missing.json()["detail"]

    api.post("/api/v1/artifacts", content=ENGINE_BYTES)
    wrong_size = api.put(f"/api/v1/engines/{key}", json=body(manifest(ENGINE_BYTES, size=7)))
    assert wrong_size.status_code == 400
    assert "size 7" in wrong_size.json()["detail"]

    other_key = "c" * 64
    mismatch = api.put(f"/api/v1/engines/{other_key}", json=body(m))
    assert mismatch.status_code == 400
    assert "differs from the URL key" in mismatch.json()["detail"]

    forged = body(m) | {"engine_key": other_key}
    not_computed = api.put(f"/api/v1/engines/{other_key}", json=forged)
    assert not_computed.status_code == 400
    assert "shared.engine_keys.engine_key" in not_computed.json()["detail"]

    assert api.put(f"/api/v1/engines/{key}", json=body(m)).status_code == 201
    other = api.put(f"/api/v1/engines/{key}", json=body(manifest(ENGINE_BYTES, built_by="gw-9")))
    assert other.status_code == 409
    assert "another manifest" in other.json()["detail"]


def test_artifact_upload_with_a_wrong_sha256_is_refused_and_not_stored(
    api: httpx.Client,
) -> None:
    claimed = hashlib.sha256(b"something else").hexdigest()
    r = api.post("/api/v1/artifacts", content=b"truncated", params={"sha256": claimed})
    assert r.status_code == 400
    assert "send it again" in r.json()["detail"]
    actual = hashlib.sha256(b"truncated").hexdigest()
    assert api.get(f"/api/v1/artifacts/{actual}").status_code == 404


def test_lease_release_over_http_is_idempotent(api: httpx.Client) -> None:
    key = "d" * 64
    assert api.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-1"}).json()["granted"]
    for _ in range(2):
        r = api.delete(f"/api/v1/engines/{key}/lease", params={"device_id": "gw-1"})
        assert r.status_code == 204
    assert api.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-2"}).json()["granted"]
