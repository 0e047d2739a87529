"""Upload size bounds: the store refuses the write that crosses the bound and leaves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.artifacts.store import ArtifactStore, UploadTooLarge, check_upload_size
from controller.cli.serve_settings import parse_size
from controller.errors import InvalidInput
from controller.settings import DEFAULT_MAX_MQTT_PAYLOAD_BYTES, DEFAULT_MAX_UPLOAD_BYTES


def test_the_write_that_crosses_the_bound_is_refused_and_abort_leaves_nothing(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path, max_upload_bytes=10)
    pending = store.begin()
    pending.write(b"12345")
    pending.write(b"67890")
    with pytest.raises(UploadTooLarge, match="limit of 10 bytes"):
        pending.write(b"x")
    assert pending.size == 10
    pending.abort()
    assert list(store.root.iterdir()) == []


def test_an_upload_of_exactly_the_bound_is_stored(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, max_upload_bytes=4)
    pending = store.begin()
    pending.write(b"abcd")
    stored = pending.commit()
    assert stored.size == 4
    assert store.local_path(stored.sha256).read_bytes() == b"abcd"
    assert (
        store.local_path(stored.sha256)
        == tmp_path / "artifacts" / stored.sha256[:2] / stored.sha256
    )


def test_bounds_must_be_positive_and_sizes_are_checked_inclusively(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        ArtifactStore(tmp_path, max_upload_bytes=0)
    check_upload_size(100, 100)
    with pytest.raises(UploadTooLarge):
        check_upload_size(101, 100)


def test_serve_size_options_take_binary_units() -> None:
    assert parse_size("2G") == DEFAULT_MAX_UPLOAD_BYTES
    assert parse_size("1M") == DEFAULT_MAX_MQTT_PAYLOAD_BYTES
    assert parse_size("64KiB") == parse_size("64k") == 65536
    assert parse_size("512") == parse_size("512B") == 512
    for bad in ("", "0", "-1", "1.5G", "2X", "lots"):
        with pytest.raises(ValueError, match="expected a positive size"):
            parse_size(bad)
