"""``jetfleet keys``: the fleet's signing key (run on the controller's host, like ``jetfleet db``).

The private key is a file in the data directory and the public keys are in the database, so
these commands take ``--db`` and ``--data-dir`` rather than the API URL. A running controller
reads the active key from the database whenever it signs: a rotation takes effect at once, and
its desired documents are republished with the new signatures within minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from controller.cli.render import emit_json, table
from controller.errors import ControllerError
from controller.settings import DATA_DIR_ENV, default_data_dir, default_db_url

if TYPE_CHECKING:
    from controller.db.signing_store import KeyRecord
    from controller.trust.signing import FleetSigner

DB_OPTION = click.option(
    "--db", "db_url", metavar="URL", help="SQLAlchemy URL [default: SQLite in the data dir]."
)
DATA_DIR_OPTION = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=DATA_DIR_ENV,
    help=f"Where the private keys (keys/) live [default: ${DATA_DIR_ENV} or ./.jetfleet].",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("keys")
def keys() -> None:
    """The fleet's ed25519 signing key: create, show, rotate."""


@keys.command("init")
@DB_OPTION
@DATA_DIR_OPTION
@JSON_OPTION
def init(db_url: str | None, data_dir: Path | None, as_json: bool) -> None:
    """Create the fleet's signing key (says which one exists when there is one already)."""
    with _signer(db_url, data_dir) as signer:
        key, created = signer.ensure_key()
    if as_json:
        emit_json({**_key_json(key), "created": created})
    elif created:
        click.echo(f"created fleet signing key {key.key_id} (private key in {signer.keys_dir})")
    else:
        click.echo(
            f"the fleet already has signing key {key.key_id} (created "
            f"{key.created_at.isoformat(timespec='seconds')}); `jetfleet keys rotate` replaces it"
        )


@keys.command("show")
@DB_OPTION
@DATA_DIR_OPTION
@JSON_OPTION
def show(db_url: str | None, data_dir: Path | None, as_json: bool) -> None:
    """List the fleet's keys: the active one and those rotations retired."""
    with _signer(db_url, data_dir) as signer:
        found = signer.keys()
    if as_json:
        emit_json([_key_json(k) for k in found])
        return
    if not found:
        click.echo("the fleet has no signing key yet: run `jetfleet keys init`")
        return
    rows = [
        (
            k.key_id,
            "retired" if k.retired_at else "active",
            k.created_at.isoformat(timespec="seconds"),
            k.retired_at.isoformat(timespec="seconds") if k.retired_at else None,
            (k.endorsement or {}).get("endorsed_by"),
            k.public_key,
        )
        for k in found
    ]
    click.echo(table(["key id", "state", "created", "retired", "endorsed by", "public key"], rows))


@keys.command("rotate")
@DB_OPTION
@DATA_DIR_OPTION
@JSON_OPTION
def rotate(db_url: str | None, data_dir: Path | None, as_json: bool) -> None:
    """Replace the active key with a new one that the old key endorses (signs)."""
    with _signer(db_url, data_dir) as signer:
        new, old = signer.rotate()
    if as_json:
        emit_json({"active": _key_json(new), "retired": _key_json(old)})
        return
    click.echo(
        f"fleet signing key {new.key_id} replaces {old.key_id} (endorsed by it); agents follow "
        "the rotation with their next desired document"
    )


@contextmanager
def _signer(db_url: str | None, data_dir: Path | None) -> Iterator[FleetSigner]:
    """The fleet signer on the database; controller errors become one-line CLI errors."""
    from controller.db import migrate
    from controller.db.session import make_engine, redact
    from controller.db.signing_store import SigningStore
    from controller.trust.signing import FleetSigner

    data = data_dir or default_data_dir()
    url = db_url or default_db_url(data)
    try:
        if not migrate.is_up_to_date(url):
            raise click.ClickException(
                f"database {redact(url)} is not at this controller's schema: run "
                f"`jetfleet db upgrade --db {redact(url)}` first"
            )
        engine = make_engine(url)
        try:
            yield FleetSigner(SigningStore(engine), data)
        finally:
            engine.dispose()
    except ControllerError as exc:
        raise click.ClickException(str(exc)) from exc


def _key_json(key: KeyRecord) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "public_key": key.public_key,
        "created_at": key.created_at.isoformat(),
        "retired_at": key.retired_at.isoformat() if key.retired_at else None,
        "endorsement": key.endorsement,
    }
