"""Reference NPZ uploads on a real controller are checked against the model, not by array names
alone: a zip bomb, pickled objects, a body that is not an NPZ, a wrong shape or dtype are refused
with 422 saying what is wrong, and nothing replaces the computed reference; a fitting NPZ is kept.
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner, Result

from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.integration.hardening.conftest import open_controller
from tests.npz_files import DETONATIONS, Detonator, classifier_bomb, npz

REFERENCE = "/api/v1/models/classifier/versions/1/reference"


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, f"npz-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


@pytest.fixture
def pushed(controller: Controller, api: httpx.Client) -> str:
    """sha256 of classifier:1, pushed (with its computed reference outputs)."""
    response = api.put("/api/v1/models/classifier/versions/1", content=classifier())
    assert response.status_code == 201, response.text
    return str(response.json()["sha256"])


@pytest.fixture
def computed_stays(controller: Controller, pushed: str) -> Iterator[None]:
    """The test's uploads must all be refused: the computed reference is still the one served."""
    assert controller.services is not None
    catalog = controller.services.catalog
    before = catalog.reference(pushed)
    assert before is not None
    yield
    assert catalog.reference(pushed) == before


def cases(count: int = 2) -> dict[str, np.ndarray]:
    """``count`` real cases: random images and what ONNX Runtime computes for them."""
    session = ort.InferenceSession(classifier(), providers=["CPUExecutionProvider"])
    images = np.random.default_rng(3).random((count, 1, 3, 32, 32), dtype=np.float32)
    outputs = np.stack([session.run(None, {"image": x})[0] for x in images])
    return {"input:image": images, "output:probabilities": outputs}


def refused(api: httpx.Client, body: bytes) -> str:
    response = api.put(REFERENCE, content=body)
    assert response.status_code == 422, response.text
    return str(response.json()["detail"])


@pytest.mark.usefixtures("computed_stays")
def test_a_zip_bomb_is_refused_by_its_declared_size(api: httpx.Client) -> None:
    bomb = classifier_bomb()
    assert len(bomb) < 1_000_000
    detail = refused(api, bomb)
    assert detail == (
        "uncompressed size 293.9 MiB exceeds the 256 MiB cap of reference outputs: use fewer cases"
    )


@pytest.mark.usefixtures("computed_stays")
def test_pickled_object_arrays_are_refused_unread(api: httpx.Client) -> None:
    body = npz(cases() | {"output:probabilities": np.array([[[Detonator()] * 10]] * 2)})
    assert refused(api, body) == (
        "array output:probabilities has dtype object: only numeric arrays (bool, int, uint, "
        "float, complex) are accepted"
    )
    assert DETONATIONS == []


@pytest.mark.usefixtures("computed_stays")
def test_a_body_that_is_not_an_npz_is_called_that(api: httpx.Client) -> None:
    detail = refused(api, b"image,probability\n0,0.5\n")
    assert detail.startswith("not a ZIP/NPZ file: ")
    assert "pickle" not in detail
    assert refused(api, os.urandom(4096)).startswith("not a ZIP/NPZ file: ")


@pytest.mark.usefixtures("computed_stays")
def test_a_wrong_shape_is_refused_naming_the_shape_the_model_expects(api: httpx.Client) -> None:
    no_case_axis = cases(1) | {"input:image": np.zeros((1, 3, 32, 32), np.float32)}
    assert refused(api, npz(no_case_axis)).startswith(
        "array input:image has shape (1,3,32,32), model expects (N,1,3,32,32): first axis = case"
    )
    small = cases() | {"input:image": np.zeros((2, 1, 3, 10, 10), np.float32)}
    assert refused(api, npz(small)).startswith(
        "array input:image has shape (2,1,3,10,10), model expects (N,1,3,32,32)"
    )


@pytest.mark.usefixtures("computed_stays")
def test_a_wrong_dtype_is_refused(api: httpx.Client) -> None:
    doubles = {k: v.astype(np.float64) for k, v in cases().items()}
    assert refused(api, npz(doubles)) == (
        "array input:image has dtype float64, model expects float32"
    )


@pytest.mark.usefixtures("computed_stays")
def test_an_extra_member_is_refused(api: httpx.Client) -> None:
    body = npz(cases() | {"input:notes": np.zeros((2, 4), np.float32)})
    assert refused(api, body).startswith(
        "reference NPZ has arrays the model has no tensor for: input:notes"
    )


def test_a_fitting_npz_is_stored_and_served(
    controller: Controller, api: httpx.Client, pushed: str
) -> None:
    body = npz(cases(3))
    stored = api.put(REFERENCE, content=body)
    assert stored.status_code == 200, stored.text
    assert stored.json()["sha256"] == hashlib.sha256(body).hexdigest()
    assert controller.services is not None
    served = controller.services.catalog.reference(pushed)
    assert served is not None
    assert served.sha256 == hashlib.sha256(body).hexdigest()
    with np.load(io.BytesIO(api.get(served.url).content), allow_pickle=False) as got:
        assert got["input:image"].shape == (3, 1, 3, 32, 32)


def test_the_cli_says_in_one_line_that_the_model_is_stored_and_why_the_reference_is_not(
    controller: Controller, api: httpx.Client, tmp_path: Path
) -> None:
    model, reference = tmp_path / "classifier.onnx", tmp_path / "bad.npz"
    model.write_bytes(classifier())
    reference.write_bytes(npz({k: v.astype(np.float64) for k, v in cases().items()}))

    result = push(controller, model, reference)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        "Error: classifier:1 is stored, but its reference outputs were refused: array "
        "input:image has dtype float64, model expects float32 (HTTP 422)"
    ]
    assert api.get("/api/v1/models/classifier/versions/1").status_code == 200


def push(controller: Controller, model: Path, reference: Path) -> Result:
    return CliRunner().invoke(
        cli,
        ["models", "push", str(model), "--name", "classifier", "--version", "1",
         "--reference", str(reference), "--url", controller.http_url],
    )  # fmt: skip
