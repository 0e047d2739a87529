"""The agent's artifact checks: signed manifests, rollback authorisations, key rotations.

The daemon calls :meth:`ArtifactVerifier.check_model` before it downloads and again before it
builds, validates or swaps a model, and the engine resolver calls :meth:`check_engine` on an
engine pulled from the fleet store before it enters the cache. A refusal raises
:class:`ArtifactRefused` (permanent until the desired state changes): the slot fails with the
reason, an ``artifact_refused`` event carries it, and what served before keeps serving.
Decisions are :mod:`shared.trust_policy`'s; signatures are checked by :mod:`agent.trust.signatures`.

The daemon calls :meth:`ArtifactVerifier.check_document` on every desired document before it
applies or keeps it (from the broker, and ``desired.json`` at start): a refused one is not
applied nor written, one warning per generation is logged and a ``desired_refused`` event sent.

An agent without a pinned fleet key (never enrolled: development set-ups, most tests) checks
nothing: it accepts unsigned desired documents and logs one warning per model version (and per
engine) that it installs unverified.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from agent.errors import PermanentError
from agent.trust import signatures
from agent.trust.store import TrustStore
from shared.agent_releases import AGENT_ARTIFACT_NAME, AgentReleaseArtifact
from shared.engines import EngineManifest
from shared.jobs import JobArtifact
from shared.manifests import ENGINE_VERSION, SignedManifest
from shared.messages import DesiredState, ModelSlot
from shared.trust_policy import (
    DocumentRefusal,
    Expected,
    Installed,
    PinnedKeys,
    Refusal,
    RollbackEvidence,
    SignatureVerdict,
    SignedDocument,
    Verifier,
    check_document,
    check_manifest,
    follow_endorsements,
)

log = logging.getLogger(__name__)

Emit = Callable[..., None]
"""``emit(kind, slot, message, **data)``: publishes an Event (the daemon's ``_event``)."""


class ArtifactRefused(PermanentError):
    """The artifact's signed manifest does not allow installing it; ``reason`` is the code."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"refused: {refusal.message}")
        self.reason = refusal.reason.value


_MAX_REMEMBERED = 1024
"""Refused generations remembered (one warning each); forgotten all at once past this."""


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _log_only(kind: str, slot: str | None, message: str, **data: Any) -> None:
    log.info("%s %s: %s %s", kind, slot, message, data)


class ArtifactVerifier:
    """Checks artifacts against the pinned fleet key; records what was installed."""

    def __init__(
        self,
        trust: TrustStore,
        device_id: str,
        emit: Emit = _log_only,
        clock: Callable[[], datetime] = _utcnow,
        verify: Verifier = signatures.verify,
    ) -> None:
        self.trust = trust
        self._device_id = device_id
        self._emit = emit
        self._clock = clock
        self._verify = verify
        self._warned: set[str] = set()
        self._refused_links: set[tuple[str, str]] = set()
        self._refused_generations: set[int] = set()

    def check_document(
        self, desired: DesiredState, last_accepted: int, source: str = "broker"
    ) -> DocumentRefusal | None:
        """The refusal of ``desired`` (None: apply it); a refusal is logged and sent once per
        generation. ``last_accepted``: the generation accepted last (-1: none); ``source``:
        where the document came from (``broker``, or the kept file), for the event."""
        active = self.trust.active_key()
        keys = (
            None
            if active is None
            else PinnedKeys(active.key_id, active.public_key, self.trust.known_key_ids())
        )
        refusal = check_document(
            SignedDocument(
                desired.generation, desired.signature, desired.signing_payload(), desired.fleet_keys
            ),
            keys,
            last_accepted,
            self._verify,
        )
        if refusal is None or desired.generation in self._refused_generations:
            return refusal
        if len(self._refused_generations) >= _MAX_REMEMBERED:
            self._refused_generations.clear()
        self._refused_generations.add(desired.generation)
        log.warning("refused the desired document from %s: %s", source, refusal.message)
        self._emit(
            "desired_refused",
            None,
            refusal.message,
            reason=refusal.reason.value,
            generation=desired.generation,
            key_id=desired.signature.key_id if desired.signature is not None else None,
            source=source,
        )
        return refusal

    def follow_rotation(self, desired: DesiredState) -> None:
        """Adopt the rotations in ``desired`` that the active key (transitively) endorses."""
        active = self.trust.active_key()
        if active is None or not desired.fleet_keys:
            return
        outcome = follow_endorsements(
            active.key_id,
            active.public_key,
            self.trust.known_key_ids(),
            desired.fleet_keys,
            self._verify,
        )
        for endorsement in outcome.adopted:
            self.trust.adopt(endorsement)
            self._emit(
                "key_rotated",
                None,
                f"fleet key {endorsement.key_id} replaces {endorsement.endorsed_by}",
                key_id=endorsement.key_id,
                endorsed_by=endorsement.endorsed_by,
            )
        for endorsement, why in outcome.refused:
            link = (endorsement.key_id, endorsement.endorsed_by)
            if link in self._refused_links:
                continue
            self._refused_links.add(link)
            message = f"refused fleet key {endorsement.key_id}: {why}"
            log.warning("%s", message)
            self._emit(
                "key_refused",
                None,
                message,
                key_id=endorsement.key_id,
                endorsed_by=endorsement.endorsed_by,
                reason=why,
            )

    def check_model(self, slot: ModelSlot, desired: DesiredState) -> None:
        """:class:`ArtifactRefused` unless ``slot``'s artifact may be installed now."""
        if not self._pinned(f"model {slot.name} {slot.version}"):
            return
        rollback = slot.rollback
        self._check(
            slot.artifact.signed,
            Expected("model", slot.name, slot.version, slot.artifact.sha256, slot.artifact.size),
            installed=self.trust.installed(slot.name),
            rollback=RollbackEvidence(
                rollback,
                self._verdict(rollback.key_id, rollback.payload(), rollback.signature)
                if rollback is not None
                else "invalid",
                self._device_id,
            ),
        )

    def check_engine(self, manifest: EngineManifest, engine_key: str) -> None:
        """:class:`ArtifactRefused` unless the pulled engine ``engine_key`` is signed as such."""
        if not self._pinned(f"engine {engine_key[:12]}"):
            return
        self._check(
            manifest.signed,
            Expected("engine", engine_key, ENGINE_VERSION, manifest.sha256, manifest.size),
        )

    def check_job_artifact(self, name: str, version: str, artifact: JobArtifact) -> None:
        """:class:`ArtifactRefused` unless a job's model (built and timed beside what serves,
        never installed) is signed as ``name`` ``version``; no rollback rule applies."""
        if not self._pinned(f"model {name} {version}"):
            return
        self._check(
            artifact.signed, Expected("model", name, version, artifact.sha256, artifact.size)
        )

    def check_agent_release(self, version: str, artifact: AgentReleaseArtifact) -> None:
        """:class:`ArtifactRefused` unless an agent release's artifact is signed as release
        ``version`` of ``jetfleet-agent``; no serial rule applies (the updater refuses older
        versions itself unless the operator allowed the downgrade)."""
        if not self._pinned(f"agent release {version}"):
            return
        self._check(
            artifact.signed,
            Expected("agent", AGENT_ARTIFACT_NAME, version, artifact.sha256, artifact.size),
        )

    def installed(self, slot: ModelSlot, generation: int) -> None:
        """``slot``'s version now serves: its serial is the model's new high-water mark."""
        signed = slot.artifact.signed
        if signed is None or not self.trust.pinned:
            return
        self.trust.record_install(
            slot.name, slot.version, signed.manifest.serial, generation, slot.artifact.sha256
        )

    def _check(
        self,
        signed: SignedManifest | None,
        expected: Expected,
        installed: Installed | None = None,
        rollback: RollbackEvidence | None = None,
    ) -> None:
        """:class:`ArtifactRefused` unless ``signed`` allows installing ``expected`` now."""
        refusal = check_manifest(
            signed,
            self._verdict(signed.manifest.key_id, signed.manifest.payload(), signed.signature)
            if signed is not None
            else "invalid",
            expected,
            self._clock(),
            installed=installed,
            rollback=rollback,
        )
        if refusal is not None:
            raise ArtifactRefused(refusal)

    def _pinned(self, what: str) -> bool:
        if self.trust.pinned:
            return True
        if what not in self._warned:
            self._warned.add(what)
            log.warning(
                "installing %s without verifying its signature: no fleet key is pinned "
                "(enrol the agent with `jetfleet-agent enroll` to verify artifacts)",
                what,
            )
        return False

    def _verdict(self, key_id: str, payload: bytes, signature: str) -> SignatureVerdict:
        key = self.trust.key(key_id)
        if key is None:
            return "unknown_key"
        if key.retired_at is not None:
            return "retired_key"
        return "valid" if self._verify(key.public_key, payload, signature) else "invalid"
