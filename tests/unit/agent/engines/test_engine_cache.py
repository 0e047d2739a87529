"""The engine cache: atomic puts, integrity before load, LRU eviction that spares pinned keys."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.engines.cache import ENGINE_SUFFIX, EngineCache
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey
from shared.engines import EngineManifest


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def manifest(key_char: str, data: bytes) -> EngineManifest:
    return EngineManifest(
        engine_key=key_char * 64,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        validity=ValidityKey(runtime="onnxruntime", runtime_version="1", platform="linux-x"),
        content=ContentKey.of("0" * 64, DelegateConfig()),
        tuning=TuningTag(),
        built_by="gw",
        build_seconds=0.1,
        created_at=datetime.now(timezone.utc),
    )


def put(cache: EngineCache, key_char: str, data: bytes) -> None:
    scratch = cache.scratch(f"{key_char}.tmp")
    scratch.write_bytes(data)
    cache.put(scratch, manifest(key_char, data), origin="built")


def test_put_then_get_returns_the_verified_engine(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path / "engines", max_bytes=1 << 20)
    put(cache, "a", b"engine-a")
    hit = cache.get("a" * 64)
    assert hit is not None
    assert hit.path.read_bytes() == b"engine-a"
    assert hit.origin == "built"
    assert list((tmp_path / "engines" / "tmp").iterdir()) == []
    assert cache.get("b" * 64) is None


def test_corrupt_engine_is_removed_and_reported(tmp_path: Path) -> None:
    reports: list[tuple[str, str]] = []
    cache = EngineCache(tmp_path, max_bytes=1 << 20, on_corrupt=lambda k, r: reports.append((k, r)))
    put(cache, "a", b"engine-a")
    cache.engine_path("a" * 64).write_bytes(b"engine-b")
    assert cache.get("a" * 64) is None
    assert not cache.engine_path("a" * 64).exists()
    assert not cache.record_path("a" * 64).exists()
    ((key, reason),) = reports
    assert key == "a" * 64
    assert "is corrupt" in reason


def test_lru_eviction_never_evicts_pinned_engines(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path, max_bytes=25, clock=Clock())
    put(cache, "a", b"x" * 10)
    put(cache, "b", b"y" * 10)
    cache.pin("detector", active="a" * 64, rollback="b" * 64)
    put(cache, "c", b"z" * 10)
    assert cache.keys() == ["a" * 64, "b" * 64, "c" * 64]
    cache.pin("detector", active="c" * 64, rollback="b" * 64)
    put(cache, "d", b"w" * 10)
    assert cache.keys() == ["b" * 64, "c" * 64, "d" * 64]


def test_least_recently_used_goes_first(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path, max_bytes=25, clock=Clock())
    put(cache, "a", b"x" * 10)
    put(cache, "b", b"y" * 10)
    assert cache.get("a" * 64) is not None
    put(cache, "c", b"z" * 10)
    assert cache.keys() == ["a" * 64, "c" * 64]


@pytest.mark.parametrize(
    "key", ["../" + "a" * 61, "/etc/passwd", "a" * 63 + "\n", "A" * 64, "a" * 63 + "\x00"]
)
def test_a_hostile_engine_key_never_becomes_a_path(tmp_path: Path, key: str) -> None:
    cache = EngineCache(tmp_path / "engines", max_bytes=1 << 20)
    with pytest.raises(ValueError, match="engine key"):
        cache.engine_path(key)
    with pytest.raises(ValueError, match="engine key"):
        cache.record_path(key)
    assert not [p for p in (tmp_path / "engines").rglob("*") if p.is_file()]


def test_stray_files_in_the_cache_directory_are_not_listed_as_engines(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path / "engines", max_bytes=1 << 20)
    cache.root.mkdir(parents=True, exist_ok=True)
    (cache.root / f"notes{ENGINE_SUFFIX}").write_bytes(b"x")
    assert cache.keys() == []
