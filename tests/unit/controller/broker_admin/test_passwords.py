"""Broker password hashes in Mosquitto 2.0's dynamic security format."""

from __future__ import annotations

from controller.broker_admin.passwords import (
    PasswordHash,
    hash_password,
    new_password,
    verify_password,
)

# Written by `mosquitto_ctrl dynsec init file admin secretpw` (Mosquitto 2.0.11).
MOSQUITTO_CTRL = PasswordHash(
    password="jaf2/xLMMCDgxtxN56CuhDB1Wcv8KpcpQwPauXkfibcROGknpMvtIyGsoukPMczZgX3bnRK/tHgHC+Cr+GPAPQ==",
    salt="KWYfCYrBApQGkHq6",
    iterations=101,
)


def test_a_hash_written_by_mosquitto_ctrl_verifies() -> None:
    assert verify_password("secretpw", MOSQUITTO_CTRL)
    assert not verify_password("secretpW", MOSQUITTO_CTRL)


def test_hash_round_trip_through_the_database_form() -> None:
    password = new_password()
    stored = PasswordHash.decode(hash_password(password).encode())
    assert verify_password(password, stored)
    assert not verify_password(password + "x", stored)


def test_every_hash_has_its_own_salt() -> None:
    assert hash_password("same").salt != hash_password("same").salt


def test_a_mangled_hash_never_verifies() -> None:
    assert not verify_password("secretpw", PasswordHash("!!!", MOSQUITTO_CTRL.salt, 101))
