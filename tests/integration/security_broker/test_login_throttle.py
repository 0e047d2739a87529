"""Wrong-password logins to the embedded broker were unthrottled (274 a second, a
PBKDF2 hash each, both cores busy). Against the embedded broker (Mosquitto has its own
behaviour; put a firewall limit in front of it): after five failures of one user name from one
address, that pair is refused without checking for a minute, even with the right password,
while the same device from another address logs in. Real broker, real paho clients."""

from __future__ import annotations

import logging

import pytest

from controller.broker_admin.login_throttle import PER_USER
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured


@pytest.mark.parametrize("secured", ["embedded"], indirect=True)
def test_a_guessed_user_is_locked_at_its_address_and_logs_in_from_another(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = secured.enrol("gw-guessed")
    user, password = gateway["broker_username"], gateway["broker_password"]

    with caplog.at_level(logging.WARNING, logger="controller.broker_admin.embedded"):
        for _ in range(PER_USER):
            guess = Peer(secured.broker_url, user, "wrong-" + password[:8])
            assert str(guess.connect()) in REFUSED_LOGIN
            guess.close()
        right_but_locked = Peer(secured.broker_url, user, password)
        assert str(right_but_locked.connect()) in REFUSED_LOGIN
        right_but_locked.close()

    assert any("failed too often" in r.getMessage() for r in caplog.records)
    elsewhere = Peer(secured.broker_url, user, password, bind_address="127.0.0.2")
    assert str(elsewhere.connect()) == "Success"
    elsewhere.close()
