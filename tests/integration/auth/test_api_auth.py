"""Tokens and roles on a real controller over HTTP: 401, 403, revocation, audit, bootstrap."""

from __future__ import annotations

import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from controller.auth.policy import Role
from controller.auth.tokens import mint
from controller.demo.sample_models import classifier
from controller.server import Controller
from controller.settings import Settings
from tests.integration.controller.conftest import bearer, new_token, start_controller


def client(controller: Controller, token: str | None = None) -> httpx.Client:
    headers = bearer(token) if token else None
    return httpx.Client(base_url=controller.http_url, timeout=10, headers=headers)


def test_no_token_is_401_and_a_viewer_on_a_mutating_endpoint_is_403(
    controller: Controller, api: httpx.Client
) -> None:
    with client(controller) as anonymous:
        for method, path in [
            ("GET", "/api/v1/devices"),
            ("GET", "/metrics"),
            ("PUT", "/api/v1/models/det/versions/1"),
            ("POST", "/api/v1/deployments"),
            ("GET", "/api/v1/no-such-route"),
        ]:
            answer = anonymous.request(method, path)
            assert answer.status_code == 401, (method, path)
            assert "needs an API token" in answer.json()["detail"]
            assert answer.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.get("/healthz").status_code == 200

    viewer = new_token(controller, "vera", "viewer")
    with client(controller, viewer) as as_viewer:
        assert as_viewer.get("/api/v1/devices").status_code == 200
        refused = as_viewer.put("/api/v1/models/det/versions/1", content=classifier())
        assert refused.status_code == 403
        assert refused.json()["detail"] == (
            "PUT /api/v1/models/det/versions/1 needs role operator, token 'vera' has viewer"
        )
        assert as_viewer.post("/api/v1/deployments", json={}).status_code == 403
        assert as_viewer.delete("/api/v1/configs/fast").status_code == 403
        assert as_viewer.get("/api/v1/tokens").status_code == 403
    assert api.get("/api/v1/models").json() == []  # nothing was stored by the refused upload

    operator = new_token(controller, "otto", "operator")
    with client(controller, operator) as as_operator:
        stored = as_operator.put("/api/v1/models/det/versions/1", content=classifier())
        assert stored.status_code == 201, stored.text
        assert as_operator.get("/api/v1/audit").status_code == 403
        assert (
            as_operator.post("/api/v1/tokens", json={"name": "x", "role": "admin"}).status_code
            == 403
        )


def test_bad_revoked_and_expired_tokens_are_401_with_the_reason(
    controller: Controller, api: httpx.Client
) -> None:
    created = api.post("/api/v1/tokens", json={"name": "ci", "role": "operator"})
    assert created.status_code == 201, created.text
    token, token_id = created.json()["token"], created.json()["id"]
    assert token.startswith(f"jf_{token_id}.")
    with client(controller, token) as ci:
        assert ci.get("/api/v1/whoami").json()["name"] == "ci"
        assert api.delete(f"/api/v1/tokens/{token_id}").status_code == 200
        revoked = ci.get("/api/v1/devices")
        assert revoked.status_code == 401
        assert revoked.json()["detail"].startswith(f"API token {token_id} (ci) was revoked at ")

    access = controller.services.access if controller.services else None
    assert access is not None
    minted = mint()
    past = datetime.now(timezone.utc) - timedelta(days=2)
    access.store.create(minted, "old", Role.ADMIN, now=past, expires_at=past + timedelta(days=1))
    with client(controller, minted.wire) as old:
        expired = old.get("/api/v1/devices")
        assert expired.status_code == 401
        assert expired.json()["detail"].startswith(f"API token {minted.id} (old) expired at ")

    forged = minted.wire[:-4] + "AAAA"
    for wire in ("nonsense", forged, "jf_000000000000." + "A" * 43):
        with client(controller, wire) as bad:
            answer = bad.get("/api/v1/devices")
            assert answer.status_code == 401, wire
    listed = {t["id"]: t for t in api.get("/api/v1/tokens").json()}
    assert listed[token_id]["revoked_at"] is not None
    assert "token" not in listed[token_id]
    assert "secret_sha256" not in listed[token_id]


def test_token_creation_refuses_bad_input_in_one_line(api: httpx.Client) -> None:
    cases = [
        ({"name": "gw", "role": "device"}, "needs the device it speaks for"),
        ({"name": "op", "role": "operator", "device_id": "gw-1"}, "only for role device"),
        ({"name": "x", "role": "root"}, "unknown role 'root'"),
        ({"name": "a b", "role": "viewer"}, "token name 'a b'"),
    ]
    for body, message in cases:
        answer = api.post("/api/v1/tokens", json=body)
        assert answer.status_code == 400, body
        assert message in answer.json()["detail"]


def test_every_mutating_request_is_audited_with_who_what_and_outcome(
    controller: Controller, api: httpx.Client
) -> None:
    viewer = new_token(controller, "vera", "viewer")
    with client(controller, viewer) as as_viewer:
        assert as_viewer.put("/api/v1/configs/fast", json={}).status_code == 403
    with client(controller) as anonymous:
        assert anonymous.post("/api/v1/deployments", json={}).status_code == 401
    changed = api.put(
        "/api/v1/configs/fast", json={"scope": "default", "values": {"precision": "fp16"}}
    )
    assert changed.status_code == 200, changed.text
    api.get("/api/v1/configs")  # reads are not audited

    rows = api.get("/api/v1/audit").json()
    assert [(r["actor"], r["role"], r["action"], r["target"], r["status"]) for r in rows] == [
        ("tests-admin", "admin", "PUT /api/v1/configs/{name}", "name=fast", 200),
        ("anonymous", "none", "POST /api/v1/deployments", None, 401),
        ("vera", "viewer", "PUT /api/v1/configs/fast", None, 403),
    ]
    assert rows[2]["detail"]["reason"].endswith("token 'vera' has viewer")
    assert rows[0]["detail"]["client"] == "127.0.0.1"

    only_vera = api.get("/api/v1/audit", params={"actor": "vera"}).json()
    assert [r["status"] for r in only_vera] == [403]
    assert len(api.get("/api/v1/audit", params={"limit": 1}).json()) == 1
    future = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    assert api.get("/api/v1/audit", params={"since": future}).json() == []


def test_dashboard_login_sets_a_strict_http_only_cookie_good_for_reads_only(
    controller: Controller, api: httpx.Client
) -> None:
    viewer = new_token(controller, "wall-screen", "viewer")
    with client(controller) as browser:
        first = browser.get("/dashboard/rollouts")
        assert first.status_code == 303
        assert first.headers["location"] == "/login?next=%2Fdashboard%2Frollouts"
        assert "<form id='login' method='post'" in browser.get(first.headers["location"]).text

        wrong = browser.post("/login", data={"token": "jf_nope", "next": "/dashboard"})
        assert wrong.status_code == 401
        assert "not a Jetfleet API token" in wrong.text
        assert "set-cookie" not in wrong.headers

        ok = browser.post("/login", data={"token": viewer, "next": "/dashboard/rollouts"})
        assert ok.status_code == 303
        assert ok.headers["location"] == "/dashboard/rollouts"
        cookie = ok.headers["set-cookie"]
        assert cookie.startswith(f"jetfleet_token={viewer};")
        assert "HttpOnly" in cookie
        assert "samesite=strict" in cookie.lower()
        assert browser.get("/dashboard/rollouts").status_code == 200
        assert browser.get("/metrics").status_code == 200
        assert browser.get("/api/v1/devices").status_code == 200
        # the cookie never authorizes a change (no cross-site request forgery)
        assert browser.post("/api/v1/deployments", json={}).status_code == 401

        elsewhere = browser.post("/login", data={"token": viewer, "next": "//evil.example/x"})
        assert elsewhere.headers["location"] == "/dashboard"

    gateway = new_token(controller, "gw-1", "device", device_id="gw-1")
    with client(controller) as browser:
        refused = browser.post("/login", data={"token": gateway})
        assert refused.status_code == 403
        assert "set-cookie" not in refused.headers


def test_a_device_token_may_only_fetch_artifacts_and_engines_for_its_own_device(
    controller: Controller, api: httpx.Client
) -> None:
    pushed = api.put("/api/v1/models/det/versions/1", content=classifier()).json()
    gw1 = new_token(controller, "gw-1", "device", device_id="gw-1")
    key = "ab" * 32
    with client(controller, gw1) as device:
        assert device.get(f"/api/v1/artifacts/{pushed['sha256']}").content == classifier()
        assert device.get("/api/v1/devices").status_code == 403
        assert device.get("/dashboard").status_code == 403
        assert device.post("/api/v1/deployments", json={}).status_code == 403
        own = device.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-1"})
        assert own.status_code == 200, own.text
        assert own.json()["granted"]
        other = device.post(f"/api/v1/engines/{key}/lease", json={"device_id": "gw-2"})
        assert other.status_code == 403
        assert other.json()["detail"] == "device token 'gw-1' speaks for device 'gw-1', not 'gw-2'"
        assert device.delete(f"/api/v1/engines/{key}/lease?device_id=gw-2").status_code == 403
        assert device.delete(f"/api/v1/engines/{key}/lease?device_id=gw-1").status_code == 204
        assert device.get("/api/v1/whoami").json()["device_id"] == "gw-1"


def test_serve_creates_an_admin_token_file_once_on_a_database_without_one(
    tmp_path: Path, sqlite_url: str, mosquitto: str
) -> None:
    settings = Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        auto_migrate=True,
    )
    path = tmp_path / "data" / "admin-token"
    first = start_controller(settings)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        token = path.read_text().strip()
        with client(first, token) as admin:
            me = admin.get("/api/v1/whoami").json()
            assert (me["name"], me["role"]) == ("bootstrap-admin", "admin")
    finally:
        first.stop()
    path.unlink()
    second = start_controller(settings)
    try:
        assert not path.exists()  # an admin token exists already: nothing new is minted
        with client(second, token) as admin:
            assert [t["name"] for t in admin.get("/api/v1/tokens").json()] == ["bootstrap-admin"]
    finally:
        second.stop()


def test_without_auth_every_request_passes_and_is_audited_as_anonymous(
    tmp_path: Path, sqlite_url: str, mosquitto: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        auto_migrate=True,
        auth_required=False,
    )
    insecure = start_controller(settings)
    try:
        assert "API authentication is OFF" in caplog.text
        assert not (tmp_path / "data" / "admin-token").exists()
        with client(insecure) as anyone:
            assert (
                anyone.put("/api/v1/models/det/versions/1", content=classifier()).status_code == 201
            )
            rows = anyone.get("/api/v1/audit").json()
            assert [(r["actor"], r["action"], r["status"]) for r in rows] == [
                ("anonymous", "PUT /api/v1/models/{name}/versions/{version}", 201)
            ]
            assert anyone.get("/api/v1/whoami").json()["auth_required"] is False
    finally:
        insecure.stop()
