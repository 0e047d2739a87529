"""Migrations on SQLite and PostgreSQL match the models; serve refuses an un-migrated database."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from sqlalchemy import text

from controller.cli.main import cli
from controller.db import migrate
from controller.db.schema import Base
from controller.db.session import make_engine
from controller.errors import DatabaseError
from controller.server import Controller
from controller.settings import Settings
from shared.facts import DeviceFacts


def test_upgrade_reaches_head_and_is_repeatable(db_url: str) -> None:
    assert not migrate.is_up_to_date(db_url)
    migrate.upgrade(db_url)
    assert migrate.is_up_to_date(db_url)
    migrate.upgrade(db_url)
    assert migrate.current_revision(db_url) == migrate.head_revision()


def test_migrations_match_the_models(db_url: str) -> None:
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_db_upgrade_command(db_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["db", "upgrade", "--db", db_url])
    assert first.exit_code == 0, first.output
    assert "upgraded from empty to" in first.output
    again = runner.invoke(cli, ["db", "upgrade", "--db", db_url])
    assert again.exit_code == 0
    assert "up to date" in again.output


def test_db_upgrade_of_unreachable_database_is_one_line() -> None:
    result = CliRunner().invoke(
        cli, ["db", "upgrade", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none"]
    )
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot read database")
    assert result.output.count("\n") == 1


def test_serve_refuses_unmigrated_database(tmp_path: Path, sqlite_url: str) -> None:
    settings = Settings(
        db_url=sqlite_url, broker_url="mqtt://127.0.0.1:1", data_dir=tmp_path, http_port=0
    )
    with pytest.raises(DatabaseError, match=r"jetfleet db upgrade --db sqlite:///"):
        Controller(settings).start()
    result = CliRunner().invoke(cli, ["serve", "--db", sqlite_url, "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "jetfleet db upgrade --db" in result.output


def test_0002_keeps_existing_versions_and_deployments(db_url: str) -> None:
    command.upgrade(migrate.alembic_config(db_url), "0001")
    engine = make_engine(db_url)
    now = "2026-01-01 00:00:00"
    try:
        with engine.begin() as conn:
            conn.execute(text(f"INSERT INTO artifacts VALUES ('{'a' * 64}', 10, '{now}')"))
            conn.execute(text(f"INSERT INTO models VALUES ('m', '{now}')"))
            conn.execute(
                text(
                    "INSERT INTO model_versions (model, version, sha256, inputs, outputs, "
                    f"created_at) VALUES ('m', '1', '{'a' * 64}', '[]', '[]', '{now}')"
                )
            )
        migrate.upgrade(db_url)
        with engine.connect() as conn:
            row = conn.execute(text("SELECT has_qdq FROM model_versions")).one()
            assert row[0] in (False, 0)
        command.downgrade(migrate.alembic_config(db_url), "0001")
        assert migrate.current_revision(db_url) == "0001"
    finally:
        engine.dispose()


def test_0012_pins_each_device_to_the_class_of_its_stored_facts(db_url: str) -> None:
    """Devices known before 0012 may upload only for the class they are now."""
    command.upgrade(migrate.alembic_config(db_url), "0011")
    engine = make_engine(db_url)
    facts = DeviceFacts(hostname="gw", os="Debian 12", arch="aarch64")
    try:
        with engine.begin() as conn:
            insert = text(
                "INSERT INTO devices (id, labels, online, desired_generation, facts, "
                "reported_slots, created_at) VALUES (:id, '{}', false, 0, :facts, '[]', "
                "'2026-01-01 00:00:00')"
            )
            conn.execute(insert, {"id": "gw-1", "facts": facts.model_dump_json(by_alias=True)})
            conn.execute(insert, {"id": "gw-silent", "facts": None})
        migrate.upgrade(db_url)
        with engine.connect() as conn:
            rows = dict(conn.execute(text("SELECT id, pinned_class FROM devices")).all())
        assert rows == {"gw-1": "cpu-aarch64", "gw-silent": None}
        command.downgrade(migrate.alembic_config(db_url), "0011")
    finally:
        engine.dispose()
