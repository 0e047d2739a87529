"""Upload size limits on a real controller: a body over ``max_upload_bytes`` is refused with 413
while it streams, and nothing of it is stored (no artifact, no temporary file, no record)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.integration.hardening.conftest import open_controller

LIMIT = 64 * 1024


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    prefix = f"limits-{uuid.uuid4().hex[:10]}/v1"
    with open_controller(mosquitto, tmp_path, prefix, max_upload_bytes=LIMIT) as c:
        yield c


def stored_files(controller: Controller) -> list[str]:
    root = controller.settings.data_dir / "artifacts"
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
    )


def chunks(total: int, size: int = 8192) -> Iterator[bytes]:
    """A body without Content-Length (chunked), so the limit must hold while streaming."""
    sent = 0
    while sent < total:
        part = os.urandom(min(size, total - sent))
        sent += len(part)
        yield part


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text
    detail = response.json()["detail"]
    assert f"limit of {LIMIT} bytes" in detail
    assert "--max-upload" in detail


def test_an_oversized_model_is_refused_while_streaming_and_nothing_is_kept(
    controller: Controller, api: httpx.Client
) -> None:
    before = stored_files(controller)
    streamed = api.put("/api/v1/models/big/versions/1", content=chunks(LIMIT * 4))
    assert_refused(streamed)
    declared = api.put("/api/v1/models/big/versions/2", content=os.urandom(LIMIT + 1))
    assert_refused(declared)
    assert api.get("/api/v1/models/big").status_code == 404
    assert stored_files(controller) == before

    fits = api.put("/api/v1/models/small/versions/1", content=classifier(seed=3))
    assert fits.status_code == 201, fits.text


def test_an_oversized_artifact_is_refused_and_a_fitting_one_is_stored(
    controller: Controller, api: httpx.Client
) -> None:
    before = stored_files(controller)
    assert_refused(api.post("/api/v1/artifacts", content=chunks(LIMIT + 1)))
    assert stored_files(controller) == before

    exact = os.urandom(LIMIT)
    stored = api.post("/api/v1/artifacts", content=exact)
    assert stored.status_code == 201, stored.text
    assert stored.json()["size"] == LIMIT
    assert len(stored_files(controller)) == len(before) + 1


def test_oversized_reference_outputs_are_refused_and_the_computed_ones_stay(
    controller: Controller, api: httpx.Client
) -> None:
    pushed = api.put("/api/v1/models/classifier/versions/1", content=classifier(seed=1))
    assert pushed.status_code == 201, pushed.text
    assert controller.services is not None
    catalog = controller.services.catalog
    sha = pushed.json()["sha256"]
    reference = catalog.reference(sha)
    assert reference is not None
    before = stored_files(controller)

    refused = api.put("/api/v1/models/classifier/versions/1/reference", content=chunks(LIMIT * 2))
    assert_refused(refused)
    assert catalog.reference(sha) == reference
    assert stored_files(controller) == before
