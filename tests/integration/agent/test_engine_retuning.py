"""Re-tuned engines are shared per power mode: a real controller (uvicorn, SQLite), real ORT builds.

Simulated Orin Nano twins (agent/hardware/sim_profiles.py) in power mode 15W find only an engine
built
under 7W: it is valid, so they serve it, then re-tune. One of them builds under 15W and uploads;
the other waits for that build and pulls it. The store keeps both tunings of the engine key.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from agent.durable_files import sha256_file
from agent.engines.cache import EngineCache
from agent.engines.identity import EngineIdentity, identify
from agent.engines.resolver import EngineResolver, Resolved
from agent.engines.store_client import StoreClient
from agent.hardware.sim_profiles import PROFILES
from agent.runtimes.base import warm_up
from agent.runtimes.ort import load_ort
from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.delegate import DelegateConfig
from shared.engines import EngineManifest, LeaseOut
from shared.facts import DeviceFacts
from tests.integration.controller.conftest import admin_token, new_token
from tests.integration.controller.device_reports import report_facts, trust_device_builds

CONFIG = DelegateConfig()
NANO = PROFILES["orin-nano-8gb"]


@dataclass
class Twin:
    """One simulated Orin Nano: its resolver, cache, power mode and the build events it emitted."""

    name: str
    identity: EngineIdentity
    resolver: EngineResolver
    store: StoreClient
    events: list[str] = field(default_factory=list)

    def builds(self) -> int:
        return self.events.count("build_started")


@pytest.fixture
def onnx(tmp_path: Path) -> tuple[Path, str]:
    data = classifier(seed=11)
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


@pytest.fixture
def twins(
    controller: Controller, api: httpx.Client, tmp_path: Path, onnx: tuple[Path, str]
) -> Iterator[Any]:
    """Orin Nano twins, each with its facts reported, in a class that trusts device builds."""
    made: list[Twin] = []
    trust_device_builds(api, "nvidia-jetson-orin-nano-8gb/jp6.2")

    def make(name: str, power_mode: str) -> Twin:
        assert NANO.jetson is not None
        facts = DeviceFacts(
            hostname=name,
            os="Debian",
            arch="x86_64",
            onnxruntime_version=importlib.metadata.version("onnxruntime"),
            jetson=NANO.jetson.model_copy(update={"power_mode": power_mode}),
            gpu=NANO.gpu,
        )
        identity = identify("onnxruntime", facts, onnx[1], CONFIG)
        report_facts(controller, api, name, facts)
        token = new_token(controller, name, "device", device_id=name)
        store = StoreClient(controller.http_url, token=token)
        cache = EngineCache(tmp_path / name / "engines", 1 << 30)
        twin = Twin(name, identity, None, store)  # type: ignore[arg-type]

        def emit(kind: str, slot: str | None, message: str, **data: Any) -> None:
            twin.events.append(kind)

        twin.resolver = EngineResolver(
            cache, store, name, build_timeout_s=60, lease_ttl_s=60, emit=emit
        )
        made.append(twin)
        return twin

    yield make
    for twin in made:
        twin.store.close()


def resolve(twin: Twin, onnx: tuple[Path, str], retune: bool = False) -> Resolved:
    return twin.resolver.resolve("classifier", onnx[0], twin.identity, CONFIG, retune=retune)


def listed(api: httpx.Client) -> list[EngineManifest]:
    response = api.get("/api/v1/engines")
    assert response.status_code == 200, response.text
    fields = EngineManifest.model_fields
    return [
        EngineManifest.model_validate({k: v for k, v in m.items() if k in fields})
        for m in response.json()
    ]


def test_twins_in_one_power_mode_build_their_retuned_engine_once(
    twins: Any, onnx: tuple[Path, str], api: httpx.Client, controller: Controller
) -> None:
    other_mode = twins("gw-7w", "7W")
    a1, a2 = twins("gw-15w-1", "15W"), twins("gw-15w-2", "15W")
    assert a1.identity.key == other_mode.identity.key, "power mode is not part of the engine key"
    first = resolve(other_mode, onnx)
    assert (first.source, first.manifest.tuning.label()) == ("built", "7W")

    # the 7W engine is valid for the 15W twins: they serve it while they re-tune
    for twin in (a1, a2):
        served = resolve(twin, onnx)
        assert (served.source, served.tuning_matches) == ("pulled", False)
        assert served.manifest.built_by == "gw-7w"

    barrier = threading.Barrier(2)
    results: dict[str, Resolved] = {}
    errors: list[BaseException] = []

    def retune(twin: Twin) -> None:
        try:
            barrier.wait(10)
            results[twin.name] = resolve(twin, onnx, retune=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=retune, args=(t,)) for t in (a1, a2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    assert sorted(r.source for r in results.values()) == ["built", "pulled"]
    assert a1.builds() + a2.builds() == 1, "the second 15W twin pulled instead of building"
    builder = a1.name if a1.builds() else a2.name
    for resolved in results.values():
        assert resolved.tuning_matches
        assert resolved.manifest.tuning.label() == "15W"
        assert resolved.manifest.built_by == builder
    assert len({sha256_file(r.path) for r in results.values()}) == 1
    warm_up(load_ort(results[a2.name].path))

    rows = listed(api)
    assert sorted((m.engine_key, m.tuning.label(), m.built_by) for m in rows) == [
        (a1.identity.key, "15W", builder),
        (a1.identity.key, "7W", "gw-7w"),
    ]
    table = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)}).invoke(
        cli, ["engines", "ls", "--url", controller.http_url]
    )
    assert table.exit_code == 0, table.output
    tunings = sorted(line.split()[-4] for line in table.output.splitlines()[1:])
    assert tunings == ["15W", "7W"]

    # a third 15W twin coming up later gets the 15W build straight away, the 7W one the 7W build
    late = resolve(twins("gw-15w-3", "15W"), onnx)
    assert (late.source, late.manifest.built_by, late.tuning_matches) == ("pulled", builder, True)
    again = resolve(twins("gw-7w-2", "7W"), onnx)
    assert (again.source, again.manifest.built_by, again.tuning_matches) == (
        "pulled",
        "gw-7w",
        True,
    )


def test_the_store_answers_the_asked_tuning_and_says_how_it_matched(
    twins: Any, onnx: tuple[Path, str], api: httpx.Client
) -> None:
    seven = twins("gw-7w", "7W")
    fifteen = twins("gw-15w", "15W")
    resolve(seven, onnx)
    resolve(fifteen, onnx, retune=True)
    key = seven.identity.key

    def get(tuning: str | None) -> tuple[str, str]:
        params = {"tuning": tuning} if tuning is not None else None
        response = api.get(f"/api/v1/engines/{key}", params=params)
        assert response.status_code == 200, response.text
        manifest = EngineManifest.model_validate_json(response.content)
        assert manifest.signed is not None, "every tuning's manifest is signed for pulling twins"
        assert manifest.signed.manifest.sha256 == manifest.sha256
        return manifest.built_by, response.headers["Jetfleet-Tuning-Match"]

    assert get("15W") == ("gw-15w", "exact")
    assert get("7W") == ("gw-7w", "exact")
    assert get("MAXN") == ("gw-7w", "other")  # no MAXN build yet: the oldest valid one
    assert get(None) == ("gw-7w", "any")
    assert api.get(f"/api/v1/engines/{key}", params={"tuning": ""}).status_code == 400


def test_a_lease_for_one_power_mode_does_not_block_another(
    twins: Any, onnx: tuple[Path, str], api: httpx.Client
) -> None:
    seven = twins("gw-7w", "7W")
    key = seven.identity.key
    held = api.post(
        f"/api/v1/engines/{key}/lease",
        json={"device_id": "gw-dead", "ttl_s": 3600, "tuning": "15W"},
    )
    assert LeaseOut.model_validate_json(held.content).granted

    built = resolve(seven, onnx)  # a 15W builder holds its lease: the 7W device builds anyway
    assert (built.source, built.manifest.tuning.label()) == ("built", "7W")

    still = LeaseOut.model_validate_json(
        api.post(
            f"/api/v1/engines/{key}/lease", json={"device_id": "gw-other", "tuning": "15W"}
        ).content
    )
    assert (still.granted, still.holder, still.tuning) == (False, "gw-dead", "15W")
    seven_lease = LeaseOut.model_validate_json(
        api.post(
            f"/api/v1/engines/{key}/lease", json={"device_id": "gw-other", "tuning": "7W"}
        ).content
    )
    assert seven_lease.granted, "storing the 7W engine released the 7W lease"
