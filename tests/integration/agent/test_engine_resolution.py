"""Engine resolution against a real controller (uvicorn, SQLite, Mosquitto) and real ORT builds.

Cache hit, store pull, local build + upload, lease contention between twins, lease expiry after
a dead builder, and a corrupt cache file that is never loaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.durable_files import sha256_file
from agent.engines.build_runner import BuildFailed
from agent.engines.cache import EngineCache
from agent.engines.identity import EngineIdentity, identify
from agent.engines.resolver import EngineResolver, Resolved
from agent.engines.store_client import StoreClient
from agent.errors import AgentError
from agent.runtimes.base import warm_up
from agent.runtimes.ort import load_ort
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.delegate import DelegateConfig
from shared.engines import EngineManifest, LeaseOut
from shared.facts import DeviceFacts
from tests.integration.controller.conftest import new_token
from tests.integration.controller.device_reports import report_facts, trust_device_builds

CONFIG = DelegateConfig()


@dataclass
class Device:
    """One simulated gateway's resolver with its own cache and the events it emitted."""

    name: str
    resolver: EngineResolver
    cache: EngineCache
    store: StoreClient
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)

    def builds(self) -> int:
        return sum(1 for kind, _ in self.events if kind == "build_started")


FACTS = DeviceFacts(
    hostname="h",
    os="Debian",
    arch="x86_64",
    onnxruntime_version=importlib.metadata.version("onnxruntime"),
)


@pytest.fixture
def devices(controller: Controller, api: httpx.Client, tmp_path: Path) -> Iterator[Any]:
    """Gateways of one class that trusts its devices' builds, each with its facts reported."""
    made: list[Device] = []
    trust_device_builds(api, "cpu-x86_64")

    def make(name: str, lease_ttl_s: float = 60.0) -> Device:
        report_facts(controller, api, name, FACTS)
        token = new_token(controller, name, "device", device_id=name)
        store = StoreClient(controller.http_url, token=token)
        device = Device(name, None, None, store)  # type: ignore[arg-type]

        def emit(kind: str, slot: str | None, message: str, **data: Any) -> None:
            device.events.append((kind, data))

        cache = EngineCache(
            tmp_path / name / "engines",
            1 << 30,
            on_corrupt=lambda key, reason: device.corrupt.append(reason),
        )
        device.cache = cache
        device.resolver = EngineResolver(
            cache, store, name, build_timeout_s=60, lease_ttl_s=lease_ttl_s, emit=emit
        )
        made.append(device)
        return device

    yield make
    for device in made:
        device.store.close()


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, EngineIdentity]:
    data = classifier(seed=5)
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return path, identify("onnxruntime", FACTS, hashlib.sha256(data).hexdigest(), CONFIG)


def resolve(device: Device, model: tuple[Path, EngineIdentity]) -> Resolved:
    path, identity = model
    return device.resolver.resolve("classifier", path, identity, CONFIG)


def stored(api: httpx.Client, key: str) -> EngineManifest | None:
    response = api.get(f"/api/v1/engines/{key}")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    return EngineManifest.model_validate_json(response.content)


def test_local_build_is_uploaded_and_a_second_load_hits_the_cache(
    devices: Any, model: tuple[Path, EngineIdentity], api: httpx.Client
) -> None:
    gw = devices("gw-a")
    first = resolve(gw, model)
    assert first.source == "built"
    assert first.tuning_matches
    assert [k for k, _ in gw.events] == [
        "build_started",
        "build_progress",
        "build_progress",
        "build_done",
    ]
    done = gw.events[-1][1]
    assert done["seconds"] > 0
    assert done["peak_rss_mib"] > 0
    manifest = stored(api, first.key)
    assert manifest is not None
    assert manifest.built_by == "gw-a"
    assert (manifest.size, manifest.sha256) == sha256_file(first.path)
    blob = api.get(f"/api/v1/artifacts/{manifest.sha256}")
    assert blob.status_code == 200
    assert hashlib.sha256(blob.content).hexdigest() == manifest.sha256
    warm_up(load_ort(first.path))

    second = resolve(gw, model)
    assert second.source == "cached"
    assert second.path == first.path
    assert gw.builds() == 1


def test_a_twin_pulls_the_engine_instead_of_building(
    devices: Any, model: tuple[Path, EngineIdentity]
) -> None:
    builder, twin = devices("gw-a"), devices("gw-b")
    built = resolve(builder, model)
    pulled = resolve(twin, model)
    assert pulled.source == "pulled"
    assert twin.builds() == 0
    assert pulled.manifest.built_by == "gw-a"
    assert sha256_file(pulled.path) == sha256_file(built.path)
    warm_up(load_ort(pulled.path))


def test_twins_asking_at_once_build_exactly_once(
    devices: Any, model: tuple[Path, EngineIdentity]
) -> None:
    twins = [devices(f"gw-{i}") for i in range(3)]
    barrier = threading.Barrier(len(twins))
    results: dict[str, Resolved] = {}
    errors: list[BaseException] = []

    def run(device: Device) -> None:
        try:
            barrier.wait(10)
            results[device.name] = resolve(device, model)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d in twins]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    sources = sorted(r.source for r in results.values())
    assert sources == ["built", "pulled", "pulled"]
    assert sum(d.builds() for d in twins) == 1
    assert len({r.manifest.sha256 for r in results.values()}) == 1


def test_a_dead_builders_lease_expires_and_another_device_builds(
    devices: Any, model: tuple[Path, EngineIdentity], api: httpx.Client
) -> None:
    _, identity = model
    taken = api.post(
        f"/api/v1/engines/{identity.key}/lease", json={"device_id": "gw-dead", "ttl_s": 1.5}
    )
    lease = LeaseOut.model_validate_json(taken.content)
    assert lease.granted
    survivor = devices("gw-alive")
    resolved = resolve(survivor, model)
    assert resolved.source == "built"
    assert datetime.now(timezone.utc) >= lease.expires_at
    manifest = stored(api, identity.key)
    assert manifest is not None
    assert manifest.built_by == "gw-alive"


def test_a_corrupt_cached_engine_is_not_loaded_and_is_pulled_again(
    devices: Any, model: tuple[Path, EngineIdentity]
) -> None:
    gw = devices("gw-a")
    first = resolve(gw, model)
    good = sha256_file(first.path)
    data = bytearray(first.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    first.path.write_bytes(bytes(data))
    again = resolve(gw, model)
    assert again.source == "pulled"
    assert sha256_file(again.path) == good
    assert len(gw.corrupt) == 1
    assert "is corrupt" in gw.corrupt[0]
    assert gw.builds() == 1


def test_a_calibration_cache_named_by_a_config_is_fetched_once_and_verified(
    devices: Any, api: httpx.Client
) -> None:
    cache_bytes = b"TRT-8600-EntropyCalibration2\ninput: 3c010a14\n"
    sha = hashlib.sha256(cache_bytes).hexdigest()
    uploaded = api.post(
        "/api/v1/artifacts",
        content=cache_bytes,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    device = devices("gw-int8")
    path = device.resolver.calibration_cache(sha)
    assert path.read_bytes() == cache_bytes
    path.write_bytes(b"tampered")
    assert device.resolver.calibration_cache(sha).read_bytes() == cache_bytes
    with pytest.raises(AgentError, match="HTTP 404"):
        device.resolver.calibration_cache("0" * 64)


def test_without_a_controller_a_calibration_cache_is_a_clear_build_failure(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path / "engines", 1 << 30)
    resolver = EngineResolver(cache, None, "gw-offline")
    with pytest.raises(BuildFailed, match="set controller_url"):
        resolver.calibration_cache("ab" * 32)
