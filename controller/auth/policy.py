"""Which role each API request needs (pure: method and path in, a decision out).

Roles are ordered ``viewer < operator < admin``; ``device`` stands apart: a gateway's token, bound
to one device id, that may only touch what an agent needs (artifacts, engine manifests, build
leases), and for manifests and leases only in its own name.

=========================================  ==========  ===============================
request                                    role        device token
=========================================  ==========  ===============================
GET /healthz, POST /api/v1/enroll, /login  public      -
/api/v1/tokens..., /api/v1/audit...        admin       no
GET/HEAD /api/v1/whoami                    viewer      yes
GET/HEAD /api/v1/artifacts/{sha}           viewer      yes
POST /api/v1/artifacts                     operator    yes
GET/HEAD /api/v1/engines/{key}             viewer      yes
PUT /api/v1/engines/{key}                  operator    own device (body ``built_by``) *
POST /api/v1/engines/{key}/lease           operator    own device (body ``device_id``)
DELETE /api/v1/engines/{key}/lease         operator    own device (query ``device_id``)
GET/HEAD /api/v1/engines/{key}/failure     viewer      yes
PUT /api/v1/engines/{key}/failure          operator    own device (body ``device_id``) *
any other GET/HEAD/OPTIONS                 viewer      no
any other method                           operator    no
=========================================  ==========  ===============================

* and only for the device's own validity key and hardware class, which the engine store checks
against the device's reported facts (403 otherwise; ``controller/trust/engine_trust.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs

from controller.records import Role as Role

ROLES = tuple(r.value for r in Role)
_RANK = {Role.VIEWER: 1, Role.OPERATOR: 2, Role.ADMIN: 3}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_PUBLIC = {
    ("GET", "/healthz"),
    ("HEAD", "/healthz"),
    ("POST", "/api/v1/enroll"),
    ("GET", "/login"),
    ("HEAD", "/login"),
    ("POST", "/login"),
}
_ADMIN_PREFIXES = ("/api/v1/tokens", "/api/v1/audit")


@dataclass(frozen=True)
class DeviceBinding:
    """Where a device's request names the device it acts for (it must be the token's)."""

    source: Literal["body", "query"]
    field: str


_READ = frozenset({"GET", "HEAD"})
_DEVICE_RULES: list[tuple[frozenset[str], re.Pattern[str], DeviceBinding | None]] = [
    (_READ, re.compile(r"/api/v1/whoami"), None),
    (_READ, re.compile(r"/api/v1/artifacts/[^/]+"), None),
    (frozenset({"POST"}), re.compile(r"/api/v1/artifacts"), None),
    (_READ, re.compile(r"/api/v1/engines/[^/]+"), None),
    (frozenset({"PUT"}), re.compile(r"/api/v1/engines/[^/]+"), DeviceBinding("body", "built_by")),
    (_READ, re.compile(r"/api/v1/engines/[^/]+/failure"), None),
    (
        frozenset({"PUT"}),
        re.compile(r"/api/v1/engines/[^/]+/failure"),
        DeviceBinding("body", "device_id"),
    ),
    (
        frozenset({"POST"}),
        re.compile(r"/api/v1/engines/[^/]+/lease"),
        DeviceBinding("body", "device_id"),
    ),
    (
        frozenset({"DELETE"}),
        re.compile(r"/api/v1/engines/[^/]+/lease"),
        DeviceBinding("query", "device_id"),
    ),
]


@dataclass(frozen=True)
class Decision:
    """May a token of some role make this request? ``reason`` says why not, in one line."""

    allowed: bool
    reason: str = ""
    binding: DeviceBinding | None = None
    """For a device token: the request must name the token's device here."""


def _is_under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def required_role(method: str, path: str) -> Role | None:
    """The least role a request needs; None when it is public."""
    method = method.upper()
    if (method, path.rstrip("/") or "/") in _PUBLIC:
        return None
    if any(_is_under(path, prefix) for prefix in _ADMIN_PREFIXES):
        return Role.ADMIN
    return Role.VIEWER if method in SAFE_METHODS else Role.OPERATOR


def device_rule(method: str, path: str) -> tuple[bool, DeviceBinding | None]:
    """(allowed, binding) for a device token; the binding names where its own id must appear."""
    method = method.upper()
    for methods, pattern, binding in _DEVICE_RULES:
        if method in methods and pattern.fullmatch(path):
            return True, binding
    return False, None


def authorize(role: Role, method: str, path: str, name: str = "this token") -> Decision:
    """The decision for a token named ``name`` with ``role`` on ``method path``."""
    needed = required_role(method, path)
    if needed is None:
        return Decision(True)
    if role is Role.DEVICE:
        allowed, binding = device_rule(method, path)
        if not allowed:
            return Decision(
                False, f"a device token may not {method.upper()} {path} (token {name!r})"
            )
        return Decision(True, binding=binding)
    if _RANK[role] >= _RANK[needed]:
        return Decision(True)
    return Decision(
        False, f"{method.upper()} {path} needs role {needed.value}, token {name!r} has {role.value}"
    )


def bound_device(binding: DeviceBinding, query_string: str, body: bytes) -> str | None:
    """The device id a request names at ``binding`` (None when absent or unreadable)."""
    if binding.source == "query":
        values = parse_qs(query_string).get(binding.field)
        return values[-1] if values else None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # a body nested past the parser's depth: unreadable
        return None
    value = document.get(binding.field) if isinstance(document, dict) else None
    return value if isinstance(value, str) else None
