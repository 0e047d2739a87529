"""The fleet's signing key in use: key creation and rotation, manifests, rollback
authorisations and desired documents signed by it.

The private key files are :mod:`controller.trust.key_files` (the only module that imports
cryptography); public keys, their retirement and rotation endorsements are in the
``signing_keys`` table. The active key is the newest one not retired; it is read from the
database on every signing, so a ``jetfleet keys rotate`` run next to a serving controller takes
effect at its next publication.

Manifests are signed lazily: a model version's when a desired document that names it is built,
an engine's when the store accepts it and whenever a twin GETs it. A stored signed manifest is
reused until less than half of its validity is left or another key became active, then signed
again. :class:`controller.trust.refresher.SignatureRefresher` republishes every desired document
when a deployed version's manifest went stale (:meth:`FleetSigner.stale`), so a device that
stays offline for weeks still finds valid manifests in its retained document, and devices learn
about a rotation without waiting for a deployment.

Every desired document is signed whole (:meth:`FleetSigner.sign_documents`) by the key at the
end of the rotation chain it carries, so an enrolled agent refuses documents nobody signed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from controller.db.schema import utcnow
from controller.db.signing_store import KeyRecord, SigningStore
from controller.errors import Conflict
from controller.records import AgentReleaseRecord, DocumentSignatures, PlannedSlot
from controller.trust.key_files import KeyFiles, SigningError
from shared.agent_releases import AGENT_ARTIFACT_NAME
from shared.engines import EngineManifest
from shared.manifests import (
    ENGINE_VERSION,
    ArtifactKind,
    DocumentSignature,
    KeyEndorsement,
    Manifest,
    RollbackAuthorization,
    SignedManifest,
)
from shared.messages import DesiredState

logger = logging.getLogger(__name__)

DEFAULT_VALIDITY = timedelta(days=30)
"""How long a signed manifest or rollback authorisation holds."""


@dataclass(frozen=True)
class _Subject:
    kind: ArtifactKind
    name: str
    version: str
    serial: int
    sha256: str
    size: int


class FleetSigner:
    """Creates, rotates and uses the fleet's signing key."""

    def __init__(
        self,
        store: SigningStore,
        data_dir: Path,
        validity: timedelta = DEFAULT_VALIDITY,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._files = KeyFiles(data_dir)
        self.keys_dir = self._files.directory
        self._validity = validity
        self._clock = clock

    # --- keys --------------------------------------------------------------------------------

    def active(self) -> KeyRecord | None:
        """The active public key, if the fleet has one."""
        return self._store.active_key()

    def keys(self) -> list[KeyRecord]:
        """Every key, oldest first (retired ones too)."""
        return self._store.all_keys()

    def ensure_key(self) -> tuple[KeyRecord, bool]:
        """The active key, created first when there is none: (key, True when just created)."""
        active = self._store.active_key()
        if active is not None:
            return active, False
        key_id, public = self._files.create()
        try:
            record = self._store.add_first_key(key_id, public, self._clock())
        except Conflict:  # another replica starting at the same time stored its key first
            winner = self._store.active_key()
            if winner is None:
                raise
            self._files.path(key_id).unlink(missing_ok=True)
            return winner, False
        logger.info("created the fleet signing key %s (%s)", key_id, self._files.path(key_id))
        return record, True

    def rotate(self) -> tuple[KeyRecord, KeyRecord]:
        """A new active key endorsed by the current one, which is retired: (new, old)."""
        old = self._require_active()
        self._files.require(old)  # before a new key file is written
        key_id, public = self._files.create()
        now = self._clock()
        unsigned = KeyEndorsement(
            key_id=key_id, public_key=public, created=self._now(), endorsed_by=old.key_id
        )
        signature = self._files.sign(old, unsigned.payload())
        endorsement = unsigned.model_copy(update={"signature": signature})
        new = self._store.rotate(
            old.key_id, key_id, public, endorsement.model_dump(mode="json", by_alias=True), now
        )
        retired = next(k for k in self._store.all_keys() if k.key_id == old.key_id)
        logger.info("rotated the fleet signing key: %s replaces %s", key_id, old.key_id)
        return new, retired

    def chain(self) -> tuple[KeyEndorsement, ...]:
        """Every rotation endorsement, oldest first (what desired documents carry)."""
        return tuple(
            KeyEndorsement.model_validate(k.endorsement)
            for k in self._store.all_keys()
            if k.endorsement is not None
        )

    # --- signing -----------------------------------------------------------------------------

    def sign_manifest(
        self,
        kind: ArtifactKind,
        name: str,
        version: str,
        serial: int,
        sha256: str,
        size: int,
    ) -> SignedManifest:
        """A manifest of these bytes signed now by the active key, valid for the validity."""
        key = self._require_active()
        now = self._now()
        manifest = Manifest(
            kind=kind,
            name=name,
            version=version,
            serial=serial,
            sha256=sha256,
            size=size,
            created=now,
            expires=now + self._validity,
            key_id=key.key_id,
        )
        signature = self._files.sign(key, manifest.payload())
        return SignedManifest(manifest=manifest, signature=signature)

    def authorize_rollback(
        self,
        device_id: str,
        model: str,
        version: str,
        serial: int,
        generation: int,
        key: KeyRecord | None = None,
    ) -> RollbackAuthorization:
        """Let ``device_id`` install ``model`` ``version`` (``serial``) over a newer one.

        ``key``: the active key when the caller looked it up already (one query per batch).
        """
        key = key or self._require_active()
        unsigned = RollbackAuthorization(
            device_id=device_id,
            model=model,
            version=version,
            serial=serial,
            generation=generation,
            expires=self._now() + self._validity,
            key_id=key.key_id,
        )
        signature = self._files.sign(key, unsigned.payload())
        return unsigned.model_copy(update={"signature": signature})

    def documents(
        self, docs: Sequence[tuple[str, int, Sequence[PlannedSlot]]]
    ) -> dict[str, DocumentSignatures]:
        """Signatures for each (device, generation, slots) about to be published.

        Every slot's model version gets its signed manifest (re-signed when stale). A slot whose
        version is not the model's newest also gets a rollback authorisation for its device and
        generation: the device may have installed a newer one (see :mod:`shared.trust_policy`).
        """
        slots = {s.model_version_id: s for _, _, ss in docs for s in ss if s.model_version_id}
        active = self._require_active()
        manifests = self.model_manifests(slots.values())
        newest = self._store.newest_serials(sorted({s.name for s in slots.values()}))
        chain = self.chain()
        result: dict[str, DocumentSignatures] = {}
        for device_id, generation, device_slots in docs:
            rollbacks = {
                s.name: self.authorize_rollback(
                    device_id, s.name, s.version, s.model_version_id, generation, active
                )
                for s in device_slots
                if s.model_version_id and s.model_version_id < newest.get(s.name, 0)
            }
            result[device_id] = DocumentSignatures(
                manifests={
                    s.model_version_id: manifests[s.model_version_id]
                    for s in device_slots
                    if s.model_version_id in manifests
                },
                rollbacks=rollbacks,
                fleet_keys=chain,
            )
        return result

    def sign_documents(self, docs: Sequence[DesiredState]) -> list[DesiredState]:
        """Each document with its ``signature`` (over ``signing_payload()``), in order.

        The signing key is the one the document's ``fleet_keys`` chain ends with (the active
        key when it has none), so signature and chain always agree even when ``jetfleet keys
        rotate`` ran between building the document and signing it.
        """
        if not docs:
            return []
        keys = {k.key_id: k for k in self._store.all_keys()}
        active = self._require_active()
        signed: list[DesiredState] = []
        for doc in docs:
            key = keys[doc.fleet_keys[-1].key_id] if doc.fleet_keys else active
            signed.append(self.sign_document(doc, key))
        return signed

    def sign_document(self, doc: DesiredState, key: KeyRecord | None = None) -> DesiredState:
        """``doc`` with its signature by ``key`` (None: as :meth:`sign_documents` chooses)."""
        if key is None:
            return self.sign_documents([doc])[0]
        doc = doc.model_copy(update={"signature": None})
        signature = self._files.sign(key, doc.signing_payload())
        return doc.model_copy(
            update={"signature": DocumentSignature(key_id=key.key_id, signature=signature)}
        )

    def model_manifests(self, slots: Iterable[PlannedSlot]) -> dict[int, SignedManifest]:
        """The signed manifest of each slot's model version (stored, or signed and stored)."""
        wanted = {s.model_version_id: s for s in slots if s.model_version_id}
        stored = self._store.model_manifests(sorted(wanted))
        active = self._require_active()
        result: dict[int, SignedManifest] = {}
        for version_id, slot in wanted.items():
            subject = _Subject("model", slot.name, slot.version, version_id, slot.sha256, slot.size)
            signed = self._fresh(stored.get(version_id), subject, active)
            if signed is None:
                signed = self._sign_subject(subject)
                self._store.set_model_manifest(version_id, _json(signed))
            result[version_id] = signed
        return result

    def engine_manifest(self, manifest: EngineManifest) -> SignedManifest:
        """The signed manifest of a stored engine (stored, or signed and stored)."""
        subject = _Subject(
            "engine", manifest.engine_key, ENGINE_VERSION, 0, manifest.sha256, manifest.size
        )
        active = self._require_active()
        signed = self._fresh(self._store.engine_manifest(manifest.engine_key), subject, active)
        if signed is None:
            signed = self._sign_subject(subject)
            self._store.set_engine_manifest(manifest.engine_key, _json(signed))
        return signed

    def agent_manifest(self, release: AgentReleaseRecord) -> tuple[SignedManifest, bool]:
        """The signed manifest of an agent release: (manifest, True when signed now, so the
        caller stores it). Its serial is the release's row id."""
        subject = _Subject(
            "agent", AGENT_ARTIFACT_NAME, release.version, release.id, release.sha256, release.size
        )
        signed = self._fresh(release.signed_manifest, subject, self._require_active())
        if signed is not None:
            return signed, False
        return self._sign_subject(subject), True

    def stale(self) -> bool:
        """True when a deployed version's (or an ordered agent release's) stored manifest needs
        signing again."""
        active = self._store.active_key()
        if active is None:
            return False
        now = self._now()
        stored = [m for _, m in self._store.deployed_manifests()]
        for manifest in [*stored, *self._store.ordered_agent_manifests()]:
            signed = _parse(manifest)
            if signed is None or not self._current(signed, active, now):
                return True
        return False

    # --- helpers -----------------------------------------------------------------------------

    def _sign_subject(self, s: _Subject) -> SignedManifest:
        return self.sign_manifest(s.kind, s.name, s.version, s.serial, s.sha256, s.size)

    def _fresh(
        self, stored: Mapping[str, Any] | None, subject: _Subject, active: KeyRecord
    ) -> SignedManifest | None:
        signed = _parse(stored)
        if signed is None or not self._current(signed, active, self._now()):
            return None
        m = signed.manifest
        same = (m.kind, m.name, m.version, m.serial, m.sha256, m.size) == (
            subject.kind,
            subject.name,
            subject.version,
            subject.serial,
            subject.sha256,
            subject.size,
        )
        return signed if same else None

    def _current(self, signed: SignedManifest, active: KeyRecord, now: datetime) -> bool:
        m = signed.manifest
        return m.key_id == active.key_id and m.expires - now > self._validity / 2

    def _now(self) -> datetime:
        return self._clock().replace(microsecond=0)

    def _require_active(self) -> KeyRecord:
        active = self._store.active_key()
        if active is None:
            raise SigningError(
                "the fleet has no signing key: run `jetfleet keys init` (or start "
                "`jetfleet serve`, which creates one)"
            )
        return active


def _parse(stored: Mapping[str, Any] | None) -> SignedManifest | None:
    if not stored:
        return None
    try:
        return SignedManifest.model_validate(stored)
    except ValidationError:
        return None


def _json(signed: SignedManifest) -> dict[str, Any]:
    return signed.model_dump(mode="json", by_alias=True)
