"""Device enrolment: one-time tokens in, a device identity out; revocation.

An operator creates an enrolment token (``jfe_<id>.<secret>``, shown once, expiring, optionally
bound to one device id and carrying labels). The agent exchanges it once for its identity:

- a broker credential of its own (user ``dev-<id>``, random password) that the broker lets
  publish and subscribe only under the device's own topics (:mod:`controller.broker_admin`);
- an API token with role ``device`` bound to the device id (the ``jf_<id>.<secret>`` format of
  :mod:`controller.auth.tokens`);
- the fleet's public signing key, which the agent pins.

The device gets the token's labels (stored on the device at once, so selectors match it before
its first report); labels the agent asks for itself are ignored and logged
(:mod:`controller.trust.labels`). A token without labels leaves a re-enrolled device's labels as
they are.

Re-enrolling replaces the identity: the old broker credential is deleted and the old API token
revoked. Only a token bound to the device (``--device``) may do that while the identity is not
revoked; an unbound token gets 409, else anyone holding one could take over a live gateway.
Revoking removes broker access at once (the live connection is closed, the credential no
longer logs in) and revokes the API token. The token is claimed before anything is created
and released again if a later step fails, so a failed enrolment can be retried with it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.auth.service import AccessControl
from controller.broker_admin.acl import device_username
from controller.broker_admin.base import BrokerAdmin
from controller.broker_admin.passwords import hash_password, new_password
from controller.db.identity_store import EnrolTokenRecord, IdentityRecord, IdentityStore
from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.errors import ControllerError, InvalidInput, NotFound
from controller.trust.labels import check_labels, describe, ignored_labels
from shared.enrolment import EnrolmentAnswer
from shared.topics import DEFAULT_PREFIX, TopicError, check_device_id

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "jfe_"  # noqa: S105 - the wire prefix, not a secret
_WIRE = re.compile(r"jfe_([0-9a-f]{12})\.([A-Za-z0-9_-]{43})")
MAX_EXPIRY = timedelta(days=30)
DEFAULT_EXPIRY = timedelta(hours=24)


class EnrolmentRefused(ControllerError):
    """The token is unknown (401), used or expired (410), names another device (403), or is
    not bound to a device that already has a live identity (409)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CreatedEnrolToken:
    """A stored enrolment token and its wire form, shown this once."""

    record: EnrolTokenRecord
    token: str


IssuedIdentity = EnrolmentAnswer
"""What an enrolled device receives; the agent keeps it in ``identity.json`` (0600)."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class EnrolmentService:
    """Creates enrolment tokens, enrols and revokes devices."""

    def __init__(
        self,
        store: IdentityStore,
        admin: BrokerAdmin,
        access: AccessControl | None,
        *,
        controller_url: str,
        broker_url: str,
        topic_prefix: str = DEFAULT_PREFIX,
        on_revoked: Callable[[str], None] | None = None,
        clock: Callable[[], datetime] = utcnow,
        devices: Repository | None = None,
    ) -> None:
        self.store = store
        self.devices = devices
        """Where an enrolled device's labels are stored; None: only in the identity answer."""
        self.admin = admin
        self.access = access
        self.controller_url = controller_url
        self.broker_url = broker_url
        self.topic_prefix = topic_prefix
        self._on_revoked = on_revoked
        """Called with the device id after a revocation (the server marks the device offline:
        Mosquitto drops the Last Will of a client it deletes, the ACL no longer allowing it)."""
        self._clock = clock
        self._enrolling = threading.Lock()
        """One enrolment at a time, so two cannot both find a device id free and both take it."""

    def create_token(
        self,
        *,
        labels: dict[str, str] | None = None,
        expires_in: timedelta = DEFAULT_EXPIRY,
        device_id: str | None = None,
        created_by: str | None = None,
    ) -> CreatedEnrolToken:
        """Mint and store a one-time enrolment token; InvalidInput names a bad argument."""
        if expires_in <= timedelta(0) or expires_in > MAX_EXPIRY:
            raise InvalidInput("--expires must lie between 1 s and 30 days (e.g. 24h)")
        if device_id is not None:
            _check_device(device_id)
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = self._clock()
        record = self.store.add_enrol_token(
            token_id,
            _digest(secret),
            labels=check_labels(labels or {}),
            device_id=device_id,
            created_by=created_by,
            now=now,
            expires_at=now + expires_in,
        )
        return CreatedEnrolToken(record, f"{TOKEN_PREFIX}{token_id}.{secret}")

    def tokens(self) -> list[EnrolTokenRecord]:
        return self.store.enrol_tokens()

    def identities(self) -> list[IdentityRecord]:
        return self.store.identities()

    def enrol(
        self, token: str, device_id: str | None, labels: dict[str, str] | None = None
    ) -> IssuedIdentity:
        """Exchange ``token`` for the identity of ``device_id`` (or of the token's device).

        ``labels`` are the ones the agent asks for: ignored (and logged), since a device must
        not choose what selectors match it; it gets its token's labels.
        """
        record = self._usable_token(token)
        chosen = record.device_id or device_id
        if chosen is None:
            raise InvalidInput("this enrolment token names no device: give --device-id ID")
        if record.device_id is not None and device_id not in (None, record.device_id):
            raise EnrolmentRefused(
                f"enrolment token {record.id} is for device {record.device_id!r}, "
                f"not {device_id!r}",
                403,
            )
        _check_device(chosen)
        with self._enrolling:
            if record.device_id is None:
                self._refuse_takeover(chosen, record.id)
                self._refuse_lookalike(chosen)
            now = self._clock()
            if not self.store.claim_enrol_token(record.id, chosen, now):
                raise EnrolmentRefused(f"enrolment token {record.id} was already used", 410)
            try:
                granted = self._label(chosen, record.labels)
                issued = self._issue(chosen, granted, now)
            except BaseException:
                self.store.release_enrol_token(record.id)
                raise
        ignored = ignored_labels(labels or {}, granted)
        if ignored:
            logger.warning(
                "device %s asked for labels %s at enrolment: ignored (labels come from the "
                "enrolment token or `jetfleet devices label %s k=v`)",
                chosen,
                describe(ignored),
                chosen,
            )
        logger.info("device %s enrolled with token %s", chosen, record.id)
        return issued

    def _refuse_takeover(self, device_id: str, token_id: str) -> None:
        """409 when ``device_id`` has a live identity: only a token bound to it may replace it."""
        existing = self.store.identity(device_id)
        if existing is None or existing.revoked_at is not None:
            return
        raise EnrolmentRefused(
            f"device {device_id!r} is already enrolled (since {_stamp(existing.enrolled_at)}) "
            f"and enrolment token {token_id} is not bound to it: to re-enrol it, use a token "
            f"made with `jetfleet devices enroll-token --device {device_id}`; to retire the "
            f"old identity first, `jetfleet devices revoke {device_id}`",
            409,
        )

    def _refuse_lookalike(self, device_id: str) -> None:
        """409 when a device picks an id that reads as an enrolled device's (``GW-02`` or
        ``gw-02.`` beside ``gw-02``): operators and logs would take one for the other."""
        found = self.store.live_lookalikes(device_id, canonical_device_id)
        if found:
            raise EnrolmentRefused(
                f"device id {device_id!r} looks like enrolled device {found[0]!r} (they differ "
                "only in case or trailing '.', '-', '_'): choose a distinct id",
                409,
            )

    def _label(self, device_id: str, token_labels: dict[str, str]) -> dict[str, str]:
        """Store the token's labels on the device (a token without labels keeps the device's);
        the labels the device has now."""
        if self.devices is None:
            return dict(token_labels)
        if token_labels:
            return self.devices.set_labels(device_id, token_labels, create=True)
        known = self.devices.devices([device_id])
        return dict(known[0].labels) if known else {}

    def revoke(self, device_id: str) -> IdentityRecord:
        """Remove the device's broker access at once and revoke its API token."""
        identity = self.store.revoke_identity(device_id, self._clock())
        self._revoke_api_token(identity.api_token_id)
        self.admin.remove_device(device_id, identity.broker_username)
        if self._on_revoked is not None:
            self._on_revoked(device_id)
        logger.info("device %s revoked (broker user %s)", device_id, identity.broker_username)
        return identity

    def reapply_revocations(self) -> int:
        """Remove every revoked device's broker credential again (idempotent); how many.

        A revocation is stored before the broker is told; if the broker call failed (503 to the
        operator) and was never retried, the device could still connect. The server calls this
        at start, so the database's word holds after a restart. A broker error is logged, not
        raised: the controller still starts, and ``jetfleet devices revoke`` can be repeated.
        """
        done = 0
        for identity in self.store.identities():
            if identity.revoked_at is None:
                continue
            try:
                self.admin.remove_device(identity.device_id, identity.broker_username)
            except ControllerError as exc:
                logger.error(
                    "could not remove revoked device %s from the broker: %s",
                    identity.device_id,
                    exc,
                )
                continue
            done += 1
        return done

    def _usable_token(self, token: str) -> EnrolTokenRecord:
        match = _WIRE.fullmatch(token.strip())
        if match is None:
            raise EnrolmentRefused(
                "not a Jetfleet enrolment token (expected jfe_<id>.<secret>)", 401
            )
        token_id, secret = match.group(1), match.group(2)
        record = self.store.enrol_token(token_id)
        if record is None or not hmac.compare_digest(_digest(secret), record.secret_sha256):
            raise EnrolmentRefused(f"unknown enrolment token {token_id}", 401)
        if record.used_at is not None:
            raise EnrolmentRefused(
                f"enrolment token {token_id} was already used by {record.used_by} at "
                f"{_stamp(record.used_at)}: create a new one with `jetfleet devices enroll-token`",
                410,
            )
        if record.expires_at <= self._clock():
            raise EnrolmentRefused(
                f"enrolment token {token_id} expired at {_stamp(record.expires_at)}: "
                "create a new one with `jetfleet devices enroll-token`",
                410,
            )
        return record

    def _issue(self, device_id: str, labels: dict[str, str], now: datetime) -> IssuedIdentity:
        previous = self.store.identity(device_id)
        username = device_username(device_id)
        if previous is not None:
            self._revoke_api_token(previous.api_token_id)
            self.admin.remove_device(device_id, previous.broker_username)
        password: str | None = None
        password_hash: str | None = None
        if self.admin.manages_credentials:
            password = new_password()
            password_hash = hash_password(password).encode()
            self.admin.add_device(device_id, username, password)
        api_token: str | None = None
        api_token_id: str | None = None
        try:
            if self.access is not None:
                created = self.access.create(
                    device_id, "device", device_id=device_id, created_by="enrolment"
                )
                api_token, api_token_id = created.token, created.record.id
            self.store.put_identity(
                IdentityRecord(
                    device_id=device_id,
                    broker_username=username,
                    broker_password_hash=password_hash,
                    api_token_id=api_token_id,
                    enrolled_at=now,
                    revoked_at=None,
                )
            )
        except BaseException:
            self._revoke_api_token(api_token_id)
            if password is not None:
                self.admin.remove_device(device_id, username)
            raise
        return IssuedIdentity(
            device_id=device_id,
            controller_url=self.controller_url,
            broker_url=self.broker_url,
            topic_prefix=self.topic_prefix,
            broker_username=username if password is not None else None,
            broker_password=password,
            api_token=api_token,
            fleet_key=self.store.fleet_key(),
            labels=labels,
            enrolled_at=now,
        )

    def _revoke_api_token(self, token_id: str | None) -> None:
        if token_id is None or self.access is None:
            return
        try:
            self.access.revoke(token_id)
        except NotFound:
            logger.warning("API token %s of a device identity no longer exists", token_id)


def canonical_device_id(device_id: str) -> str:
    """The form two device ids that look alike share: lower case, trailing ``._-`` dropped."""
    return device_id.lower().rstrip("._-")


def _check_device(device_id: str) -> None:
    try:
        check_device_id(device_id)
    except TopicError as exc:
        raise InvalidInput(str(exc)) from exc


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")
