"""One reading of HTTP answers for every agent client, against a real HTTP server.

408, 425, 429 and 5xx mean "not now": a download is retried and resumes its partial file, the
engine store is treated as unavailable (the device builds alone), enrolment says to try again.
Any other 4xx means "no": the slot fails for good with the status in its message.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.engines.cache import EngineCache
from agent.engines.identity import identify
from agent.engines.resolver import EngineResolver
from agent.engines.store_client import StoreClient, StoreRejected, StoreUnavailable
from agent.errors import ArtifactUnavailable, DownloadError, PermanentError, TransientError
from agent.link.downloader import Downloader, model_path, part_path
from agent.link.enrolment import EnrolmentError, request_identity
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts
from shared.messages import ArtifactRef
from tests.integration.agent.artifact_server import ArtifactServer
from tests.ports import free_port

FACTS = DeviceFacts(
    hostname="h",
    os="Debian",
    arch="x86_64",
    onnxruntime_version=importlib.metadata.version("onnxruntime"),
)


@pytest.fixture
def downloader(tmp_path: Path) -> Iterator[Downloader]:
    d = Downloader(tmp_path)
    yield d
    d.close()


@pytest.mark.parametrize("status", [408, 425, 429, 503])
def test_a_not_now_answer_is_retried_and_the_download_resumes_to_success(
    status: int, tmp_path: Path, artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    data = classifier()
    ref = artifact_server.add("cls.onnx", data)
    part = part_path(tmp_path, ref.sha256)
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:1000])
    artifact_server.answers.append(status)

    with pytest.raises(DownloadError, match=f"HTTP {status}") as first:
        downloader.fetch(ref)
    assert isinstance(first.value, TransientError)
    assert part.read_bytes() == data[:1000]

    assert downloader.fetch(ref).read_bytes() == data
    assert model_path(tmp_path, ref.sha256).is_file()
    assert [(r.range, r.status) for r in artifact_server.requests] == [
        ("bytes=1000-", status),
        ("bytes=1000-", 206),
    ]


def test_a_refused_download_is_permanent_and_names_the_status(
    artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    ref = artifact_server.add("cls.onnx", classifier())
    artifact_server.answers.append(403)
    with pytest.raises(ArtifactUnavailable, match="HTTP 403") as refused:
        downloader.fetch(ref)
    assert isinstance(refused.value, PermanentError)


def test_a_download_from_a_closed_port_is_transient(downloader: Downloader) -> None:
    url = f"http://127.0.0.1:{free_port()}/artifacts/cls.onnx"
    ref = ArtifactRef(url=url, sha256="1" * 64, size=3)
    with pytest.raises(DownloadError, match=f"download of {url} failed: .*; will resume"):
        downloader.fetch(ref)


def test_an_engine_store_answering_429_lets_the_device_build_alone(
    tmp_path: Path, artifact_server: ArtifactServer
) -> None:
    data = classifier(seed=5)
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(data)
    config = DelegateConfig()
    identity = identify("onnxruntime", FACTS, hashlib.sha256(data).hexdigest(), config)
    events: list[str] = []

    def emit(kind: str, slot: str | None, message: str, **data: Any) -> None:
        events.append(kind)

    artifact_server.answers.append(429)
    store = StoreClient(artifact_server.base_url)
    try:
        resolver = EngineResolver(
            EngineCache(tmp_path / "engines", 1 << 30), store, "gw-a", build_timeout_s=60, emit=emit
        )
        resolved = resolver.resolve("classifier", onnx, identity, config)
    finally:
        store.close()
    assert resolved.source == "built"
    assert events[0] == "build_started"
    assert events[-1] == "build_done"
    assert [(r.path.split("?")[0], r.status) for r in artifact_server.requests] == [
        (f"/api/v1/engines/{identity.key}", 429)
    ]


@pytest.mark.parametrize(
    ("status", "error"),
    [(425, StoreUnavailable), (500, StoreUnavailable), (403, StoreRejected)],
)
def test_the_engine_store_reads_statuses_like_the_downloader(
    status: int, error: type[Exception], artifact_server: ArtifactServer
) -> None:
    artifact_server.answers.append(status)
    store = StoreClient(artifact_server.base_url)
    try:
        with pytest.raises(error, match=f"HTTP {status}"):
            store.get_manifest("a" * 64)
    finally:
        store.close()


def enrol(url: str) -> dict[str, Any]:
    return request_identity(url, "token", device_id="gw-a", labels={}, facts=None, timeout_s=5)


def test_enrolment_says_to_try_again_when_the_controller_cannot_answer_now(
    artifact_server: ArtifactServer,
) -> None:
    artifact_server.answers.append(503)
    with pytest.raises(EnrolmentError, match=r"try again") as busy:
        enrol(artifact_server.base_url)
    assert "(HTTP 503)" in str(busy.value)
    artifact_server.answers.append(429)
    with pytest.raises(EnrolmentError, match=r"too many enrolment attempts: retry in a minute"):
        enrol(artifact_server.base_url)


def test_enrolment_refused_names_the_controllers_reason_and_status(
    artifact_server: ArtifactServer,
) -> None:
    artifact_server.answers.append(403)
    with pytest.raises(EnrolmentError, match=r"enrolment refused: scripted 403 \(HTTP 403\)"):
        enrol(artifact_server.base_url)


def test_enrolment_against_a_closed_port_says_which_controller() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EnrolmentError, match=rf"cannot reach the controller at {url} \(Connect"):
        enrol(url)
