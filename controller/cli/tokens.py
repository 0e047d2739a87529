"""``jetfleet tokens create|list|revoke`` and ``jetfleet audit``.

Token commands work through the API with an admin token, or with ``--db URL`` (or
``--data-dir``) straight on the controller's database, like ``jetfleet db upgrade``: that is how
the first admin token is made when ``jetfleet serve``'s own ``admin-token`` file is not at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from controller.auth.policy import ROLES
from controller.auth.tokens import parse_duration
from controller.cli.operator import api_options, call_api
from controller.cli.render import ago, emit_json, table
from controller.errors import ControllerError
from controller.settings import default_data_dir, default_db_url

if TYPE_CHECKING:  # the database modules load only when --db/--data-dir is used
    from controller.auth.service import AccessControl

F = TypeVar("F", bound=Callable[..., Any])


def db_options(func: F) -> F:
    """``--db`` / ``--data-dir``: act on the database directly instead of through the API."""
    func = click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Work on the SQLite file in this data dir directly (like --db).",
    )(func)
    return click.option(
        "--db",
        "db_url",
        metavar="URL",
        help="Work on this database directly (server side, no API token needed).",
    )(func)


@contextmanager
def local_access(db_url: str | None, data_dir: Path | None) -> Iterator[AccessControl]:
    """The token service over the database itself; refuses an old schema."""
    from controller.auth.service import AccessControl
    from controller.db import migrate
    from controller.db.session import make_engine, redact
    from controller.db.token_store import TokenStore

    url = db_url or default_db_url(data_dir or default_data_dir())
    try:
        if not migrate.is_up_to_date(url):
            raise click.ClickException(
                f"database {redact(url)} is not at this version's schema: run "
                f"`jetfleet db upgrade --db {redact(url)}` first"
            )
        engine = make_engine(url)
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield AccessControl(TokenStore(engine))
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        engine.dispose()


def _local(db_url: str | None, data_dir: Path | None) -> bool:
    return db_url is not None or data_dir is not None


def _json_ready(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in record.items()}


def _state(t: dict[str, Any]) -> str:
    if t.get("revoked_at"):
        return "revoked"
    expires = t.get("expires_at")
    if expires:
        when = datetime.fromisoformat(str(expires).replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        if when <= datetime.now(timezone.utc):
            return "expired"
    return "active"


@click.group()
def tokens() -> None:
    """API tokens: roles viewer < operator < admin, and device (one gateway)."""


@tokens.command("create")
@click.option("--name", required=True, help="Who or what uses it (e.g. alice, ci-deployer).")
@click.option("--role", required=True, type=click.Choice(ROLES), help="What it may do.")
@click.option("--expires", metavar="DURATION", help="Lifetime, e.g. 30d, 12h (default: never).")
@click.option("--device", "device_id", metavar="ID", help="The device a device token speaks for.")
@db_options
@api_options
def tokens_create(
    name: str,
    role: str,
    expires: str | None,
    device_id: str | None,
    db_url: str | None,
    data_dir: Path | None,
    url: str,
    as_json: bool,
) -> None:
    """Create a token; its secret is printed this once."""
    try:
        lifetime = parse_duration(expires) if expires else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--expires") from exc
    if _local(db_url, data_dir):
        with local_access(db_url, data_dir) as access:
            created = access.create(
                name, role, device_id=device_id, expires_in=lifetime, created_by="jetfleet tokens"
            )
            out = _json_ready({**created.record.as_json(), "token": created.token})
    else:
        body: dict[str, Any] = {"name": name, "role": role, "device_id": device_id}
        if lifetime is not None:
            body["expires_in_s"] = lifetime.total_seconds()
        out = call_api(lambda c: c.create_token(body), url)
    if as_json:
        emit_json(out)
        return
    expiry = f"expires {out['expires_at'][:19]}" if out.get("expires_at") else "never expires"
    bound = f", device {out['device_id']}" if out.get("device_id") else ""
    click.echo(f"created token {out['id']} {out['name']!r} (role {out['role']}{bound}, {expiry})")
    click.echo(out["token"])
    click.echo("Keep it now: the secret is not shown again.", err=True)


@tokens.command("list")
@db_options
@api_options
def tokens_list(db_url: str | None, data_dir: Path | None, url: str, as_json: bool) -> None:
    """List tokens (never their secrets)."""
    if _local(db_url, data_dir):
        with local_access(db_url, data_dir) as access:
            out = [_json_ready(t.as_json()) for t in access.tokens()]
    else:
        out = call_api(lambda c: c.tokens(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            t["id"],
            t["name"],
            t["role"],
            t["device_id"],
            _state(t),
            str(t["created_at"])[:19],
            str(t["expires_at"])[:19] if t["expires_at"] else None,
            ago(t["last_used_at"]) or "never",
        )
        for t in out
    ]
    headers = ["id", "name", "role", "device", "state", "created", "expires", "last used"]
    click.echo(table(headers, rows))


@tokens.command("revoke")
@click.argument("token_id")
@db_options
@api_options
def tokens_revoke(
    token_id: str, db_url: str | None, data_dir: Path | None, url: str, as_json: bool
) -> None:
    """Revoke token TOKEN_ID (see `jetfleet tokens list`); it stops working at once."""
    if _local(db_url, data_dir):
        with local_access(db_url, data_dir) as access:
            out = _json_ready(access.revoke(token_id).as_json())
    else:
        out = call_api(lambda c: c.revoke_token(token_id), url)
    if as_json:
        emit_json(out)
        return
    click.echo(f"revoked token {out['id']} {out['name']!r} (role {out['role']})")


def parse_since(text: str, now: datetime) -> datetime:
    """``1h``/``30m``/``7d`` ago, or an ISO 8601 time (UTC when it has no offset)."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: give a duration (1h, 30m, 7d) or a time (2026-01-31T08:00)",
            param_hint="--since",
        ) from exc
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@click.command()
@click.option("--since", metavar="WHEN", help="Only since then: 1h, 30m, 7d or an ISO time.")
@click.option("--actor", metavar="NAME", help="Only this token name.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@api_options
def audit(since: str | None, actor: str | None, limit: int, url: str, as_json: bool) -> None:
    """Who changed what: every mutating API request, newest first (needs an admin token)."""
    params: dict[str, Any] = {"limit": limit}
    if since:
        params["since"] = parse_since(since, datetime.now(timezone.utc)).isoformat()
    if actor:
        params["actor"] = actor
    out = call_api(lambda c: c.audit(params), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (str(e["at"])[:19], e["actor"], e["role"], e["action"], e["target"], e["status"])
        for e in out
    ]
    click.echo(table(["time", "actor", "role", "action", "target", "status"], rows))
