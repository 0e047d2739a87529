"""Tokens and the audit log over the database: authenticate, create, list, revoke, record.

Used by the HTTP middleware, the token and audit routes, ``jetfleet tokens --db`` and the
start-up bootstrap (an admin token in ``<data_dir>/admin-token`` on a database without one).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from controller.auth.policy import ROLES, Role
from controller.auth.tokens import (
    MalformedToken,
    Principal,
    TokenRecord,
    check_name,
    mint,
    parse,
    rejection,
    secret_matches,
)
from controller.db.schema import utcnow
from controller.db.token_store import TOUCH_EVERY, AuditRecord, TokenStore
from controller.errors import ControllerError, InvalidInput
from shared.topics import TopicError, check_device_id

log = logging.getLogger(__name__)

ADMIN_TOKEN_FILE = "admin-token"  # noqa: S105 - a file name
BOOTSTRAP_NAME = "bootstrap-admin"


class Unauthenticated(ControllerError):
    """No usable token: missing, malformed, unknown, revoked or expired (HTTP 401)."""


@dataclass(frozen=True)
class CreatedToken:
    """A stored token and its wire form, which is shown this once."""

    record: TokenRecord
    token: str


class AccessControl:
    """Authentication and token administration; ``required`` False switches checks off."""

    def __init__(
        self,
        store: TokenStore,
        *,
        required: bool = True,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.required = required
        self._clock = clock
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self._clock()

    def authenticate(self, wire: str) -> Principal:
        """The principal of a presented token; :class:`Unauthenticated` with the reason else."""
        try:
            token_id, secret = parse(wire)
        except MalformedToken as exc:
            raise Unauthenticated(str(exc)) from exc
        record = self.store.get(token_id)
        if record is None or not secret_matches(secret, record.secret_sha256):
            raise Unauthenticated(f"unknown API token {token_id}")
        reason = rejection(record, self.now())
        if reason is not None:
            raise Unauthenticated(reason)
        self._touch(record.id)
        return Principal(
            name=record.name, role=record.role, token_id=record.id, device_id=record.device_id
        )

    def _touch(self, token_id: str) -> None:
        """Write ``last_used_at`` at most once a minute per token (and process)."""
        mono = time.monotonic()
        with self._lock:
            last = self._touched.get(token_id)
            if last is not None and mono - last < TOUCH_EVERY.total_seconds():
                return
            self._touched[token_id] = mono
        try:
            self.store.touch(token_id, self.now())
        except ControllerError as exc:
            log.warning("could not record the use of API token %s: %s", token_id, exc)

    def create(
        self,
        name: str,
        role: str,
        *,
        device_id: str | None = None,
        expires_in: timedelta | None = None,
        created_by: str | None = None,
    ) -> CreatedToken:
        """Mint and store a token; :class:`InvalidInput` names the bad argument."""
        try:
            check_name(name)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        if role not in ROLES:
            raise InvalidInput(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
        kind = Role(role)
        if kind is Role.DEVICE and not device_id:
            raise InvalidInput("a device token needs the device it speaks for: give --device ID")
        if kind is not Role.DEVICE and device_id is not None:
            raise InvalidInput(f"--device is only for role device, not {role}")
        if device_id is not None:
            try:
                check_device_id(device_id)
            except TopicError as exc:
                raise InvalidInput(str(exc)) from exc
        if expires_in is not None and expires_in <= timedelta(0):
            raise InvalidInput("the expiry must lie in the future")
        now = self.now()
        minted = mint()
        record = self.store.create(
            minted,
            name,
            kind,
            now=now,
            device_id=device_id,
            expires_at=None if expires_in is None else now + expires_in,
            created_by=created_by,
        )
        return CreatedToken(record, minted.wire)

    def tokens(self) -> list[TokenRecord]:
        return self.store.all()

    def revoke(self, token_id: str) -> TokenRecord:
        return self.store.revoke(token_id, self.now())

    def record(self, entry: AuditRecord) -> None:
        """Append to the audit log; a failure is logged, never raised (requests go on)."""
        try:
            self.store.append_audit(entry)
        except Exception as exc:  # noqa: BLE001 - the audit must never fail a request
            log.error("could not write the audit log (%s %s): %s", entry.actor, entry.action, exc)

    def audit(
        self, since: datetime | None = None, actor: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        return self.store.audit(since, actor, limit)

    def ensure_admin_token(self, data_dir: Path) -> Path | None:
        """On a database without a usable admin token, create one and write it to
        ``<data_dir>/admin-token`` (mode 0600); the path when one was created, else None."""
        if self.store.has_admin(self.now()):
            return None
        created = self.create(BOOTSTRAP_NAME, Role.ADMIN.value, created_by="jetfleet serve")
        path = data_dir / ADMIN_TOKEN_FILE
        write_secret_file(path, created.token + "\n")
        return path


def write_secret_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by the owner only (0600).

    The temporary file's name is this writer's own: replicas starting together on one data
    directory write the file at once, and with one shared name the losers' rename failed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def bootstrap_admin(access: AccessControl, data_dir: Path, url: str) -> Path | None:
    """At start: make sure an admin can log in (see :meth:`AccessControl.ensure_admin_token`)."""
    if not access.required:
        return None
    path = access.ensure_admin_token(data_dir)
    if path is not None:
        log.warning(
            "no admin API token in the database: created %r and saved it to %s (mode 0600); "
            'log in with: jetfleet login --url %s --token "$(cat %s)"',
            BOOTSTRAP_NAME,
            path,
            url,
            path,
        )
    return path
