"""Failed broker logins lock their (address, user) and address keys for a while (a probe's 274
wrong-password logins a second, each a PBKDF2 hash, kept both cores busy); unknown user names
cost the same hash as known ones (the answer's time told which device ids exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.broker_admin import startup
from controller.broker_admin.login_throttle import LoginThrottle
from controller.broker_admin.passwords import PasswordHash, hash_password, verify_password
from controller.db.identity_store import IdentityStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_user_is_locked_after_its_failures_and_free_again_after_the_lock() -> None:
    clock = Clock()
    throttle = LoginThrottle(per_user=3, per_address=100, window_s=60, lock_s=30, clock=clock)
    assert [throttle.failed("10.0.0.9", "dev-a") for _ in range(3)] == [False, False, True]
    assert throttle.locked("10.0.0.9", "dev-a")
    assert not throttle.locked("10.0.0.8", "dev-a")  # the device itself, elsewhere
    assert not throttle.locked("10.0.0.9", "dev-b")
    clock.now += 31
    assert not throttle.locked("10.0.0.9", "dev-a")


def test_failures_outside_the_window_do_not_add_up() -> None:
    clock = Clock()
    throttle = LoginThrottle(per_user=3, per_address=100, window_s=60, lock_s=30, clock=clock)
    for _ in range(5):
        throttle.failed("10.0.0.9", "dev-a")
        clock.now += 40
    assert not throttle.locked("10.0.0.9", "dev-a")


def test_an_address_trying_many_names_is_locked_for_all_of_them() -> None:
    throttle = LoginThrottle(per_user=3, per_address=10, clock=Clock())
    for number in range(10):
        throttle.failed("10.0.0.9", f"dev-{number}")
    assert throttle.locked("10.0.0.9", "dev-new")
    assert not throttle.locked("10.0.0.7", "dev-new")


def test_a_success_clears_its_users_failures() -> None:
    throttle = LoginThrottle(per_user=3, per_address=100, clock=Clock())
    throttle.failed("10.0.0.9", "dev-a")
    throttle.failed("10.0.0.9", "dev-a")
    throttle.succeeded("10.0.0.9", "dev-a")
    assert not throttle.failed("10.0.0.9", "dev-a")
    assert not throttle.locked("10.0.0.9", "dev-a")


def test_unknown_and_known_user_names_cost_one_hash_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.db import migrate
    from controller.db.session import make_engine

    url = f"sqlite:///{tmp_path}/ids.db"
    migrate.upgrade(url)
    store = IdentityStore(make_engine(url))
    hashed: list[PasswordHash] = []

    def counting(password: str, stored: PasswordHash) -> bool:
        hashed.append(stored)
        return verify_password(password, stored)

    monkeypatch.setattr(startup, "verify_password", counting)
    assert not startup.check_device_login(store, "dev-nobody", "guess")
    assert not startup.check_device_login(store, "not-a-device-name", "guess")
    assert len(hashed) == 2
    assert all(h.iterations == hash_password("x").iterations for h in hashed)
