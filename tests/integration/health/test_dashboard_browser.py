"""Headless Chromium loads the built-in dashboard of a controller fed by simulated agents.

Needs Debian's ``chromium`` package (``apt-get install chromium``); the test fails with that
message when it is missing. The screenshot is kept under the test's tmp dir and its path printed.
Each page is opened through the login link ``/login?next=<page>#token=<viewer token>``: the login
page submits the token itself and the browser follows the redirect with the session cookie.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from controller.server import Controller
from tests.integration.controller.conftest import MqttPeer, new_token
from tests.integration.health.test_health_api import publish_fleet, wait_until_stored
from tests.services import find_chromium

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium() -> str:
    found = find_chromium()  # `make test` installs it first (tests/services.py)
    if found:
        return found
    pytest.fail(
        "headless Chromium not found: install Debian's package (apt-get install chromium)",
        pytrace=False,
    )


def browse(url: str, *extra: str, cwd: Path) -> str:
    """The DOM after the page's scripts ran (or the screenshot, with --screenshot)."""
    result = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={cwd / 'profile'}",
            "--virtual-time-budget=5000",
            "--window-size=1400,1000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def logged_in(controller: Controller, page: str, token: str) -> str:
    """The URL that logs a browser in with ``token`` and then opens ``page``."""
    return f"{controller.http_url}/login?{urlencode({'next': page})}#token={token}"


def test_dashboard_renders_device_table_and_charts(
    controller: Controller,
    api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    tmp_path: Path,
) -> None:
    publish_fleet(controller, peers, prefix)
    wait_until_stored(api)

    viewer = new_token(controller, "wall-screen", "viewer")
    refused = browse(f"{controller.http_url}/dashboard", "--dump-dom", cwd=tmp_path)
    assert '<form id="login"' in refused  # no cookie yet: the login page
    fleet = browse(logged_in(controller, "/dashboard", viewer), "--dump-dom", cwd=tmp_path)
    rows = re.findall(r"<tr data-device=\"([^\"]+)\" data-health=\"([^\"]+)\"", fleet)
    assert sorted(rows) == [("gw-hot", "degraded"), ("gw-ok", "healthy")]
    assert "temperature 95.0 °C above 85 °C" in fleet

    device_page = logged_in(controller, "/dashboard/devices/gw-hot", viewer)
    device = browse(device_page, "--dump-dom", cwd=tmp_path)
    drawn = re.findall(r'class="jf-chart" data-rendered="(\w+)"', device)
    assert drawn.count("true") >= 5, drawn  # latency, throughput, load, temperature, memory...
    assert device.count('class="jf-line"') >= 6
    assert "kkkkkkkkkkkkkkkk" in device  # active engine (from telemetry)
    assert '<tr data-fact="jetpack"><th>JetPack / L4T</th>' in device  # facts as rows

    shot = tmp_path / "device.png"
    browse(device_page, f"--screenshot={shot}", cwd=tmp_path)
    assert shot.stat().st_size > 10_000
    print(f"dashboard screenshot: {shot}")
