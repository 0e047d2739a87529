"""The agent's trust file: pinned at enrolment, kept across restarts, damaged files refused."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agent.errors import StartupError
from agent.trust.store import TrustStore
from tests.signing_keys import new_key


def enrol(state: Path, key_id: str | None, public_key: str | None) -> None:
    state.mkdir(parents=True, exist_ok=True)
    fleet_key = None if key_id is None else {"key_id": key_id, "public_key": public_key}
    (state / "identity.json").write_text(json.dumps({"device_id": "gw-1", "fleet_key": fleet_key}))


def test_an_agent_never_enrolled_pins_nothing_and_writes_nothing(tmp_path: Path) -> None:
    store = TrustStore.open(tmp_path)
    assert not store.pinned
    assert not (tmp_path / "trust.json").exists()
    enrol(tmp_path, None, None)
    assert not TrustStore.open(tmp_path).pinned, "enrolled before the fleet had a key"


def test_the_enrolment_key_is_pinned_and_kept(tmp_path: Path) -> None:
    key = new_key()
    enrol(tmp_path, key.key_id, key.public)
    store = TrustStore.open(tmp_path)
    active = store.active_key()
    assert active is not None
    assert (active.key_id, active.source) == (key.key_id, "enrolment")
    store.record_install("detector", "2", 7, 12, "a" * 64)
    (tmp_path / "identity.json").unlink()
    again = TrustStore.open(tmp_path)
    assert again.pinned
    installed = again.installed("detector")
    assert installed is not None
    assert (installed.serial, installed.generation) == (7, 12)
    assert stat.S_IMODE((tmp_path / "trust.json").stat().st_mode) & 0o022 == 0


def test_re_enrolment_with_another_key_pins_it_and_keeps_the_installed_serials(
    tmp_path: Path,
) -> None:
    first, second = new_key(), new_key()
    enrol(tmp_path, first.key_id, first.public)
    TrustStore.open(tmp_path).record_install("detector", "2", 7, 12, "a" * 64)
    enrol(tmp_path, second.key_id, second.public)
    store = TrustStore.open(tmp_path)
    active = store.active_key()
    assert active is not None
    assert active.key_id == second.key_id
    old = store.key(first.key_id)
    assert old is not None
    assert old.retired_at is not None
    assert store.installed("detector") is not None


def test_following_a_rotation_retires_the_endorsing_key(tmp_path: Path) -> None:
    first, second = new_key(), new_key()
    store = TrustStore.open(tmp_path)
    store.pin(first.key_id, first.public)
    store.adopt(first.endorse(second))
    reopened = TrustStore.open(tmp_path)
    active = reopened.active_key()
    assert active is not None
    assert (active.key_id, active.source) == (second.key_id, "endorsement")
    assert reopened.known_key_ids() == {first.key_id, second.key_id}


def test_a_key_whose_id_is_not_its_own_is_not_pinned(tmp_path: Path) -> None:
    key, other = new_key(), new_key()
    with pytest.raises(ValueError, match="is not the id of that public key"):
        TrustStore.open(tmp_path).pin(other.key_id, key.public)
    enrol(tmp_path, other.key_id, key.public)
    with pytest.raises(StartupError, match="fleet_key is invalid"):
        TrustStore.open(tmp_path)


def test_a_damaged_trust_file_stops_the_agent_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "trust.json").write_text('{"schema": "jetfleet/trust/1", "keys": [')
    with pytest.raises(StartupError) as failed:
        TrustStore.open(tmp_path)
    message = str(failed.value)
    assert str(tmp_path / "trust.json") in message
    assert "re-enrol" in message
