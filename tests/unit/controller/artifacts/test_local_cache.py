"""The local cache of object-store artifacts: verified copies only, least recently used go first."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.artifacts.local_cache import LocalCache
from controller.errors import StorageError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sender(data: bytes) -> Callable[[Callable[[bytes], object]], None]:
    def fetch(write: Callable[[bytes], object]) -> None:
        for i in range(0, len(data), 7):
            write(data[i : i + 7])

    return fetch


def test_a_fetched_copy_is_verified_and_kept(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", 1000)
    data = b"model bytes" * 10
    assert cache.hit(sha(data)) is None
    path = cache.fill(sha(data), sender(data))
    assert path == tmp_path / "c" / sha(data)[:2] / sha(data)
    assert path.read_bytes() == data
    assert cache.hit(sha(data)) == path


def test_other_bytes_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", 1000)
    with pytest.raises(StorageError, match="altered outside the controller"):
        cache.fill(sha(b"expected"), sender(b"something else"))
    assert list((tmp_path / "c").rglob("*")) == []


def test_past_the_bound_the_least_recently_used_copies_go(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", 250)
    blobs = [bytes([i]) * 100 for i in range(3)]
    for i, blob in enumerate(blobs[:2]):
        cache.fill(sha(blob), sender(blob))
        os.utime(cache.path_of(sha(blob)), (time.time() - 100 + i, time.time() - 100 + i))
    assert cache.hit(sha(blobs[0])) is not None  # used now: the second is the oldest
    cache.fill(sha(blobs[2]), sender(blobs[2]))
    assert cache.hit(sha(blobs[1])) is None
    assert cache.hit(sha(blobs[0])) is not None
    assert cache.size() == 200


def test_a_copy_larger_than_the_bound_is_kept_alone(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", 50)
    small, big = b"s" * 10, b"b" * 80
    cache.fill(sha(small), sender(small))
    path = cache.fill(sha(big), sender(big))
    assert path.read_bytes() == big
    assert cache.hit(sha(small)) is None


def test_temporary_files_are_not_counted(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", 100)
    (tmp_path / "c" / ".upload-abc").write_bytes(b"x" * 500)
    assert cache.size() == 0


def test_the_bound_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="positive"):
        LocalCache(tmp_path, 0)
