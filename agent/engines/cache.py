"""The device's engine cache: content-addressed files under ``<state>/engines/``.

Layout: ``<key>.engine`` (the bytes) and ``<key>.json`` (a :class:`CacheRecord`: the fleet
manifest, where the engine came from, when it was last used). Files arrive atomically (a temporary
file in the same directory, fsync, rename, fsync of the directory), so a crash leaves an engine
either whole or absent. The cache is bounded by size: the least recently used engines go first,
but never a *pinned* one (the active and the rollback engine of every slot), and never the engine
just stored (it is about to be loaded). Before every load the bytes are hashed again; an engine
whose sha256 no longer matches is deleted and reported, and the resolver pulls or builds it anew.
Timing caches (TensorRT) live in ``timing/<validity digest>.cache``: they are device-specific.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agent.durable_files import fsync_dir, sha256_file, write_atomically
from shared.engine_keys import ValidityKey
from shared.engines import EngineManifest
from shared.names import check_engine_key, check_file_name, is_sha256

log = logging.getLogger(__name__)

CHUNK = 1 << 20
ENGINE_SUFFIX = ".engine"
RECORD_SUFFIX = ".json"

Origin = Literal["built", "pulled"]


class CacheRecord(BaseModel):
    """What the cache knows about one engine besides its bytes."""

    model_config = ConfigDict(extra="forbid")

    manifest: EngineManifest
    origin: Origin
    last_used: float


@dataclass(frozen=True)
class CacheHit:
    """A verified engine: its file and its manifest."""

    path: Path
    manifest: EngineManifest
    origin: Origin


class EngineCache:
    """One device's engines; thread-safe (slots may resolve while the daemon pins)."""

    def __init__(
        self,
        root: Path,
        max_bytes: int,
        on_corrupt: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._on_corrupt = on_corrupt
        self._clock = clock
        self._lock = threading.RLock()
        self._pins: dict[str, tuple[str | None, str | None]] = {}
        root.mkdir(parents=True, exist_ok=True)
        (root / "tmp").mkdir(exist_ok=True)
        (root / "timing").mkdir(exist_ok=True)

    # --- paths --------------------------------------------------------------------------------

    def engine_path(self, key: str) -> Path:
        """InvalidName (a ValueError) unless ``key`` is an engine key: never a path elsewhere."""
        return self.root / f"{check_engine_key(key)}{ENGINE_SUFFIX}"

    def record_path(self, key: str) -> Path:
        return self.root / f"{check_engine_key(key)}{RECORD_SUFFIX}"

    def scratch(self, name: str) -> Path:
        """A path on the cache's file system for a file that :meth:`put` will move into place."""
        return self.root / "tmp" / check_file_name(name)

    def timing_cache_path(self, validity: ValidityKey) -> Path:
        """Where the TensorRT timing cache of ``validity`` is kept (device-specific)."""
        return self.root / "timing" / f"{validity.digest()}.cache"

    # --- pins ---------------------------------------------------------------------------------

    def pin(self, slot: str, active: str | None, rollback: str | None = None) -> None:
        """Keep ``slot``'s active and rollback engines whatever the size bound says."""
        with self._lock:
            self._pins[slot] = (active, rollback)

    def unpin(self, slot: str) -> None:
        with self._lock:
            self._pins.pop(slot, None)

    def pinned(self) -> set[str]:
        with self._lock:
            return {key for pair in self._pins.values() for key in pair if key is not None}

    # --- entries ------------------------------------------------------------------------------

    def _record(self, key: str) -> CacheRecord | None:
        try:
            return CacheRecord.model_validate_json(self.record_path(key).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            log.warning("engine cache record %s unreadable (%s); dropping it", key, exc)
            return None

    def keys(self) -> list[str]:
        """Keys of every engine with both a file and a readable record."""
        names = (p.name.removesuffix(ENGINE_SUFFIX) for p in self.root.glob(f"*{ENGINE_SUFFIX}"))
        return sorted(key for key in names if is_sha256(key) and self.record_path(key).is_file())

    def remove(self, key: str) -> None:
        with self._lock:
            for path in (self.record_path(key), self.engine_path(key)):
                path.unlink(missing_ok=True)

    def get(self, key: str) -> CacheHit | None:
        """The engine ``key`` after a sha256 check; None when absent or corrupt (then deleted)."""
        with self._lock:
            record = self._record(key)
            path = self.engine_path(key)
            if record is None or not path.is_file():
                if record is not None or path.exists():
                    self.remove(key)
                return None
            size, sha = sha256_file(path)
            manifest = record.manifest
            if (size, sha) != (manifest.size, manifest.sha256):
                reason = (
                    f"cached engine {key[:12]} is corrupt (sha256 {sha[:12]}, size {size}; "
                    f"expected {manifest.sha256[:12]}, {manifest.size}); removed it"
                )
                log.warning("%s", reason)
                self.remove(key)
                if self._on_corrupt is not None:
                    self._on_corrupt(key, reason)
                return None
            touched = record.model_copy(update={"last_used": self._clock()})
            write_atomically(self.record_path(key), touched.model_dump_json().encode())
            return CacheHit(path=path, manifest=manifest, origin=record.origin)

    def put(self, source: Path, manifest: EngineManifest, origin: Origin) -> CacheHit:
        """Move ``source`` (a file on this file system) into the cache as ``manifest``'s engine.

        The caller has checked the bytes against ``manifest``; they are fsynced and renamed, then
        the record is written, then the cache is trimmed to its bound.
        """
        key = manifest.engine_key
        with self._lock:
            with source.open("rb+") as f:
                os.fsync(f.fileno())
            final = self.engine_path(key)
            try:
                os.replace(source, final)
            except OSError:
                shutil.copyfile(source, final)
                source.unlink(missing_ok=True)
            fsync_dir(self.root)
            record = CacheRecord(manifest=manifest, origin=origin, last_used=self._clock())
            write_atomically(self.record_path(key), record.model_dump_json().encode())
            self.evict(keep={key})
            return CacheHit(path=final, manifest=manifest, origin=origin)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.glob(f"*{ENGINE_SUFFIX}"))

    def evict(self, keep: set[str] | None = None) -> list[str]:
        """Delete least recently used, unpinned engines until the cache fits; the keys deleted."""
        with self._lock:
            protected = self.pinned() | (keep or set())
            entries: list[tuple[float, str, int]] = []
            total = 0
            for key in self.keys():
                size = self.engine_path(key).stat().st_size
                total += size
                record = self._record(key)
                if key not in protected:
                    entries.append((record.last_used if record else 0.0, key, size))
            evicted: list[str] = []
            for _, key, size in sorted(entries):
                if total <= self.max_bytes:
                    break
                self.remove(key)
                total -= size
                evicted.append(key)
                log.info("engine cache over %d bytes: evicted %s", self.max_bytes, key[:12])
            return evicted
