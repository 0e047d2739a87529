"""An enrolment token not bound to a device cannot take over an enrolled one: it used to hand out a
new identity for any device id, locking the real gateway out of the API and the broker. Against
Mosquitto (dynamic security) and the embedded broker."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured

PeerFactory = Callable[[str | None, str | None], Peer]


def _token(secured: Secured, **body: object) -> str:
    created = secured.api.post("/api/v1/enrol-tokens", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["token"])


def _enrol(secured: Secured, token: str, device_id: str | None) -> httpx.Response:
    return secured.api.post(
        "/api/v1/enroll",
        json={"token": token, "device_id": device_id},
        headers={"Authorization": ""},
    )


def _whoami(secured: Secured, api_token: str) -> int:
    answer = secured.api.get("/api/v1/whoami", headers={"Authorization": f"Bearer {api_token}"})
    return answer.status_code


def test_an_unbound_token_cannot_take_an_enrolled_device_but_a_bound_one_re_enrols_it(
    secured: Secured, peer: PeerFactory
) -> None:
    victim = secured.enrol("gw-a")
    connected = peer(victim["broker_username"], victim["broker_password"])
    assert str(connected.connect()) == "Success"
    before = secured.api.get("/api/v1/identities").json()

    unbound = _token(secured)
    taken = _enrol(secured, unbound, "gw-a")

    assert taken.status_code == 409, taken.text
    detail = taken.json()["detail"]
    assert "jetfleet devices revoke gw-a" in detail
    assert "jetfleet devices enroll-token --device gw-a" in detail
    assert secured.api.get("/api/v1/identities").json() == before
    assert _whoami(secured, victim["api_token"]) == 200
    connected.close()  # one connection per device: the broker binds its client id
    again = peer(victim["broker_username"], victim["broker_password"])
    assert str(again.connect()) == "Success"
    assert _enrol(secured, unbound, "gw-b").status_code == 200  # the refusal did not use it up

    bound = _token(secured, device_id="gw-a")
    reenrolled = _enrol(secured, bound, "gw-a")
    assert reenrolled.status_code == 200, reenrolled.text
    fresh = reenrolled.json()
    assert _whoami(secured, victim["api_token"]) == 401
    assert _whoami(secured, fresh["api_token"]) == 200
    assert str(peer(victim["broker_username"], victim["broker_password"]).connect()) in (
        REFUSED_LOGIN
    )
    assert str(peer(fresh["broker_username"], fresh["broker_password"]).connect()) == "Success"


def test_a_revoked_device_can_enrol_again_with_an_unbound_token(secured: Secured) -> None:
    old = secured.enrol("gw-r")
    unbound = _token(secured)
    assert _enrol(secured, unbound, "gw-r").status_code == 409
    assert secured.api.post("/api/v1/devices/gw-r/revoke").status_code == 200

    answer = _enrol(secured, unbound, "gw-r")

    assert answer.status_code == 200, answer.text
    assert _whoami(secured, answer.json()["api_token"]) == 200
    assert _whoami(secured, old["api_token"]) == 401


def test_a_device_cannot_pick_an_id_that_reads_as_an_enrolled_ones(secured: Secured) -> None:
    """``GW-02`` and ``gw-02.`` were enrolled beside ``gw-02``; an operator reading a
    list or a log takes one for the other."""
    secured.enrol("gw-02")
    for lookalike in ("GW-02", "gw-02.", "Gw-02_"):
        answer = _enrol(secured, _token(secured), lookalike)
        assert answer.status_code == 409, answer.text
        assert "looks like enrolled device 'gw-02'" in answer.json()["detail"]
    assert _enrol(secured, _token(secured), "gw-020").status_code == 200  # a distinct id
    ids = sorted(i["device_id"] for i in secured.api.get("/api/v1/identities").json())
    assert ids == ["gw-02", "gw-020"]
