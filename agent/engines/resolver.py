"""Engine resolution on a device: local cache → controller store → build under a lease → upload.

``resolve`` answers the engine file for one slot and where it came from (``cached``, ``pulled``,
``built``). When twins need the same engine at once, only the one granted the store's build
lease builds; the others poll the store for the manifest with a growing delay and pull it, or,
once the lease is free again (its holder died, or uploaded a build they may not pull), take it
and build. The builder renews its lease
while it builds, so a long build is not mistaken for a dead one. Without a store (no controller
URL, or the controller unreachable) the device builds on its own and keeps the engine locally.

A pulled engine goes through ``verify(manifest, key)`` (the agent's signature check) before it
enters the cache; a refusal deletes its bytes and propagates.

The store keeps one manifest per (engine key, tuning tag), the tag being ``TuningTag.label()``
(power mode and clocks). The device asks for its own tag first; a manifest of another tuning is
still used (it is valid) unless ``retune`` is asked: then the device takes the build lease of
(key, its tag), builds under its own conditions and uploads, and its twins in that power mode
wait for that build and pull it. (Controller and agents ship together: this needs a store with
the per-tuning API.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from agent.durable_files import sha256_file
from agent.engines.build_failures import known_failure, remembered, report_failure
from agent.engines.build_protocol import BuildRequest
from agent.engines.build_runner import BUILDERS, BuildFailed, BuildOutcome, run_build
from agent.engines.cache import CacheHit, EngineCache
from agent.engines.identity import EngineIdentity, tuning_matches
from agent.engines.lease_keeper import LeaseKeeper
from agent.engines.store_client import StoreClient, StoreConflict, StoreUnavailable
from agent.errors import AgentError
from agent.hardware.runtime_kinds import runtime_kind
from shared.delegate import DelegateConfig
from shared.engines import EngineManifest, LeaseOut

log = logging.getLogger(__name__)

Source = Literal["cached", "pulled", "built"]
Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: publishes an Event (the daemon's ``_event``)."""

POLL_MIN_S = 0.2
POLL_MAX_S = 5.0
PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True)
class Resolved:
    """The engine a slot will load, and how this device got it."""

    path: Path
    manifest: EngineManifest
    source: Source
    tuning_matches: bool

    @property
    def key(self) -> str:
        return self.manifest.engine_key


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _no_event(kind: str, slot: str | None, message: str, **data: Any) -> None:
    log.info("%s %s: %s %s", kind, slot, message, data)


class EngineResolver:
    """Resolves engines for one device; one instance per agent."""

    def __init__(
        self,
        cache: EngineCache,
        store: StoreClient | None,
        device_id: str,
        *,
        build_timeout_s: float = 3600.0,
        lease_ttl_s: float = 900.0,
        emit: Emit = _no_event,
        builders: Mapping[str, str] = BUILDERS,
        dla_cores: int | None = None,
        cancelled: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], datetime] = _utcnow,
        verify: Callable[[EngineManifest, str], None] | None = None,
    ) -> None:
        self.cache = cache
        self._store = store
        self._device_id = device_id
        self._build_timeout_s = build_timeout_s
        self._lease_ttl_s = lease_ttl_s
        self._emit = emit
        self._builders = builders
        self._dla_cores = dla_cores
        self._cancelled = cancelled
        self._sleep = sleep
        self._wall = wall_clock
        self._verify = verify

    def _resolved(self, hit: CacheHit, source: Source, identity: EngineIdentity) -> Resolved:
        return Resolved(
            path=hit.path,
            manifest=hit.manifest,
            source=source,
            tuning_matches=tuning_matches(hit.manifest.tuning, identity.tuning),
        )

    def resolve(
        self,
        slot: str,
        onnx_path: Path,
        identity: EngineIdentity,
        config: DelegateConfig,
        on_building: Callable[[], None] | None = None,
        retune: bool = False,
        calibration_inputs: Path | None = None,
    ) -> Resolved:
        """The engine of ``identity`` for ``slot``; BuildFailed (or a store error) when none.
        ``calibration_inputs``: the NPZ of sample inputs a build calibrates INT8 from
        (:mod:`agent.engines.sample_calibration`; its sha256 is in ``identity``'s key)."""
        build = (slot, onnx_path, identity, config, on_building, calibration_inputs)
        key, tag = identity.key, identity.tuning.label()
        hit = self.cache.get(key)
        if hit is not None and not (
            retune and not tuning_matches(hit.manifest.tuning, identity.tuning)
        ):
            return self._resolved(hit, "cached", identity)
        store = self._store
        while store is not None:
            try:
                manifest = store.get_manifest(key, tag)
                if manifest is not None and not (
                    retune and not tuning_matches(manifest.tuning, identity.tuning)
                ):
                    return self._pull(store, manifest, identity)
                self._refuse_known_failure(store, identity)
                lease = store.lease(key, self._device_id, self._lease_ttl_s, tag)
            except StoreUnavailable as exc:
                log.warning("engine store unavailable, building %s here: %s", key[:12], exc)
                break
            if lease.granted:
                return self._build(*build, store)
            log.info(
                "engine %s (%s) is being built by %s until %s; waiting to pull it",
                key[:12],
                tag,
                lease.holder,
                lease.expires_at.isoformat(),
            )
            pulled = self._wait_for(store, lease, identity)
            if pulled is not None:
                return pulled
        return self._build(*build, None)

    # --- store --------------------------------------------------------------------------------

    def _pull(
        self, store: StoreClient, manifest: EngineManifest, identity: EngineIdentity
    ) -> Resolved:
        scratch = self.cache.scratch(f"{manifest.engine_key}.pull")
        store.download(manifest.sha256, manifest.size, scratch)
        if self._verify is not None:
            try:
                self._verify(manifest, identity.key)
            except AgentError:
                scratch.unlink(missing_ok=True)
                raise
        hit = self.cache.put(scratch, manifest, origin="pulled")
        log.info("pulled engine %s built by %s", manifest.engine_key[:12], manifest.built_by)
        return self._resolved(hit, "pulled", identity)

    def _wait_for(
        self, store: StoreClient, lease: LeaseOut, identity: EngineIdentity
    ) -> Resolved | None:
        """Poll for the manifest of the lease's tuning until it appears (pull), or until the
        lease is this device's to take (None: build here).

        The lease is asked for again at every poll, not only once it expired: the builder
        releases it when it uploads, and a build this device may not pull (its class shares
        device builds only after an operator approved them) is then answered 404, so waiting
        for the expiry would idle for up to the lease's lifetime (15 minutes) before building.
        """
        delay = POLL_MIN_S
        while not self._cancelled():
            manifest = store.get_manifest(lease.engine_key, lease.tuning)
            if manifest is not None and manifest.tuning.label() == lease.tuning:
                return self._pull(store, manifest, identity)
            again = store.lease(lease.engine_key, self._device_id, self._lease_ttl_s, lease.tuning)
            self._refuse_known_failure(store, identity)  # the builder's build failed meanwhile
            if again.granted:
                log.info(
                    "build lease of %s on %s released or expired, and no engine this device may "
                    "pull was stored: building here",
                    lease.holder,
                    lease.engine_key[:12],
                )
                return None
            lease = again
            left = (lease.expires_at - self._wall()).total_seconds()
            self._sleep(min(delay, max(left, POLL_MIN_S)))
            delay = min(delay * 1.5, POLL_MAX_S)
        raise BuildFailed("waiting for another device's build cancelled: the agent is stopping", [])

    def _refuse_known_failure(self, store: StoreClient, identity: EngineIdentity) -> None:
        """BuildFailed at once when a twin's TensorRT build of this engine failed for reasons
        of the model (:mod:`agent.engines.build_failures`): the slot falls back, builds nothing."""
        if identity.runtime != "tensorrt":
            return
        known = known_failure(store, identity.key)
        if known is not None:
            raise BuildFailed(
                f"TensorRT could not build engine {identity.key[:12]} on {known.device_id} "
                f"({known.failed_at:%Y-%m-%d %H:%M} UTC), not built again here",
                [known.reason],
            )

    # --- build --------------------------------------------------------------------------------

    def _build(
        self,
        slot: str,
        onnx_path: Path,
        identity: EngineIdentity,
        config: DelegateConfig,
        on_building: Callable[[], None] | None,
        calibration_inputs: Path | None,
        store: StoreClient | None,
    ) -> Resolved:
        key, tag = identity.key, identity.tuning.label()
        if on_building is not None:
            on_building()
        keeper = LeaseKeeper(store, key, tag, self._device_id, self._lease_ttl_s) if store else None
        try:
            outcome = self._run_builder(slot, onnx_path, identity, config, calibration_inputs)
        except BuildFailed as exc:
            if store is not None and identity.runtime == "tensorrt" and remembered(exc):
                report_failure(store, self._device_id, identity, exc)  # before the lease goes
            if keeper is not None:
                keeper.stop()
                self._release(store, key, tag)
            raise
        if keeper is not None:
            keeper.stop()
        size, sha = sha256_file(outcome.output)
        manifest = EngineManifest(
            engine_key=key,
            sha256=sha,
            size=size,
            validity=identity.validity,
            content=identity.content,
            tuning=identity.tuning,
            built_by=self._device_id,
            build_seconds=round(outcome.seconds, 3),
            created_at=self._wall(),
        )
        hit = self.cache.put(outcome.output, manifest, origin="built")
        self._emit(
            "build_done",
            slot,
            f"built {identity.runtime} engine {key[:12]} in {outcome.seconds:.1f} s",
            engine_key=key,
            runtime=identity.runtime,
            seconds=round(outcome.seconds, 3),
            peak_rss_mib=round(outcome.peak_rss_bytes / (1024 * 1024), 1),
        )
        if store is not None:
            self._upload(store, hit, manifest)
        return self._resolved(hit, "built", identity)

    def _run_builder(
        self,
        slot: str,
        onnx_path: Path,
        identity: EngineIdentity,
        config: DelegateConfig,
        calibration_inputs: Path | None = None,
    ) -> BuildOutcome:
        key = identity.key
        calibration = (
            self.calibration_cache(config.calibration_cache_sha256)
            if config.calibration_cache_sha256 and runtime_kind(identity.runtime).calibration_caches
            else None
        )
        request = BuildRequest(
            onnx_path=onnx_path,
            output_path=self.cache.scratch(f"{key}.build"),
            config=config,
            timing_cache_path=self.cache.timing_cache_path(identity.validity)
            if config.timing_cache
            else None,
            calibration_cache_path=calibration,
            calibration_inputs_path=calibration_inputs,
            dla_cores=self._dla_cores,
        )
        self._emit(
            "build_started",
            slot,
            f"building {identity.runtime} engine {key[:12]}{config.profile_note()}"
            + (", calibrating INT8 from the version's sample inputs" if calibration_inputs else ""),
            engine_key=key,
            runtime=identity.runtime,
        )
        last = [0.0, -100.0]
        started = time.monotonic()

        def progress(percent: float, message: str) -> None:
            now = time.monotonic()
            if percent < 100 and now - last[0] < PROGRESS_EVERY_S and percent - last[1] < 10:
                return
            last[:] = [now, percent]
            self._emit("build_progress", slot, message, engine_key=key, percent=round(percent, 1))

        try:
            return run_build(
                self._builders[identity.runtime],
                request,
                config.build_timeout_s or self._build_timeout_s,  # the config's bound first
                on_progress=progress,
                cancelled=self._cancelled,
            )
        except BuildFailed as exc:
            self._emit(
                "build_failed",
                slot,
                str(exc),
                engine_key=key,
                runtime=identity.runtime,
                error_lines=exc.lines,
                seconds=round(time.monotonic() - started, 3),  # a failed build's cost too
            )
            raise

    def calibration_cache(self, sha256: str) -> Path:
        """The INT8 calibration cache a delegate config names, fetched from the controller's
        artifact store once and kept (sha256-checked) beside the engine cache."""
        path = self.cache.scratch(f"calibration-{sha256}.cache")
        if path.exists() and sha256_file(path)[1] == sha256:
            return path
        if self._store is None:
            raise BuildFailed(
                f"INT8 calibration cache {sha256[:12]} is needed for this build but the agent "
                "has no controller URL to fetch it from (set controller_url)",
                [],
            )
        self._store.download(sha256, None, path)
        return path

    def _upload(self, store: StoreClient, hit: CacheHit, manifest: EngineManifest) -> None:
        try:
            store.upload(hit.path, manifest.sha256)
            store.put_manifest(manifest)
        except StoreConflict as exc:
            log.warning("kept engine %s locally: %s", manifest.engine_key[:12], exc)
            self._release(store, manifest.engine_key, manifest.tuning.label())
        except AgentError as exc:
            log.warning("could not share engine %s: %s", manifest.engine_key[:12], exc)
            self._release(store, manifest.engine_key, manifest.tuning.label())

    def _release(self, store: StoreClient | None, key: str, tuning: str) -> None:
        if store is None:
            return
        try:
            store.release(key, self._device_id, tuning)
        except AgentError as exc:
            log.warning("could not release the build lease on %s: %s", key[:12], exc)
