"""The agent's real HTTP clients with a device token against a real controller."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agent.engines.store_client import StoreClient, StoreRejected
from agent.errors import ArtifactUnavailable
from agent.link.downloader import Downloader
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.facts import DeviceFacts, GpuFacts, JetsonFacts
from shared.messages import ArtifactRef
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.controller.conftest import new_token
from tests.integration.controller.device_reports import report_facts
from tests.integration.controller.test_engine_store import ENGINE_BYTES, manifest

ORIN = DeviceFacts(
    hostname="gw-1",
    os="Ubuntu 22.04",
    arch="aarch64",
    tensorrt_version="10.3.0.30",
    jetson=JetsonFacts(part_number="p3767-0005"),
    gpu=GpuFacts(compute_capability="8.7"),
)
"""The Orin whose TensorRT build ``manifest()`` describes: it may share that engine."""


def pushed_model(api: httpx.Client) -> ArtifactRef:
    out = api.put("/api/v1/models/det/versions/1", content=classifier()).json()
    return ArtifactRef(url=out["download_url"], sha256=out["sha256"], size=out["size"])


def test_an_agent_with_a_device_token_pulls_a_model_and_shares_an_engine(
    controller: Controller, api: httpx.Client, tmp_path: Path
) -> None:
    ref = pushed_model(api)
    token = new_token(controller, "gw-1", "device", device_id="gw-1")

    anonymous = Downloader(tmp_path / "a", base_url=controller.http_url)
    try:
        with pytest.raises(ArtifactUnavailable, match="HTTP 401: the agent sent no API token"):
            anonymous.fetch(ref)
    finally:
        anonymous.close()

    downloader = Downloader(tmp_path / "b", base_url=controller.http_url, token=token)
    try:
        assert downloader.fetch(ref).read_bytes() == classifier()
    finally:
        downloader.close()

    report_facts(controller, api, "gw-1", ORIN)
    store = StoreClient(controller.http_url, token=token)
    try:
        m = manifest(ENGINE_BYTES, built_by="gw-1")
        assert store.lease(m.engine_key, "gw-1", 600).granted
        engine = tmp_path / "engine.plan"
        engine.write_bytes(ENGINE_BYTES)
        assert store.upload(engine, m.sha256).sha256 == m.sha256
        store.put_manifest(m)
        assert store.get_manifest(m.engine_key) is not None
    finally:
        store.close()
    stored = api.get(f"/api/v1/engines/{m.engine_key}").json()
    assert stored["built_by"] == "gw-1"
    audit = api.get("/api/v1/audit", params={"actor": "gw-1"}).json()
    assert [r["action"] for r in reversed(audit)] == [
        "POST /api/v1/engines/{key}/lease",
        "POST /api/v1/artifacts",
        "PUT /api/v1/engines/{key}",
    ]
    assert {r["detail"]["device"] for r in audit} == {"gw-1"}


def test_a_device_token_of_a_cannot_act_as_b(controller: Controller, tmp_path: Path) -> None:
    token_a = new_token(controller, "gw-a", "device", device_id="gw-a")
    store = StoreClient(controller.http_url, token=token_a)
    try:
        key = manifest(ENGINE_BYTES).engine_key
        with pytest.raises(StoreRejected, match=r"HTTP 403.*speaks for device 'gw-a', not 'gw-b'"):
            store.lease(key, "gw-b", 600)
        with pytest.raises(StoreRejected, match="HTTP 403"):
            store.put_manifest(manifest(ENGINE_BYTES, built_by="gw-b"))
        with pytest.raises(StoreRejected, match="HTTP 403"):
            store.release(key, "gw-b")
        assert store.lease(key, "gw-a", 600).granted
    finally:
        store.close()


def test_the_token_goes_only_to_the_controller_not_to_other_hosts(
    controller: Controller, artifact_server: ArtifactServer, tmp_path: Path
) -> None:
    token = new_token(controller, "gw-1", "device", device_id="gw-1")
    ref = artifact_server.add("elsewhere.onnx", classifier())
    downloader = Downloader(tmp_path, base_url=controller.http_url, token=token)
    try:
        downloader.fetch(ref)
    finally:
        downloader.close()
    assert [r.authorization for r in artifact_server.requests] == [None]
