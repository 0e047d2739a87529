"""``X-Forwarded-For`` names the client only when it comes from a proxy the operator listed with
``jetfleet serve --trusted-proxy``: uvicorn used to believe it from any
loopback peer, so one local client could make up a new address for every enrolment attempt and
never meet the rate limit, and put any address it liked in the audit log."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.demo.fleet import Process, _spawn, wait_for
from tests.integration.security_broker.conftest import Secured, serve_error
from tests.ports import free_port

ENROL = "/api/v1/enroll"
FORGED = {"token": "jfe_nope", "device_id": "x"}


def _until_429(api: httpx.Client, forwarded_for: list[str]) -> list[int]:
    """Failed enrolments, one per ``forwarded_for`` value, until the first 429."""
    statuses = []
    for address in forwarded_for:
        answer = api.post(ENROL, json=FORGED, headers={"X-Forwarded-For": address})
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            break
    return statuses


def _audited_clients(api: httpx.Client) -> list[str]:
    audit = api.get("/api/v1/audit", params={"limit": 100}).json()
    return [a["detail"].get("client") for a in audit if a["action"] == f"POST {ENROL}"]


@pytest.mark.parametrize("secured", ["embedded"], indirect=True)
def test_a_made_up_forwarded_for_does_not_escape_the_rate_limit(secured: Secured) -> None:
    statuses = _until_429(secured.api, [f"198.51.100.{i}" for i in range(30)])

    assert statuses[:10] == [401] * 10
    assert statuses[-1] == 429
    assert set(_audited_clients(secured.api)) == {"127.0.0.1"}


@pytest.fixture
def behind_proxy(tmp_path: Path) -> Iterator[httpx.Client]:
    """``jetfleet serve --trusted-proxy 127.0.0.1 --trusted-proxy 10.0.0.0/8`` as a process (an
    admin API client of it), stopped by pid after the test."""
    data_dir = tmp_path / "data"
    url = f"http://127.0.0.1:{free_port()}"
    argv = [sys.executable, "-m", "controller", "serve", "--auto-migrate"]
    argv += ["--http", url.removeprefix("http://"), "--embedded-broker", "127.0.0.1:0"]
    argv += ["--data-dir", str(data_dir), "--trusted-proxy", "127.0.0.1"]
    argv += ["--trusted-proxy", "10.0.0.0/8"]
    server: Process = _spawn("controller", argv, tmp_path / "logs", {})
    try:
        wait_for(
            "the controller's /healthz",
            lambda: httpx.get(f"{url}/healthz", timeout=2).status_code == 200,
            60,
            [server],
        )
        admin = (data_dir / "admin-token").read_text().strip()
        with httpx.Client(
            base_url=url, timeout=30, headers={"Authorization": f"Bearer {admin}"}
        ) as api:
            yield api
    finally:
        server.stop()


def test_a_trusted_proxys_forwarded_for_is_the_client(behind_proxy: httpx.Client) -> None:
    # the proxies 10.0.0.2 and 127.0.0.1 are trusted, so the client is the address before them
    statuses = _until_429(behind_proxy, ["203.0.113.7, 10.0.0.2"] * 30)
    assert statuses[:10] == [401] * 10
    assert statuses[-1] == 429

    other = behind_proxy.post(ENROL, json=FORGED, headers={"X-Forwarded-For": "203.0.113.8"})

    assert other.status_code == 401  # another client behind the proxy has its own limit
    assert set(_audited_clients(behind_proxy)) == {"203.0.113.7", "203.0.113.8"}


def test_trusted_proxy_takes_an_address_or_a_network(tmp_path: Path) -> None:
    line = serve_error(tmp_path, "--trusted-proxy", "proxy.example")
    assert line == (
        "Error: --trusted-proxy expects an IP address or network (e.g. 10.0.0.5 or "
        "10.0.0.0/24), got 'proxy.example'"
    )
