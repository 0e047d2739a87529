"""What the agent trusts: pinned fleet keys and, per model, the installed serial (``trust.json``).

``<state_dir>/trust.json`` is written atomically (:mod:`agent.durable_files`). When it does not
exist yet, the pin comes from ``identity.json`` (written by ``jetfleet-agent enroll``, field
``fleet_key``: ``{"key_id", "public_key"}``); a later re-enrolment that brings another key pins
that one (enrolment is the operator's act of trust). :meth:`TrustStore.pin` pins a key directly.

A store with no pinned key is **unenrolled**: the agent then installs artifacts without
verifying them (development set-ups and tests), logging one warning per model version.
Following a rotation retires the previous key: what it signs afterwards is refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from agent.durable_files import write_atomically
from agent.errors import StartupError
from agent.identity_file import identity_path
from shared.manifests import B64_PATTERN, KEY_ID_PATTERN, KeyEndorsement, b64decode, key_id_of
from shared.trust_policy import Installed

log = logging.getLogger(__name__)

TRUST_FILE = "trust.json"

KeySource = Literal["enrolment", "endorsement", "pin"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PinnedKey(_Model):
    """A fleet public key the agent trusts (``retired_at`` None) or trusted once."""

    key_id: str = Field(pattern=KEY_ID_PATTERN)
    public_key: str = Field(pattern=B64_PATTERN)
    source: KeySource
    pinned_at: AwareDatetime
    retired_at: AwareDatetime | None = None


class InstalledModel(_Model):
    """The version of a model installed last, with its serial and desired generation."""

    version: str
    serial: int = Field(ge=0)
    generation: int = Field(ge=0)
    sha256: str
    installed_at: AwareDatetime


class TrustFile(_Model):
    """The content of ``trust.json``."""

    schema_: Literal["jetfleet/trust/1"] = Field(default="jetfleet/trust/1", alias="schema")
    keys: tuple[PinnedKey, ...] = ()
    models: dict[str, InstalledModel] = Field(default_factory=dict)
    enrolment_key_id: str | None = Field(
        default=None, description="The fleet key identity.json held when it was pinned."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class TrustStore:
    """``trust.json`` of one state directory, kept in memory and written on every change."""

    def __init__(self, state_dir: Path, content: TrustFile) -> None:
        self._state_dir = state_dir
        self._content = content

    @classmethod
    def open(cls, state_dir: Path) -> TrustStore:
        """Load ``trust.json``, pinning the enrolment key from ``identity.json`` when new.

        :class:`StartupError` when either file exists but cannot be read as what it should be.
        """
        path = state_dir / TRUST_FILE
        try:
            content = TrustFile.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            content = TrustFile()
        except (OSError, ValidationError) as exc:
            raise StartupError(
                f"{path} is unreadable or damaged ({_first_line(exc)}): restore it, or delete it "
                "and re-enrol the device (`jetfleet-agent enroll`) to pin the fleet key again"
            ) from exc
        store = cls(state_dir, content)
        store._pin_enrolment_key()
        return store

    # --- reading -----------------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """True when the agent has an active fleet key (it then refuses what it cannot verify)."""
        return self.active_key() is not None

    def active_key(self) -> PinnedKey | None:
        """The key new artifacts must be signed with."""
        return next((k for k in reversed(self._content.keys) if k.retired_at is None), None)

    def key(self, key_id: str) -> PinnedKey | None:
        """The pinned key ``key_id`` (active or retired), if the agent knows it."""
        return next((k for k in self._content.keys if k.key_id == key_id), None)

    def known_key_ids(self) -> frozenset[str]:
        """Every key id the agent ever pinned."""
        return frozenset(k.key_id for k in self._content.keys)

    def installed(self, model: str) -> Installed | None:
        """The serial and generation of the version of ``model`` installed last."""
        found = self._content.models.get(model)
        return None if found is None else Installed(found.serial, found.generation)

    def installed_models(self) -> Mapping[str, InstalledModel]:
        return dict(self._content.models)

    # --- changing ----------------------------------------------------------------------------

    def pin(self, key_id: str, public_key: str, source: KeySource = "pin") -> None:
        """Trust ``public_key`` as the active fleet key (the previous active one is retired).

        ValueError when the key is not 32 bytes of base64 or ``key_id`` is not its id.
        """
        raw = b64decode(public_key)
        if raw is None or len(raw) != 32:
            raise ValueError("a fleet public key is 32 bytes in base64")
        if key_id_of(raw) != key_id:
            raise ValueError(f"key id {key_id} is not the id of that public key ({key_id_of(raw)})")
        now = _utcnow()
        kept = tuple(
            k if k.retired_at is not None else k.model_copy(update={"retired_at": now})
            for k in self._content.keys
            if k.key_id != key_id
        )
        key = PinnedKey(key_id=key_id, public_key=public_key, source=source, pinned_at=now)
        self._save(self._content.model_copy(update={"keys": (*kept, key)}))
        log.info("pinned fleet key %s (%s)", key_id, source)

    def adopt(self, endorsement: KeyEndorsement) -> None:
        """Pin the key a verified rotation endorsement names; the endorsing key is retired."""
        self.pin(endorsement.key_id, endorsement.public_key, source="endorsement")

    def record_install(
        self, model: str, version: str, serial: int, generation: int, sha256: str
    ) -> None:
        """Remember that ``model`` ``version`` (``serial``) now serves."""
        entry = InstalledModel(
            version=version,
            serial=serial,
            generation=generation,
            sha256=sha256,
            installed_at=_utcnow(),
        )
        if self._content.models.get(model) == entry:
            return
        models = {**self._content.models, model: entry}
        self._save(self._content.model_copy(update={"models": models}))

    def _pin_enrolment_key(self) -> None:
        fleet_key = _identity_fleet_key(identity_path(self._state_dir))
        if fleet_key is None or fleet_key[0] == self._content.enrolment_key_id:
            return
        key_id, public_key = fleet_key
        try:
            self.pin(key_id, public_key, source="enrolment")
        except ValueError as exc:
            raise StartupError(
                f"{identity_path(self._state_dir)}: fleet_key is invalid ({exc}): enrol again"
            ) from exc
        self._save(self._content.model_copy(update={"enrolment_key_id": key_id}))

    def _save(self, content: TrustFile) -> None:
        self._state_dir.mkdir(parents=True, exist_ok=True)
        data = content.model_dump_json(by_alias=True, indent=2).encode("utf-8")
        write_atomically(self._state_dir / TRUST_FILE, data)
        self._content = content


def _identity_fleet_key(path: Path) -> tuple[str, str] | None:
    """(key id, public key) of ``identity.json``'s ``fleet_key``; None when absent or null."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StartupError(f"{path} is unreadable ({exc}): enrol the device again") from exc
    fleet_key = data.get("fleet_key") if isinstance(data, dict) else None
    if fleet_key is None:
        return None
    if (
        not isinstance(fleet_key, dict)
        or not isinstance(fleet_key.get("key_id"), str)
        or not isinstance(fleet_key.get("public_key"), str)
    ):
        raise StartupError(
            f"{path}: fleet_key must be {{'key_id': ..., 'public_key': ...}}: "
            "enrol the device again"
        )
    return fleet_key["key_id"], fleet_key["public_key"]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
