"""What one audit row says about a request (action template, target, detail)."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

from controller.auth.middleware import audit_entry, bearer_token, route_template
from controller.auth.policy import Role
from controller.auth.tokens import Principal

NOW = datetime(2026, 1, 31, 8, 0, tzinfo=timezone.utc)


def scope(path: str, route: str | None = None, **extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "http", "method": "PUT", "path": path, "headers": []}
    if route is not None:
        s["route"] = SimpleNamespace(path=route)
    s.update(extra)
    return s


def test_route_template_restores_the_router_prefix() -> None:
    assert route_template(scope("/api/v1/configs/fast", "/configs/{name}")) == (
        "/api/v1/configs/{name}"
    )
    assert route_template(scope("/api/v1/configs/fast", "/api/v1/configs/{name}")) == (
        "/api/v1/configs/{name}"
    )
    assert route_template(scope("/api/v1/configs/fast/", "/configs/{name}")) == (
        "/api/v1/configs/{name}"
    )
    assert route_template(scope("/api/v1/nothing")) == "/api/v1/nothing"
    assert route_template(scope("/files/a/b", "/files/{p:path}")) == "/files/a/b"


def test_audit_entry_names_actor_action_target_and_client() -> None:
    principal = Principal("gw-1-token", Role.DEVICE, token_id="0123456789ab", device_id="gw-1")
    entry = audit_entry(
        scope(
            "/api/v1/engines/k1/lease",
            "/engines/{key}/lease",
            path_params={"key": "k1"},
            client=("10.0.0.5", 4242),
            query_string=b"device_id=gw-1",
        ),
        principal,
        204,
        {},
        NOW,
    )
    assert (entry.actor, entry.role, entry.action, entry.target, entry.status) == (
        "gw-1-token",
        "device",
        "PUT /api/v1/engines/{key}/lease",
        "key=k1",
        204,
    )
    assert entry.detail == {
        "client": "10.0.0.5",
        "query": "device_id=gw-1",
        "device": "gw-1",
        "token": "0123456789ab",
    }
    anonymous = audit_entry(scope("/api/v1/deployments"), None, 401, {"reason": "no token"}, NOW)
    assert (anonymous.actor, anonymous.role, anonymous.target) == ("anonymous", "none", None)
    assert anonymous.detail == {"reason": "no token"}


def test_bearer_header_wins_and_the_cookie_counts_for_reads_only() -> None:
    header = [(b"authorization", b"Bearer jf_header"), (b"cookie", b"a=1; jetfleet_token=jf_c")]
    assert bearer_token({"method": "POST", "headers": header}) == "jf_header"
    cookie = [(b"cookie", b"a=1; jetfleet_token=jf_c")]
    assert bearer_token({"method": "GET", "headers": cookie}) == "jf_c"
    assert bearer_token({"method": "HEAD", "headers": cookie}) == "jf_c"
    assert bearer_token({"method": "POST", "headers": cookie}) is None
    assert bearer_token({"method": "GET", "headers": [(b"authorization", b"Basic x")]}) is None
