"""The policy table: which role each request needs, and what a device token may do."""

from __future__ import annotations

import pytest

from controller.auth.policy import (
    DeviceBinding,
    Role,
    authorize,
    bound_device,
    required_role,
)

KEY = "ab" * 32


@pytest.mark.parametrize(
    ("method", "path", "needed"),
    [
        ("GET", "/healthz", None),
        ("HEAD", "/healthz", None),
        ("POST", "/api/v1/enroll", None),
        ("GET", "/login", None),
        ("POST", "/login", None),
        ("POST", "/healthz", Role.OPERATOR),
        ("GET", "/api/v1/enroll", Role.VIEWER),
        ("GET", "/api/v1/devices", Role.VIEWER),
        ("HEAD", f"/api/v1/artifacts/{KEY}", Role.VIEWER),
        ("GET", "/dashboard", Role.VIEWER),
        ("GET", "/dashboard/static/jfchart.js", Role.VIEWER),
        ("GET", "/metrics", Role.VIEWER),
        ("GET", "/openapi.json", Role.VIEWER),
        ("PUT", "/api/v1/models/det/versions/1", Role.OPERATOR),
        ("POST", "/api/v1/deployments", Role.OPERATOR),
        ("DELETE", "/api/v1/configs/fast", Role.OPERATOR),
        ("POST", "/api/v1/rollouts/1/pause", Role.OPERATOR),
        ("POST", "/api/v1/some-route-added-later", Role.OPERATOR),
        ("GET", "/api/v1/tokens", Role.ADMIN),
        ("GET", "/api/v1/tokens/", Role.ADMIN),
        ("POST", "/api/v1/tokens", Role.ADMIN),
        ("DELETE", "/api/v1/tokens/0123456789ab", Role.ADMIN),
        ("GET", "/api/v1/audit", Role.ADMIN),
        ("GET", "/api/v1/tokensmith", Role.VIEWER),
        ("get", "/api/v1/devices", Role.VIEWER),
    ],
)
def test_required_role(method: str, path: str, needed: Role | None) -> None:
    assert required_role(method, path) == needed


@pytest.mark.parametrize(
    ("role", "method", "path", "allowed"),
    [
        (Role.VIEWER, "GET", "/api/v1/devices", True),
        (Role.VIEWER, "POST", "/api/v1/deployments", False),
        (Role.OPERATOR, "POST", "/api/v1/deployments", True),
        (Role.OPERATOR, "GET", "/api/v1/audit", False),
        (Role.OPERATOR, "POST", "/api/v1/tokens", False),
        (Role.ADMIN, "POST", "/api/v1/tokens", True),
        (Role.ADMIN, "PUT", "/api/v1/models/det/versions/1", True),
        (Role.VIEWER, "GET", "/healthz", True),
    ],
)
def test_roles_are_ordered(role: Role, method: str, path: str, allowed: bool) -> None:
    assert authorize(role, method, path).allowed is allowed


def test_a_refusal_names_the_needed_role_and_the_token() -> None:
    decision = authorize(Role.VIEWER, "put", "/api/v1/configs/fast", "alice")
    assert not decision.allowed
    assert (
        decision.reason == "PUT /api/v1/configs/fast needs role operator, token 'alice' has viewer"
    )


@pytest.mark.parametrize(
    ("method", "path", "binding"),
    [
        ("GET", f"/api/v1/artifacts/{KEY}", None),
        ("HEAD", f"/api/v1/artifacts/{KEY}", None),
        ("POST", "/api/v1/artifacts", None),
        ("GET", f"/api/v1/engines/{KEY}", None),
        ("GET", "/api/v1/whoami", None),
        ("PUT", f"/api/v1/engines/{KEY}", DeviceBinding("body", "built_by")),
        ("POST", f"/api/v1/engines/{KEY}/lease", DeviceBinding("body", "device_id")),
        ("DELETE", f"/api/v1/engines/{KEY}/lease", DeviceBinding("query", "device_id")),
    ],
)
def test_what_a_device_token_may_do(method: str, path: str, binding: DeviceBinding | None) -> None:
    decision = authorize(Role.DEVICE, method, path, "gw-1")
    assert decision.allowed
    assert decision.binding == binding


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/devices"),
        ("GET", "/api/v1/engines"),
        ("DELETE", f"/api/v1/engines/{KEY}"),
        ("PUT", f"/api/v1/artifacts/{KEY}"),
        ("POST", "/api/v1/deployments"),
        ("PUT", "/api/v1/models/det/versions/1"),
        ("GET", "/api/v1/tokens"),
        ("GET", "/dashboard"),
        ("GET", "/metrics"),
        ("GET", f"/api/v1/engines/{KEY}/other"),
        ("GET", f"/api/v1/artifacts/{KEY}/../../tokens"),
    ],
)
def test_a_device_token_may_do_nothing_else(method: str, path: str) -> None:
    decision = authorize(Role.DEVICE, method, path, "gw-1")
    assert not decision.allowed
    assert "device token" in decision.reason


def test_bound_device_reads_the_named_field() -> None:
    body = DeviceBinding("body", "device_id")
    assert bound_device(body, "", b'{"device_id": "gw-1", "ttl_s": 60}') == "gw-1"
    assert bound_device(body, "", b'{"ttl_s": 60}') is None
    assert bound_device(body, "", b"not json") is None
    assert bound_device(body, "", b'["gw-1"]') is None
    assert bound_device(body, "", b'{"device_id": 7}') is None
    query = DeviceBinding("query", "device_id")
    assert bound_device(query, "device_id=gw-2", b"") == "gw-2"
    assert bound_device(query, "device_id=gw-1&device_id=gw-2", b"") == "gw-2"
    assert bound_device(query, "other=1", b"") is None
