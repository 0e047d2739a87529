"""The artifact store over the S3 backend, against a real SeaweedFS: uploads, ranges, parts,
partial uploads that never show, the size bound, verified local copies, start-up errors."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from controller.artifacts import s3
from controller.artifacts.s3 import S3Backend
from controller.artifacts.store import ArtifactStore, UploadTooLarge
from controller.errors import NotFound, StorageError
from controller.settings import ObjectStoreSettings
from tests.object_store import SeaweedS3

PREFIX = "fleet-a"


def settings(bucket: str, seaweedfs: SeaweedS3, **changes: object) -> ObjectStoreSettings:
    values: dict[str, object] = {
        "bucket": bucket,
        "prefix": PREFIX,
        "endpoint_url": seaweedfs.endpoint,
        "addressing": "path",
    }
    return ObjectStoreSettings(**(values | changes))  # type: ignore[arg-type]


def s3_store(data_dir: Path, backend: S3Backend, **kwargs: int) -> ArtifactStore:
    return ArtifactStore(data_dir, backend=backend, **kwargs)  # type: ignore[arg-type]


def upload(store: ArtifactStore, data: bytes, chunk: int = 1 << 20) -> str:
    pending = store.begin()
    try:
        for i in range(0, len(data), chunk):
            pending.write(data[i : i + chunk])
        return pending.commit().sha256
    except BaseException:
        pending.abort()
        raise


def key_of(sha: str) -> str:
    return f"{PREFIX}/artifacts/{sha[:2]}/{sha}"


def test_an_upload_is_stored_under_its_sha256_and_read_back_in_ranges(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    store = s3_store(tmp_path / "a", S3Backend(settings(s3_bucket, seaweedfs)))
    data = os.urandom(300_000)
    sha = upload(store, data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert seaweedfs.keys(s3_bucket) == [key_of(sha)]
    assert upload(store, data) == sha  # the same bytes again: stored once
    assert seaweedfs.keys(s3_bucket) == [key_of(sha)]

    # another replica, with nothing on its disk, reads it from the bucket
    other = s3_store(tmp_path / "b", S3Backend(settings(s3_bucket, seaweedfs)))
    assert other.get(sha).size == len(data)
    assert other.contains(sha)
    assert b"".join(other.open_range(sha, 0, len(data) - 1)) == data
    assert b"".join(other.open_range(sha, 1000, 1999)) == data[1000:2000]
    assert b"".join(other.open_range(sha, len(data) - 10, len(data) - 1)) == data[-10:]
    assert not other.contains("0" * 64)
    with pytest.raises(NotFound):
        other.get("0" * 64)
    with pytest.raises(NotFound):
        other.open_range("0" * 64, 0, 9)
    assert list((tmp_path / "b" / "artifact-cache").iterdir()) == [], "nothing copied yet"


def test_a_large_upload_goes_in_parts_and_ranges_cross_them(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "PART_BYTES", 5 * 1024**2)  # S3's smallest part
    backend = S3Backend(settings(s3_bucket, seaweedfs))
    parts: list[int] = []
    monkeypatch.setattr(backend, "before_part", parts.append)
    data = os.urandom(12 * 1024**2)
    sha = upload(s3_store(tmp_path / "a", backend), data)
    assert parts == [1, 2, 3]
    other = s3_store(tmp_path / "b", S3Backend(settings(s3_bucket, seaweedfs)))
    boundary = 5 * 1024**2
    got = b"".join(other.open_range(sha, boundary - 100, boundary + 99))
    assert got == data[boundary - 100 : boundary + 100]
    assert other.local_path(sha).read_bytes() == data


def test_a_partial_upload_is_never_visible(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "PART_BYTES", 5 * 1024**2)
    backend = S3Backend(settings(s3_bucket, seaweedfs))
    store = s3_store(tmp_path / "a", backend)
    data = os.urandom(11 * 1024**2)
    sha = hashlib.sha256(data).hexdigest()

    # an upload that stops while streaming in (the client went away) leaves nothing
    pending = store.begin()
    pending.write(data[:1_000_000])
    pending.abort()

    # a multipart upload cut after its first part is aborted: no object, no parts left
    def cut(number: int) -> None:
        if number == 2:
            raise ConnectionResetError("injected: the connection to S3 broke after part 1")

    monkeypatch.setattr(backend, "before_part", cut)
    with pytest.raises(ConnectionResetError):
        upload(store, data)
    assert seaweedfs.keys(s3_bucket) == []
    client = seaweedfs.client()
    assert client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []
    other = s3_store(tmp_path / "b", S3Backend(settings(s3_bucket, seaweedfs)))
    assert not other.contains(sha)
    with pytest.raises(NotFound):
        other.local_path(sha)
    leftovers = [p.name for p in (tmp_path / "a" / "artifact-cache").rglob("*")]
    assert leftovers == [], "no temporary file stays behind"

    # the same upload, not cut, is complete once visible
    monkeypatch.setattr(backend, "before_part", lambda number: None)
    assert upload(store, data) == sha
    assert b"".join(other.open_range(sha, 0, len(data) - 1)) == data


def test_the_size_bound_refuses_the_upload_and_stores_nothing(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    store = s3_store(
        tmp_path / "a", S3Backend(settings(s3_bucket, seaweedfs)), max_upload_bytes=100_000
    )
    with pytest.raises(UploadTooLarge, match="limit of 100000 bytes"):
        upload(store, os.urandom(150_000), chunk=10_000)
    assert seaweedfs.keys(s3_bucket) == []
    assert list((tmp_path / "a" / "artifact-cache").iterdir()) == []


def test_readers_that_need_a_file_get_a_verified_bounded_local_copy(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    writer = s3_store(tmp_path / "a", S3Backend(settings(s3_bucket, seaweedfs)))
    blobs = [os.urandom(40_000) for _ in range(3)]
    shas = [upload(writer, b) for b in blobs]

    reader = s3_store(
        tmp_path / "b", S3Backend(settings(s3_bucket, seaweedfs)), cache_bytes=100_000
    )
    cache = tmp_path / "b" / "artifact-cache"
    for sha, blob in zip(shas, blobs, strict=True):
        path = reader.local_path(sha)
        assert path.parent.parent == cache
        assert path.read_bytes() == blob
    # 3 x 40 kB past a 100 kB bound: the least recently used copy went
    assert sorted(p.name for p in cache.glob("*/*")) == sorted(shas[1:])
    assert reader.local_path(shas[0]).read_bytes() == blobs[0]  # fetched again
    # served from the local copy when there is one, from the bucket otherwise
    assert b"".join(reader.open_range(shas[1], 5, 9)) == blobs[1][5:10]

    # bytes altered in the bucket behind the controller's back are refused, never cached
    tampered = os.urandom(1000)
    victim = upload(writer, os.urandom(1000))
    seaweedfs.client().put_object(Bucket=s3_bucket, Key=key_of(victim), Body=tampered)
    fresh = s3_store(tmp_path / "c", S3Backend(settings(s3_bucket, seaweedfs)))
    with pytest.raises(StorageError, match="altered outside the controller"):
        fresh.local_path(victim)
    assert list((tmp_path / "c" / "artifact-cache").rglob("*")) == []


def test_reference_documents_live_in_the_bucket(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    a = s3_store(tmp_path / "a", S3Backend(settings(s3_bucket, seaweedfs)))
    b = s3_store(tmp_path / "b", S3Backend(settings(s3_bucket, seaweedfs)))
    name = f"references/{'a' * 64}.json"
    assert b.read_document(name) is None
    a.write_document(name, b'{"sha256": "x"}')
    assert b.read_document(name) == b'{"sha256": "x"}'
    a.write_document(name, b'{"sha256": "y"}')
    assert b.read_document(name) == b'{"sha256": "y"}'
    assert f"{PREFIX}/artifacts/{name}" in seaweedfs.keys(s3_bucket)


def test_the_start_up_check_names_what_to_fix(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    S3Backend(settings(s3_bucket, seaweedfs)).check()

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(StorageError, match="refused the credentials") as wrong:
        S3Backend(settings(s3_bucket, seaweedfs)).check()
    assert "AWS_SECRET_ACCESS_KEY" in str(wrong.value)
    assert "\n" not in str(wrong.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.env()["AWS_SECRET_ACCESS_KEY"])

    with pytest.raises(StorageError, match="there is no bucket 'jf-no-such-bucket'"):
        S3Backend(settings("jf-no-such-bucket", seaweedfs)).check()

    closed = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(StorageError, match=r"cannot reach .* check --s3-endpoint"):
        S3Backend(settings(s3_bucket, seaweedfs, endpoint_url=closed)).check()

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StorageError, match=r"no credentials .* set AWS_ACCESS_KEY_ID"):
        S3Backend(settings(s3_bucket, seaweedfs)).check()


def _closed_port() -> int:
    from tests.ports import free_port

    return free_port()
