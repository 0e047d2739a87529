"""The controller's signing key on each real database: ``jetfleet keys`` and the signer's reuse
and re-signing of stored manifests."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.trust.signatures import verify
from controller.cli.main import cli
from controller.db import migrate
from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.db.session import make_engine
from controller.db.signing_store import SigningStore
from controller.fleet.desired import PlannedSlot, plan_deploy
from controller.trust.key_files import SigningError
from controller.trust.signing import FleetSigner
from shared.delegate import DelegateConfig
from shared.manifests import KeyEndorsement

SHA = "c" * 64


def keys_cli(db_url: str, data_dir: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["keys", *args, "--db", db_url, "--data-dir", str(data_dir)], catch_exceptions=False
    )
    return result.exit_code, result.output


def test_keys_init_show_and_rotate(db_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    migrate.upgrade(db_url)

    code, out = keys_cli(db_url, data, "init", "--json")
    assert code == 0, out
    created = json.loads(out)
    assert created["created"] is True
    key_file = data / "keys" / f"{created['key_id']}.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700

    code, out = keys_cli(db_url, data, "init")
    assert code == 0
    assert f"already has signing key {created['key_id']}" in out

    code, out = keys_cli(db_url, data, "rotate", "--json")
    assert code == 0, out
    rotated = json.loads(out)
    assert rotated["retired"]["key_id"] == created["key_id"]
    assert rotated["retired"]["retired_at"] is not None
    endorsement = KeyEndorsement.model_validate(rotated["active"]["endorsement"])
    assert endorsement.key_id == rotated["active"]["key_id"]
    assert endorsement.endorsed_by == created["key_id"]
    assert verify(created["public_key"], endorsement.payload(), endorsement.signature)

    code, out = keys_cli(db_url, data, "show", "--json")
    assert code == 0
    assert [(k["key_id"], k["retired_at"] is None) for k in json.loads(out)] == [
        (created["key_id"], False),
        (rotated["active"]["key_id"], True),
    ]
    code, out = keys_cli(db_url, data, "show")
    assert out.splitlines()[0].split()[:3] == ["KEY", "ID", "STATE"]
    assert "active" in out
    assert "retired" in out


def test_keys_refuse_an_unmigrated_database_in_one_line(sqlite_url: str, tmp_path: Path) -> None:
    code, out = keys_cli(sqlite_url, tmp_path, "init")
    assert code == 1
    assert "run `jetfleet db upgrade --db" in out
    assert len(out.strip().splitlines()) == 1


def slot(repo: Repository, version: str) -> PlannedSlot:
    record = repo.find_version("detector", version)
    if record is None:
        record = repo.add_version("detector", version, SHA, 10, [], [])
    return PlannedSlot(
        name="detector",
        version=version,
        sha256=record.sha256,
        size=record.size,
        delegate=DelegateConfig(),
        model_version_id=record.id,
    )


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def signer(db_url: str, tmp_path: Path) -> Iterator[tuple[FleetSigner, Repository, Clock]]:
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    clock = Clock()
    made = FleetSigner(SigningStore(engine), tmp_path / "data", clock=clock)
    made.ensure_key()
    yield made, Repository(engine), clock
    engine.dispose()


def test_manifests_are_reused_until_half_their_validity_is_left_or_the_key_rotates(
    signer: tuple[FleetSigner, Repository, Clock],
) -> None:
    fleet, repo, clock = signer
    v1 = slot(repo, "1")
    first = fleet.model_manifests([v1])[v1.model_version_id]
    assert first.manifest.serial == v1.model_version_id
    clock.now += timedelta(days=14)
    assert fleet.model_manifests([v1])[v1.model_version_id] == first
    clock.now += timedelta(days=2)
    again = fleet.model_manifests([v1])[v1.model_version_id]
    assert again.manifest.created == clock.now.replace(microsecond=0)
    assert again.manifest.expires == again.manifest.created + timedelta(days=30)

    new, _ = fleet.rotate()
    rotated = fleet.model_manifests([v1])[v1.model_version_id]
    assert rotated.manifest.key_id == new.key_id


def test_documents_authorise_rollbacks_only_below_the_newest_version(
    signer: tuple[FleetSigner, Repository, Clock],
) -> None:
    fleet, repo, _ = signer
    v1, v2 = slot(repo, "1"), slot(repo, "2")
    docs = fleet.documents([("gw-old", 4, (v1,)), ("gw-new", 7, (v2,))])
    old, new = docs["gw-old"], docs["gw-new"]
    assert set(old.rollbacks) == {"detector"}
    auth = old.rollbacks["detector"]
    assert (auth.device_id, auth.version, auth.serial, auth.generation) == (
        "gw-old",
        "1",
        v1.model_version_id,
        4,
    )
    assert new.rollbacks == {}
    assert new.manifests[v2.model_version_id].manifest.version == "2"


def test_stale_says_when_deployed_manifests_need_signing_again(
    signer: tuple[FleetSigner, Repository, Clock],
) -> None:
    fleet, repo, clock = signer
    v1 = slot(repo, "1")
    repo.record_contact("gw-1", utcnow())
    repo.change_slots(["gw-1"], lambda current: plan_deploy(current, v1))
    assert fleet.stale(), "never signed"
    fleet.model_manifests([v1])
    assert not fleet.stale()
    clock.now += timedelta(days=16)
    assert fleet.stale(), "less than half of its validity left"
    fleet.model_manifests([v1])
    assert not fleet.stale()
    fleet.rotate()
    assert fleet.stale(), "signed by the retired key"


def test_a_missing_or_replaced_private_key_is_a_clear_error(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    store = SigningStore(engine)
    key, _ = FleetSigner(store, tmp_path / "a").ensure_key()
    with pytest.raises(SigningError, match="is not at"):
        FleetSigner(store, tmp_path / "b").sign_manifest("model", "m", "1", 1, SHA, 1)
    stranger = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp_path / "a" / "keys" / f"{key.key_id}.key").write_bytes(stranger)
    with pytest.raises(SigningError, match="does not hold the private half"):
        FleetSigner(store, tmp_path / "a").sign_manifest("model", "m", "1", 1, SHA, 1)
    engine.dispose()
