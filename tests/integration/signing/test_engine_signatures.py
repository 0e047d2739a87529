"""Engines pulled from the fleet store are verified before they enter the cache.

A real controller signs what a builder uploads; a twin that pinned the fleet key pulls and
verifies it. An attacker's engine store (a real HTTP server that answers like the controller)
serving altered engines is refused, and nothing of its bytes stays on the device.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import uuid
from pathlib import Path

import httpx
import pytest

from agent.engines.cache import EngineCache
from agent.engines.identity import EngineIdentity, identify
from agent.engines.resolver import EngineResolver
from agent.engines.store_client import StoreClient
from agent.runtimes.base import warm_up
from agent.runtimes.ort import load_ort
from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactRefused, ArtifactVerifier
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from shared.engines import EngineManifest
from shared.facts import DeviceFacts
from shared.manifests import SignedManifest
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.signing.harness import active_key, controller_settings, start_controller

CONFIG = DelegateConfig()


def model(tmp_path: Path) -> tuple[Path, EngineIdentity]:
    data = classifier(seed=7)
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    facts = DeviceFacts(
        hostname="h",
        os="Debian",
        arch="x86_64",
        onnxruntime_version=importlib.metadata.version("onnxruntime"),
    )
    return path, identify("onnxruntime", facts, hashlib.sha256(data).hexdigest(), CONFIG)


def twin(
    tmp_path: Path, name: str, store_url: str, verifier: ArtifactVerifier | None
) -> tuple[EngineResolver, EngineCache, StoreClient]:
    cache = EngineCache(tmp_path / name / "engines", 1 << 30)
    store = StoreClient(store_url)
    resolver = EngineResolver(
        cache,
        store,
        name,
        build_timeout_s=60,
        lease_ttl_s=60,
        verify=verifier.check_engine if verifier is not None else None,
    )
    return resolver, cache, store


def test_a_pulled_engine_is_verified_and_an_altered_one_never_enters_the_cache(
    mosquitto: str, tmp_path: Path, artifact_server: ArtifactServer
) -> None:
    settings = controller_settings(mosquitto, tmp_path, f"jfsig/{uuid.uuid4().hex[:10]}")
    controller = start_controller(settings)
    stores: list[StoreClient] = []
    try:
        key = active_key(settings)
        trust = TrustStore.open(tmp_path / "gw-b")
        trust.pin(key.key_id, key.public_key)
        verifier = ArtifactVerifier(trust, "gw-b")
        onnx, identity = model(tmp_path)

        builder, _, store_a = twin(tmp_path, "gw-a", controller.http_url, None)
        stores.append(store_a)
        built = builder.resolve("classifier", onnx, identity, CONFIG)
        assert built.source == "built"
        answer = httpx.get(f"{controller.http_url}/api/v1/engines/{identity.key}", timeout=10)
        served = EngineManifest.model_validate_json(answer.content)
        assert served.signed is not None
        signed = served.signed.manifest
        assert (signed.kind, signed.name, signed.sha256, signed.size, signed.key_id) == (
            "engine",
            identity.key,
            served.sha256,
            served.size,
            key.key_id,
        )

        puller, _, store_b = twin(tmp_path, "gw-b", controller.http_url, verifier)
        stores.append(store_b)
        pulled = puller.resolve("classifier", onnx, identity, CONFIG)
        assert pulled.source == "pulled"
        warm_up(load_ort(pulled.path))

        flipped = bytearray(built.path.read_bytes())
        flipped[len(flipped) // 2] ^= 0x01
        evil_sha = hashlib.sha256(flipped).hexdigest()
        artifact_server.files[f"/api/v1/artifacts/{evil_sha}"] = bytes(flipped)
        as_evil = served.model_copy(update={"sha256": evil_sha})
        altered = SignedManifest(
            manifest=served.signed.manifest.model_copy(update={"sha256": evil_sha}),
            signature=served.signed.signature,
        )
        cases = [
            (as_evil, "other_artifact"),
            (as_evil.model_copy(update={"signed": altered}), "bad_signature"),
            (as_evil.model_copy(update={"signed": None}), "unsigned"),
        ]
        for number, (manifest, reason) in enumerate(cases):
            artifact_server.files[f"/api/v1/engines/{identity.key}"] = (
                manifest.model_dump_json().encode()
            )
            resolver, cache, store = twin(
                tmp_path, f"gw-c{number}", artifact_server.base_url, verifier
            )
            stores.append(store)
            with pytest.raises(ArtifactRefused) as refused:
                resolver.resolve("classifier", onnx, identity, CONFIG)
            assert refused.value.reason == reason
            assert cache.get(identity.key) is None
            assert list((tmp_path / f"gw-c{number}" / "engines").rglob("*.pull")) == []
    finally:
        for store in stores:
            store.close()
        controller.stop()
