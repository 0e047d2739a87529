"""``POST /api/v1/enroll`` refuses what it must, in one line: reused, expired, unknown and
foreign tokens, and too many attempts from one address."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from controller.db.schema import utcnow
from tests.integration.security_broker.conftest import Secured

pytestmark = pytest.mark.parametrize("secured", ["embedded"], indirect=True)


def _token(secured: Secured, **body: object) -> str:
    created = secured.api.post("/api/v1/enrol-tokens", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["token"])


def _enrol(secured: Secured, token: str, device_id: str | None) -> tuple[int, dict[str, object]]:
    answer = secured.api.post(
        "/api/v1/enroll",
        json={"token": token, "device_id": device_id},
        headers={"Authorization": ""},
    )
    return answer.status_code, answer.json()


def test_enrolment_needs_no_api_token_and_gives_the_identity(secured: Secured) -> None:
    token = _token(secured, labels={"site": "line-1"})
    status, identity = _enrol(secured, token, "gw-1")
    assert status == 200
    assert identity["device_id"] == "gw-1"
    assert identity["broker_username"] == "dev-gw-1"
    assert identity["labels"] == {"site": "line-1"}
    assert identity["topic_prefix"] == secured.topics.prefix
    fleet_key = identity["fleet_key"]
    assert isinstance(fleet_key, dict)
    assert set(fleet_key) == {"key_id", "public_key"}
    listed = secured.api.get("/api/v1/identities").json()
    assert [(i["device_id"], i["revoked_at"]) for i in listed] == [("gw-1", None)]
    assert "broker_password" not in listed[0]


def test_a_used_token_is_refused(secured: Secured) -> None:
    token = _token(secured)
    assert _enrol(secured, token, "gw-1")[0] == 200
    status, body = _enrol(secured, token, "gw-2")
    assert status == 410
    assert "already used by gw-1" in str(body["detail"])
    assert [i["device_id"] for i in secured.api.get("/api/v1/identities").json()] == ["gw-1"]


def test_an_expired_token_is_refused(secured: Secured) -> None:
    services = secured.controller.services
    assert services is not None
    assert services.enrolment is not None
    secret = "s" * 43
    now = utcnow()
    services.enrolment.store.add_enrol_token(
        "0123456789ab",
        hashlib.sha256(secret.encode()).hexdigest(),
        labels={},
        device_id=None,
        created_by="test",
        now=now - timedelta(days=2),
        expires_at=now - timedelta(days=1),
    )
    status, body = _enrol(secured, f"jfe_0123456789ab.{secret}", "gw-1")
    assert status == 410
    assert "expired at" in str(body["detail"])


def test_unknown_and_malformed_tokens_are_refused(secured: Secured) -> None:
    token = _token(secured)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert _enrol(secured, forged, "gw-1") == (
        401,
        {"detail": f"unknown enrolment token {token[4:16]}"},
    )
    status, body = _enrol(secured, "hello", "gw-1")
    assert status == 401
    assert "expected jfe_<id>.<secret>" in str(body["detail"])
    assert _enrol(secured, token, "gw-1")[0] == 200  # the real one still works


def test_a_token_for_one_device_enrols_only_that_device(secured: Secured) -> None:
    token = _token(secured, device_id="gw-9")
    status, body = _enrol(secured, token, "gw-8")
    assert status == 403
    assert "is for device 'gw-9'" in str(body["detail"])
    status, identity = _enrol(secured, token, None)
    assert status == 200
    assert identity["device_id"] == "gw-9"


def test_a_bad_device_id_is_refused_and_the_token_stays_usable(secured: Secured) -> None:
    token = _token(secured)
    status, body = _enrol(secured, token, "bad/id")
    assert status == 400
    assert "invalid device id" in str(body["detail"])
    assert _enrol(secured, token, "gw-ok")[0] == 200


def test_too_many_attempts_from_one_address_get_429(secured: Secured) -> None:
    statuses = []
    for _ in range(30):
        answer = secured.api.post("/api/v1/enroll", json={"token": "jfe_nope", "device_id": "x"})
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            assert int(answer.headers["retry-after"]) >= 1
            assert "too many enrolment attempts" in answer.json()["detail"]
            break
    assert statuses[:10] == [401] * 10
    assert statuses[-1] == 429
    audit = secured.api.get("/api/v1/audit", params={"limit": 100}).json()
    refused = [a for a in audit if a["action"] == "POST /api/v1/enroll"]
    assert {a["status"] for a in refused} >= {401, 429}


def test_labels_are_checked_where_the_token_is_made(secured: Secured) -> None:
    bad = secured.api.post("/api/v1/enrol-tokens", json={"labels": {"a,b": "x"}})
    assert bad.status_code == 400
    assert "label key 'a,b'" in bad.json()["detail"]
    too_long = secured.api.post("/api/v1/enrol-tokens", json={"expires_in_s": 31 * 86400})
    assert too_long.status_code == 422
