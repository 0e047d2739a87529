"""Whether an agent may install an artifact, and which rotated keys it may adopt (pure).

The agent's adapter verifies signatures and hands the verdicts in; everything else is decided
here, in this order, and the first failure is the refusal the slot and its event report:

1. ``unsigned``: there is no signed manifest (and the agent has a pinned key);
2. ``unknown_key``: signed by a key the agent never pinned, or by one a rotation retired;
3. ``bad_signature``: the signature does not verify (altered manifest, copied signature);
4. ``other_artifact``: a valid signature over the manifest of other bytes, or of another
   model or version than the slot names;
5. ``expired``: the manifest's ``expires`` has passed;
6. ``rollback``: its serial is lower than the installed one's, and no valid rollback
   authorisation for this device, model, version and serial, issued for a generation after the
   installed one's, came with it.

Desired documents are decided by :func:`check_document` (signature, key, replay); see there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Literal

from shared.manifests import (
    ArtifactKind,
    DocumentSignature,
    KeyEndorsement,
    Manifest,
    RollbackAuthorization,
    SignedManifest,
    b64decode,
    key_id_of,
)

SignatureVerdict = Literal["valid", "invalid", "unknown_key", "retired_key"]
"""What the adapter found: verified by a pinned active key, not verified, key never pinned,
key pinned once but retired by a rotation."""

Verifier = Callable[[str, bytes, str], bool]
"""``verify(public_key_b64, payload, signature_b64)``: True when the signature is valid."""


class Reason(str, Enum):
    """Why an artifact was refused (the ``reason`` of the ``artifact_refused`` event)."""

    UNSIGNED = "unsigned"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    OTHER_ARTIFACT = "other_artifact"
    EXPIRED = "expired"
    ROLLBACK = "rollback"


@dataclass(frozen=True)
class Refusal:
    """A refused artifact: a reason code and one line for people."""

    reason: Reason
    message: str


@dataclass(frozen=True)
class Expected:
    """The artifact the agent is about to install, as the desired state names it."""

    kind: ArtifactKind
    name: str
    version: str
    sha256: str
    size: int

    def label(self) -> str:
        return f"{self.kind} {self.name}" + (f" {self.version}" if self.kind == "model" else "")


@dataclass(frozen=True)
class Installed:
    """The version of a model the agent installed last: its serial and desired generation."""

    serial: int
    generation: int


@dataclass(frozen=True)
class RollbackEvidence:
    """A rollback authorisation that came with the slot, its signature verdict, this device."""

    authorization: RollbackAuthorization | None
    signature: SignatureVerdict
    device_id: str


def check_manifest(
    signed: SignedManifest | None,
    signature: SignatureVerdict,
    expected: Expected,
    now: datetime,
    installed: Installed | None = None,
    rollback: RollbackEvidence | None = None,
) -> Refusal | None:
    """The refusal of installing ``expected`` on the strength of ``signed``, or None to accept.

    ``signature`` is the adapter's verdict on ``signed``; ``installed`` is what the device has
    for this model (None: nothing, or not a model); ``rollback`` what came to allow an older one.
    """
    what = expected.label()
    if signed is None:
        return Refusal(
            Reason.UNSIGNED,
            f"{what} is unsigned: the desired state carries no signed manifest for it",
        )
    manifest = signed.manifest
    if signature == "unknown_key":
        return Refusal(
            Reason.UNKNOWN_KEY,
            f"{what} is signed by unknown key {manifest.key_id}: not a pinned fleet key "
            "(re-enrol the device if the fleet key was replaced without rotation)",
        )
    if signature == "retired_key":
        return Refusal(
            Reason.UNKNOWN_KEY,
            f"{what} is signed by retired key {manifest.key_id}: a key rotation replaced it",
        )
    if signature != "valid":
        return Refusal(
            Reason.BAD_SIGNATURE,
            f"bad signature on the manifest of {what}: it was altered, or its signature "
            "belongs to another manifest",
        )
    mismatch = _mismatch(manifest, expected)
    if mismatch is not None:
        return Refusal(
            Reason.OTHER_ARTIFACT,
            f"signature of another artifact: the signed manifest is for {_describe(manifest)}, "
            f"not {what} ({mismatch})",
        )
    if now >= manifest.expires:
        return Refusal(
            Reason.EXPIRED,
            f"manifest of {what} expired at {manifest.expires.isoformat()} "
            f"(device clock {now.isoformat()})",
        )
    if installed is not None and manifest.serial < installed.serial:
        older = f"older than installed (serial {manifest.serial} < {installed.serial})"
        auth = rollback.authorization if rollback is not None else None
        if rollback is None or auth is None:
            return Refusal(Reason.ROLLBACK, f"{what} is {older} without rollback authorisation")
        problem = rollback_problem(rollback, manifest, installed, now)
        if problem is not None:
            return Refusal(
                Reason.ROLLBACK,
                f"{what} is {older}; its rollback authorisation is refused: {problem}",
            )
    return None


def rollback_problem(
    evidence: RollbackEvidence, manifest: Manifest, installed: Installed, now: datetime
) -> str | None:
    """Why ``evidence`` does not allow ``manifest`` over ``installed`` (None: it does)."""
    auth = evidence.authorization
    if auth is None:
        return "there is none"
    if evidence.signature == "unknown_key":
        return f"signed by unknown key {auth.key_id}"
    if evidence.signature == "retired_key":
        return f"signed by retired key {auth.key_id}"
    if evidence.signature != "valid":
        return "bad signature"
    if auth.device_id != evidence.device_id:
        return f"issued for device {auth.device_id}"
    if (auth.model, auth.version, auth.serial) != (
        manifest.name,
        manifest.version,
        manifest.serial,
    ):
        return f"issued for {auth.model} {auth.version} (serial {auth.serial})"
    if now >= auth.expires:
        return f"expired at {auth.expires.isoformat()}"
    if auth.generation <= installed.generation:
        return (
            f"issued for desired generation {auth.generation}, before the installed version "
            f"(generation {installed.generation}): a replay"
        )
    return None


def _mismatch(manifest: Manifest, expected: Expected) -> str | None:
    pairs = (
        ("kind", manifest.kind, expected.kind),
        ("name", manifest.name, expected.name),
        ("version", manifest.version, expected.version),
        ("sha256", manifest.sha256, expected.sha256),
        ("size", manifest.size, expected.size),
    )
    wrong = [f"{field} {got!s:.12} != {want!s:.12}" for field, got, want in pairs if got != want]
    return ", ".join(wrong) if wrong else None


def _describe(manifest: Manifest) -> str:
    version = f" {manifest.version}" if manifest.kind == "model" else ""
    return f"{manifest.kind} {manifest.name}{version} (sha256 {manifest.sha256[:12]})"


# --- key rotation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainOutcome:
    """Endorsements to adopt, oldest first (the last names the new active key), and refusals."""

    adopted: tuple[KeyEndorsement, ...] = ()
    refused: tuple[tuple[KeyEndorsement, str], ...] = ()


def follow_endorsements(
    active_key_id: str,
    active_public_key: str,
    known: Collection[str],
    chain: Sequence[KeyEndorsement],
    verify: Verifier,
) -> ChainOutcome:
    """Walk the rotation chain from the pinned active key; refuse what it cannot reach.

    An endorsement is adopted when the current key signed it and its key id is the id of its
    public key; the walk then continues from the key it endorsed. ``known`` holds every key id
    the agent pinned (active or retired); endorsements of known keys are old links and ignored.
    Any other endorsement is refused, with why (signed by an unknown key, a bad signature...).
    """
    adopted: list[KeyEndorsement] = []
    refused: list[tuple[KeyEndorsement, str]] = []
    have = set(known) | {active_key_id}
    current_id, current_key = active_key_id, active_public_key
    pending = [e for e in chain if e.key_id not in have]
    while True:
        step = next((e for e in pending if e.endorsed_by == current_id), None)
        if step is None:
            break
        pending.remove(step)
        problem = endorsement_problem(step, current_key, verify)
        if problem is not None:
            refused.append((step, problem))
            continue
        adopted.append(step)
        have.add(step.key_id)
        pending = [e for e in pending if e.key_id not in have]
        current_id, current_key = step.key_id, step.public_key
    for endorsement in pending:
        if endorsement.endorsed_by in have:
            why = f"endorsed by key {endorsement.endorsed_by}, which is no longer the active key"
        else:
            why = f"signed by unknown key {endorsement.endorsed_by}"
        refused.append((endorsement, why))
    return ChainOutcome(tuple(adopted), tuple(refused))


def endorsement_problem(
    endorsement: KeyEndorsement, signer_public_key: str, verify: Verifier
) -> str | None:
    """Why ``endorsement`` is not a valid rotation signed by ``signer_public_key`` (None: it is)."""
    raw = b64decode(endorsement.public_key)
    if raw is None or len(raw) != 32:
        return "its public key is not 32 bytes of base64"
    if key_id_of(raw) != endorsement.key_id:
        return f"key id {endorsement.key_id} is not the id of its public key ({key_id_of(raw)})"
    if not verify(signer_public_key, endorsement.payload(), endorsement.signature):
        return f"bad signature by key {endorsement.endorsed_by}"
    return None


# --- desired documents -------------------------------------------------------------------------


class DocumentReason(str, Enum):
    """Why a desired document was refused (the ``reason`` of the ``desired_refused`` event)."""

    UNSIGNED = "unsigned"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    REPLAY = "replay"


@dataclass(frozen=True)
class DocumentRefusal:
    """A refused desired document: a reason code and one line for people."""

    reason: DocumentReason
    message: str


@dataclass(frozen=True)
class PinnedKeys:
    """What the agent trusts: its active fleet key and every key id it ever pinned."""

    active_key_id: str
    active_public_key: str
    known: frozenset[str]


@dataclass(frozen=True)
class SignedDocument:
    """The parts of a desired document the decision needs."""

    generation: int
    signature: DocumentSignature | None
    payload: bytes
    """The bytes the signature covers (``DesiredState.signing_payload()``)."""
    fleet_keys: Sequence[KeyEndorsement] = ()


def document_signing_key(
    keys: PinnedKeys, chain: Sequence[KeyEndorsement], verify: Verifier
) -> tuple[str, str]:
    """(key id, public key) a document carrying ``chain`` must be signed with.

    The active pinned key when the chain brings no rotation the agent can follow from it;
    otherwise the last key the chain validly endorses from the active key (what the agent will
    pin once it accepts the document). A controller always signs with the key at the end of the
    chain it sends, so a document signed by an earlier link is not one of its documents.
    """
    outcome = follow_endorsements(
        keys.active_key_id, keys.active_public_key, keys.known, chain, verify
    )
    if not outcome.adopted:
        return keys.active_key_id, keys.active_public_key
    last = outcome.adopted[-1]
    return last.key_id, last.public_key


def check_document(
    document: SignedDocument,
    keys: PinnedKeys | None,
    last_accepted: int,
    verify: Verifier,
) -> DocumentRefusal | None:
    """The refusal of applying a desired document, or None to accept it.

    ``keys`` None means the agent pinned no fleet key (never enrolled): every document is
    accepted, signed or not (development set-ups, as for artifacts). Otherwise, in order:

    1. ``unsigned``: the document carries no signature;
    2. ``unknown_key``: it is signed by another key than :func:`document_signing_key` (a key
       never pinned and not endorsed from the active one in the document's own chain, or one
       a rotation retired); endorsements are thus followed only from a document that verifies;
    3. ``bad_signature``: the signature does not verify (a field changed, a copied signature);
    4. ``replay``: a valid document whose generation is lower than ``last_accepted`` (the same
       generation is a retained republish and passes).
    """
    if keys is None:
        return None
    generation = document.generation
    what = f"desired generation {generation}"
    signature = document.signature
    if signature is None:
        return DocumentRefusal(
            DocumentReason.UNSIGNED,
            f"{what} is unsigned: not published by the controller (or by one without the "
            "fleet key); the device keeps its last accepted document",
        )
    key_id, public_key = document_signing_key(keys, document.fleet_keys, verify)
    if signature.key_id != key_id:
        if signature.key_id == keys.active_key_id:
            why = f"key {signature.key_id}, which its own rotation chain replaces with {key_id}"
        elif signature.key_id in keys.known:
            why = f"retired key {signature.key_id}: the active fleet key is {key_id}"
        else:
            why = f"unknown key {signature.key_id}: not a pinned fleet key nor one endorsed from it"
        return DocumentRefusal(DocumentReason.UNKNOWN_KEY, f"{what} is signed by {why}")
    if not verify(public_key, document.payload, signature.signature):
        return DocumentRefusal(
            DocumentReason.BAD_SIGNATURE,
            f"bad signature on {what} by key {key_id}: the document was altered, or its "
            "signature belongs to another document",
        )
    if generation < last_accepted:
        return DocumentRefusal(
            DocumentReason.REPLAY,
            f"{what} is older than the accepted generation {last_accepted}: a replay (if the "
            "controller's database was reset, delete desired.json in the agent's state "
            "directory and restart it)",
        )
    return None
