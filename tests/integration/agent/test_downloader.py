"""The downloader against a real HTTP server: full, resumed and refused downloads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.errors import ArtifactUnavailable, IntegrityError
from agent.link.downloader import Downloader, model_path, part_path
from controller.demo.sample_models import classifier
from shared.messages import ArtifactRef
from tests.integration.agent.artifact_server import ArtifactServer


@pytest.fixture
def downloader(tmp_path: Path) -> Iterator[Downloader]:
    d = Downloader(tmp_path)
    yield d
    d.close()


def test_full_download_lands_verified_in_models(
    tmp_path: Path, artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    data = classifier()
    ref = artifact_server.add("cls.onnx", data)
    path = downloader.fetch(ref)
    assert path == model_path(tmp_path, ref.sha256)
    assert path.read_bytes() == data
    assert not part_path(tmp_path, ref.sha256).exists()
    assert [r.range for r in artifact_server.requests] == [None]


def test_present_model_is_not_downloaded_again(
    artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    ref = artifact_server.add("cls.onnx", classifier())
    downloader.fetch(ref)
    downloader.fetch(ref)
    assert len(artifact_server.requests) == 1


def test_partial_download_resumes_with_a_range_request(
    tmp_path: Path, artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    data = classifier()
    ref = artifact_server.add("cls.onnx", data)
    part = part_path(tmp_path, ref.sha256)
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:1000])
    path = downloader.fetch(ref)
    assert path.read_bytes() == data
    assert [(r.range, r.status) for r in artifact_server.requests] == [("bytes=1000-", 206)]
    assert not part.exists()


def test_sha_mismatch_is_refused_and_leaves_nothing_behind(
    tmp_path: Path, artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    good = artifact_server.add("cls.onnx", classifier())
    wrong = ArtifactRef(url=good.url, sha256="0" * 64, size=good.size)
    with pytest.raises(IntegrityError) as info:
        downloader.fetch(wrong)
    assert str(info.value) == f"sha256 mismatch: expected {'0' * 64}, got {good.sha256}"
    assert list((tmp_path / "models").iterdir()) == []
    assert list((tmp_path / "downloads").iterdir()) == []


def test_size_mismatch_is_refused_and_leaves_nothing_behind(
    tmp_path: Path, artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    good = artifact_server.add("cls.onnx", classifier())
    short = ArtifactRef(url=good.url, sha256=good.sha256, size=good.size - 10)
    with pytest.raises(IntegrityError, match="size mismatch"):
        downloader.fetch(short)
    assert list((tmp_path / "downloads").iterdir()) == []


def test_missing_artifact_is_a_permanent_error_naming_the_status(
    artifact_server: ArtifactServer, downloader: Downloader
) -> None:
    ref = ArtifactRef(url=artifact_server.base_url + "/artifacts/nope", sha256="1" * 64, size=3)
    with pytest.raises(ArtifactUnavailable, match="HTTP 404"):
        downloader.fetch(ref)
