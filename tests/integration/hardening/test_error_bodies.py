"""A 20 KB name in a request gets a short error body from a real controller: 404s,
400s and FastAPI's 422s quote the request only in short, and still say what was wrong."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.integration.hardening.conftest import open_controller

HUGE = "a" * 20_000
SPACED = "a " * 10_000
MAX_BODY = 1024


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, f"bodies-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


@pytest.fixture
def pushed(api: httpx.Client) -> None:
    response = api.put("/api/v1/models/classifier/versions/1", content=classifier())
    assert response.status_code == 201, response.text


REQUESTS: list[tuple[str, str, dict[str, Any], int, str]] = [
    ("GET", f"/api/v1/models/{HUGE}", {}, 404, "unknown model 'aaaa"),
    ("GET", f"/api/v1/models/classifier/versions/{HUGE}", {}, 404, "unknown model version"),
    ("PUT", f"/api/v1/models/{HUGE}/versions/1", {"content": b"onnx"}, 400,
     "invalid model name 'aaaa"),
    ("PUT", f"/api/v1/models/classifier/versions/{HUGE}/reference", {"content": b"x"}, 404,
     "unknown model version"),
    ("GET", f"/api/v1/devices/{HUGE}", {}, 404, "unknown device 'aaaa"),
    ("GET", f"/api/v1/rollouts/{HUGE}", {}, 404, "unknown rollout 'aaaa"),
    ("GET", f"/api/v1/jobs/{HUGE}", {}, 404, "unknown job 'aaaa"),
    ("GET", f"/api/v1/configs/{HUGE}", {}, 400, "invalid config name 'aaaa"),
    ("POST", "/api/v1/deployments", {"json": {"model": HUGE, "version": "1", "device": "gw"}},
     404, "unknown model version"),
]  # fmt: skip


@pytest.mark.usefixtures("pushed")
@pytest.mark.parametrize(("method", "path", "extra", "status", "says"), REQUESTS)
def test_a_20_kb_name_gets_a_short_body_that_still_says_what_is_wrong(
    api: httpx.Client, method: str, path: str, extra: dict[str, Any], status: int, says: str
) -> None:
    response = api.request(method, path, **extra)
    assert response.status_code == status, response.text[:300]
    assert len(response.content) < MAX_BODY, response.text[:300]
    detail = response.json()["detail"]
    assert detail.startswith(says)
    assert re.search(r"… \(200\d\d characters\)", detail)  # how long the quote was


def test_the_hint_after_a_clipped_name_survives(api: httpx.Client) -> None:
    response = api.get(f"/api/v1/rollouts/{HUGE}")
    assert response.status_code == 404
    assert len(response.content) < MAX_BODY
    assert response.json()["detail"].endswith("see `jetfleet rollouts ls`")


def test_a_long_name_with_spaces_is_clipped_as_a_whole(api: httpx.Client) -> None:
    response = api.get(f"/api/v1/models/{SPACED}")
    assert response.status_code == 404
    assert len(response.content) < MAX_BODY
    assert response.json()["detail"].startswith("unknown model 'a a a")


def test_validation_errors_clip_the_echoed_input(api: httpx.Client) -> None:
    response = api.get("/api/v1/devices/gw/telemetry", params={"limit": HUGE})
    assert response.status_code == 422
    assert len(response.content) < MAX_BODY, response.text[:300]
    (error,) = response.json()["detail"]
    assert error["loc"] == ["query", "limit"]
    assert error["input"].startswith("aaaa")
    assert error["input"].endswith("… (20000 characters)")

    keys = {f"k{i}": HUGE for i in range(50)}
    listed = api.post("/api/v1/deployments", json={"model": "m", "version": "1", **keys})
    assert listed.status_code == 422
    assert len(listed.content) < 30 * MAX_BODY
    errors = listed.json()["detail"]
    assert errors[-1]["msg"] == "and 30 more error(s)"
