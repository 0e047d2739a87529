"""Replicas that share no disk keep artifacts and engines in one S3 bucket.

Real ``jetfleet serve`` processes on one PostgreSQL, each with its own data directory, the same
``--artifact-store s3://...`` on a real SeaweedFS (endpoint and credentials from the standard
AWS variables). The fleet signing key is still a file every replica needs: it is copied to the
second one, as an operator distributes it (a secret, not an artifact).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import httpx
import pytest

from agent.engines.store_client import StoreClient
from agent.errors import DownloadError
from agent.link.downloader import Downloader, part_path
from controller.analysis.reference_outputs import reference_npz
from controller.demo import sample_models
from controller.trust.key_files import KEYS_DIR
from shared.engines import EngineManifest
from shared.messages import ArtifactRef
from tests.integration.controller.conftest import poll
from tests.integration.controller.test_engine_store import manifest
from tests.integration.object_store.tap import HttpTap
from tests.integration.replicas.conftest import Cluster, Replica
from tests.object_store import SeaweedS3

PREFIX = "fleet"
MAX_UPLOAD = 4 * 1024**2


class S3Cluster(Cluster):
    """Replicas with a data directory each and one bucket."""

    def __init__(self, base: Cluster, s3_env: dict[str, str], store_args: list[str]) -> None:
        super().__init__(base.db_url, base.broker_url, base.tmp)
        self.s3_env = s3_env
        self.store_args = store_args

    def data_dir_of(self, index: int) -> Path:
        return self.data_dir if index == 0 else self.tmp / f"data-{index}"

    def own_args(self, index: int) -> list[str]:
        return ["--data-dir", str(self.data_dir_of(index)), *self.store_args]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in super()._env().items() if not k.startswith("AWS_")}
        return env | self.s3_env

    def start_apart(self, n: int) -> list[Replica]:
        """The first replica, then the others with a copy of its fleet signing key only."""
        started = self.start(1)
        for i in range(1, n):
            shutil.copytree(self.data_dir / KEYS_DIR, self.data_dir_of(i) / KEYS_DIR)
            started += self.start(1)
        return started


@pytest.fixture
def s3_cluster(cluster: Cluster, seaweedfs: SeaweedS3, s3_bucket: str) -> S3Cluster:
    store = ["--artifact-store", f"s3://{s3_bucket}/{PREFIX}", "--s3-addressing", "path"]
    c = S3Cluster(cluster, seaweedfs.env(), [*store, "--max-upload", "4M"])
    cluster.replicas = c.replicas  # the cluster fixture stops (and shows the logs of) them
    return c


@pytest.mark.slow
def test_two_replicas_without_a_shared_disk_serve_one_bucket(
    s3_cluster: S3Cluster, seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    a, b = s3_cluster.start_apart(2)
    with s3_cluster.api(a) as on_a, s3_cluster.api(b) as on_b:
        # a model pushed to A: in the bucket, analysed on A, downloadable from B with Range
        model = sample_models.classifier(seed=5)
        sha = hashlib.sha256(model).hexdigest()
        pushed = on_a.put("/api/v1/models/detector/versions/1.0.0", content=model)
        assert pushed.status_code == 201, pushed.text
        keys = seaweedfs.keys(s3_bucket)
        assert f"{PREFIX}/artifacts/{sha[:2]}/{sha}" in keys
        assert f"{PREFIX}/artifacts/references/{sha}.json" in keys
        poll(
            lambda: (
                on_b.get("/api/v1/models/detector/versions/1.0.0").json()["analysis_state"]
                == "done"
            ),
            60,
            "the analysis of the pushed model",
        )
        path = f"/api/v1/artifacts/{sha}"
        part = on_b.get(path, headers={"Range": "bytes=100-"})
        assert part.status_code == 206, part.text
        assert part.content == model[100:]
        assert part.headers["Content-Range"] == f"bytes 100-{len(model) - 1}/{len(model)}"
        whole = on_b.get(path)
        assert (whole.status_code, whole.content) == (200, model)
        head = on_b.head(path)
        assert head.headers["Content-Length"] == str(len(model))
        assert not (s3_cluster.data_dir_of(1) / "artifacts").exists(), "B keeps no artifact dir"

        # B checks an operator's reference outputs against the model: a verified local copy
        npz = reference_npz(model)
        ref = on_b.put("/api/v1/models/detector/versions/1.0.0/reference", content=npz)
        assert ref.status_code == 200, ref.text
        cached = s3_cluster.data_dir_of(1) / "artifact-cache" / sha[:2] / sha
        assert cached.read_bytes() == model
        npz_sha = ArtifactRef.model_validate(ref.json()).sha256
        assert on_a.get(f"/api/v1/artifacts/{npz_sha}").content == npz

        # an engine built and stored through A is pulled by a twin through B
        engine = os.urandom(300_000)
        m = manifest(engine)
        built = tmp_path / "engine.plan"
        built.write_bytes(engine)
        builder = StoreClient(a.url, token=s3_cluster.token)
        try:
            assert builder.upload(built, m.sha256).size == len(engine)
        finally:
            builder.close()
        put = on_a.put(f"/api/v1/engines/{m.engine_key}", json=m.model_dump(mode="json"))
        assert put.status_code == 201, put.text
        twin = StoreClient(b.url, token=s3_cluster.token)
        try:
            got = twin.get_manifest(m.engine_key, "15W+clocks")
            assert isinstance(got, EngineManifest)
            assert got.sha256 == m.sha256
            pulled = tmp_path / "pulled.plan"
            twin.download(got.sha256, got.size, pulled)
        finally:
            twin.close()
        assert pulled.read_bytes() == engine

        # the size bound holds on every replica, and a refused upload leaves nothing behind
        before = seaweedfs.keys(s3_bucket)
        big = on_b.post("/api/v1/artifacts", content=os.urandom(MAX_UPLOAD + 1))
        assert big.status_code == 413, big.text
        assert seaweedfs.keys(s3_bucket) == before

        # an agent resumes a download from B where its partial file ends
        state = tmp_path / "agent-state"
        partial = part_path(state, sha)
        partial.parent.mkdir(parents=True)
        partial.write_bytes(model[:1000])
        downloader = Downloader(state, base_url=b.url, token=s3_cluster.token)
        try:
            ref_model = ArtifactRef(url=path, sha256=sha, size=len(model))
            assert downloader.fetch(ref_model).read_bytes() == model
        finally:
            downloader.close()


def test_downloads_redirect_to_presigned_urls_and_resume_there(
    cluster: Cluster, seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    tap = HttpTap(("127.0.0.1", seaweedfs.port)).start()
    try:
        store = ["--artifact-store", f"s3://{s3_bucket}/{PREFIX}", "--s3-addressing", "path"]
        c = S3Cluster(cluster, seaweedfs.env(tap.url), [*store, "--artifact-redirect", "60"])
        cluster.replicas = c.replicas
        (replica,) = c.start(1)
        data = os.urandom(3 * 1024**2)
        sha = hashlib.sha256(data).hexdigest()
        with c.api(replica) as api:
            assert api.post("/api/v1/artifacts", content=data).status_code == 201
            path = f"/api/v1/artifacts/{sha}"
            sent = api.get(path)
            assert sent.status_code == 307, sent.text
            assert "X-Amz-Signature=" in sent.headers["Location"]
            assert sent.headers["Location"].startswith(f"{tap.url}/{s3_bucket}/{PREFIX}/")
            assert api.head(path).headers["Content-Length"] == str(len(data))
            assert (
                httpx.get(sent.headers["Location"], headers={"Range": "bytes=0-9"}).content
                == (data[:10])
            )

        # the agent follows the redirect; the connection breaks part-way; it resumes with Range
        state = tmp_path / "agent-state"
        ref = ArtifactRef(url=path, sha256=sha, size=len(data))
        tap.cut_after(b"X-Amz-Signature=", 1_000_000)
        downloader = Downloader(state, base_url=replica.url, token=c.token)
        try:
            with pytest.raises(DownloadError):
                downloader.fetch(ref)
            have = part_path(state, sha).stat().st_size
            assert 0 < have < len(data)
            assert downloader.fetch(ref).read_bytes() == data
        finally:
            downloader.close()
        presigned = [r.lower() for r in tap.requests_with(b"X-Amz-Signature=")]
        assert f"range: bytes={have}-".encode() in presigned[-1]
        assert not any(b"authorization:" in r for r in presigned), "the token stays home"

        # the engine store client follows it too, and checks the sha256
        twin = StoreClient(replica.url, token=c.token)
        try:
            twin.download(sha, len(data), tmp_path / "pulled")
        finally:
            twin.close()
        assert (tmp_path / "pulled").read_bytes() == data
    finally:
        tap.stop()
