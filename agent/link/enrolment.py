"""Enrolment on the gateway: exchange a one-time token for this device's identity and keep it.

``jetfleet-agent enroll`` posts the token, the device id, labels and probed facts to the
controller's ``POST /api/v1/enroll`` and stores the answer in ``<state_dir>/identity.json``
(:mod:`agent.identity_file`: mode 0600, replaced atomically): its own broker credential, an API
token for the controller, and the fleet's public signing key (pinned by ``agent/trust/store.py``).
``load_settings`` fills the broker credential, API token, device id, labels and URLs from this
file unless the config file or the environment sets them.

The labels the controller answers with are the enrolment token's: a controller does not let a
device choose its own labels, so any of the ``labels`` setting it did not grant come back in the
summary's ``ignored_labels`` (the CLI warns about them) and enrolment still succeeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent.errors import AgentError
from agent.identity_file import write_identity
from agent.link.http import Answer, HttpClient, Unreachable, controller_tls
from agent.settings import AgentSettings

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class EnrolmentError(AgentError):
    """The controller refused the token, or could not be reached; the message says why."""


def request_identity(
    controller_url: str,
    token: str,
    *,
    device_id: str | None,
    labels: Mapping[str, str],
    facts: Mapping[str, Any] | None,
    ca_file: Path | None = None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """POST the token to ``<controller>/api/v1/enroll``; the identity, or EnrolmentError."""
    body = {
        "token": token.strip(),
        "device_id": device_id,
        "labels": dict(labels),
        "facts": dict(facts) if facts is not None else None,
    }
    try:
        with HttpClient(
            controller_url, verify=controller_tls(ca_file), timeout_s=timeout_s
        ) as http:
            answer = http.request("POST", "/api/v1/enroll", json=body)
    except Unreachable as exc:
        raise EnrolmentError(
            f"cannot reach the controller at {controller_url} ({exc.kind}: {exc.reason}): "
            "check --controller"
        ) from exc
    if answer.status == 429:
        after = answer.headers.get("retry-after")
        wait = f"{after} s" if after else "a minute"
        raise EnrolmentError(f"too many enrolment attempts: retry in {wait} (HTTP 429)")
    if answer.verdict == "transient":
        raise EnrolmentError(
            f"the controller could not enrol this device right now: {_detail(answer)} "
            f"(HTTP {answer.status}): try again in a minute"
        )
    if answer.verdict == "permanent":
        raise EnrolmentError(f"enrolment refused: {_detail(answer)} (HTTP {answer.status})")
    try:
        identity = answer.json()
    except ValueError as exc:
        raise EnrolmentError(f"the controller at {controller_url} sent no JSON identity") from exc
    if not isinstance(identity, dict) or not isinstance(identity.get("device_id"), str):
        raise EnrolmentError(f"the controller at {controller_url} sent no device identity")
    return identity


def enroll(
    settings: AgentSettings, controller_url: str, token: str, device_id: str | None
) -> dict[str, Any]:
    """Enrol with ``token`` and store the identity; a summary without secrets."""
    from agent.hardware.facts import probe_facts  # the hardware probe, only when enrolling

    try:
        facts = probe_facts(
            simulated_profile=settings.simulated_profile,
            tensorrt_python=settings.tensorrt_python,
        ).model_dump(mode="json", by_alias=True)
    except AgentError:
        facts = None
    identity = request_identity(
        controller_url,
        token,
        device_id=device_id or settings.device_id,
        labels=settings.labels,
        facts=facts,
        ca_file=settings.controller_ca_file,
    )
    identity["controller_url"] = controller_url.rstrip("/")
    if isinstance(identity.get("broker_url"), str):
        identity["broker_url"] = reachable_broker_url(identity["broker_url"], controller_url)
    path = write_identity(settings.state_dir, identity)
    granted = identity.get("labels") or {}
    return {
        "device_id": identity["device_id"],
        "path": str(path),
        "controller_url": identity["controller_url"],
        "broker_url": identity.get("broker_url"),
        "broker_username": identity.get("broker_username"),
        "has_api_token": bool(identity.get("api_token")),
        "fleet_key_id": (identity.get("fleet_key") or {}).get("key_id"),
        "labels": granted,
        "ignored_labels": {k: v for k, v in settings.labels.items() if granted.get(k) != v},
        "enrolled_at": identity.get("enrolled_at"),
    }


def reachable_broker_url(broker_url: str, controller_url: str) -> str:
    """``broker_url`` as this device can reach it: a controller that names a broker on its own
    loopback (its embedded broker, or a Mosquitto beside it) is reached at the controller's host."""
    broker = urlsplit(broker_url)
    controller = urlsplit(controller_url)
    if broker.hostname not in _LOOPBACK or controller.hostname in _LOOPBACK | {None}:
        return broker_url
    host = f"[{controller.hostname}]" if ":" in str(controller.hostname) else controller.hostname
    port = f":{broker.port}" if broker.port else ""
    return urlunsplit((broker.scheme, f"{host}{port}", broker.path, "", ""))


def _detail(answer: Answer) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text.strip()[:200] or answer.reason
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail) if detail else answer.reason
