"""Warm-up inputs the model accepts, end to end on a real controller and agent:
a model that needs a sequence longer than 1 and a sample rate (``sr`` 8000 or 16000) is pushed
without inputs → the CLI warns, naming --shape/--value/--inputs, and exits 3; deploys and
rollouts of it are refused (409) naming the fix; pushed again with ``--shape input=1x512
--value sr=16000`` → references computed with those inputs; deployed → served → answers equal
to ONNX Runtime run directly (JSON and binary tensors).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.controller.test_model_corpus import (
    _assert_equal,
    _binary_request,
    _json_body,
    _outputs,
)
from tests.integration.jobs.conftest import DEVICE, Fleet, running_fleet
from tests.model_corpus import reflect_pad_rate

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("warmup_inputs")]

MODEL = reflect_pad_rate()


@pytest.fixture(scope="module")
def fleet(mosquitto: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """One controller and one agent (as in test_model_corpus)."""
    with running_fleet(mosquitto, tmp_path_factory.mktemp("warmup"), "warmup", 60) as made:
        yield made


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "vad.onnx"
    path.write_bytes(MODEL.data)
    return path


def _reference(fleet: Fleet, sha256: str) -> dict[str, np.ndarray]:
    """The reference NPZ the controller stored for the model ``sha256``."""
    root = fleet.controller.settings.data_dir / "artifacts"
    entry = json.loads((root / "references" / f"{sha256}.json").read_text())
    npz = (root / entry["sha256"][:2] / entry["sha256"]).read_bytes()
    with np.load(io.BytesIO(npz)) as loaded:
        return {k: loaded[k] for k in loaded.files}


def test_push_without_inputs_warns_exits_3_and_deploys_are_refused(
    fleet: Fleet, model_file: Path
) -> None:
    pushed = fleet.cli("models", "push", str(model_file), "--name", "vad", "--version", "1")
    assert pushed.exit_code == 3, pushed.output
    assert "pushed vad:1" in pushed.stdout
    warning = pushed.stderr
    assert "warning: vad:1 has no reference outputs" in warning
    assert "Pad reflect requires axis length >= 2" in warning
    assert "input [1, 1] (dynamic dims 1, random)" in warning
    for option in ("--shape", "--value", "--inputs"):
        assert option in warning

    as_json = fleet.cli("models", "push", str(model_file), "--name", "vad", "--version", "2")
    assert as_json.exit_code == 3
    shown = fleet.cli(
        "models", "push", str(model_file), "--name", "vad", "--version", "2", "--json"
    )
    assert shown.exit_code == 3, shown.output
    out = json.loads(shown.stdout)
    assert out["warmup_unknown"] is True
    assert "Pad reflect" in out["reference_error"]
    assert "--shape" in out["warning"]
    assert "--value" in out["warning"]

    refused = fleet.api.post(
        "/api/v1/deployments", json={"model": "vad", "version": "1", "device": DEVICE}
    )
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert "vad:1 has no inputs it is known to accept" in detail
    assert "--shape" in detail
    assert "--value" in detail
    assert "--reference" in detail
    rollout = {
        "model": "vad",
        "version": "1",
        "targets": {"devices": [DEVICE]},
        "strategy": {"waves": "100%"},
    }
    refused = fleet.api.post("/api/v1/rollouts", json=rollout)
    assert refused.status_code == 409, refused.text
    assert "--shape" in refused.json()["detail"]


def test_push_with_shape_and_value_computes_references_and_serves(
    fleet: Fleet, model_file: Path
) -> None:
    wrong = fleet.cli(
        "models", "push", str(model_file), "--name", "vad", "--version", "1",
        "--shape", "input=1x512",
    )  # fmt: skip
    assert wrong.exit_code == 3, wrong.output
    assert "'step' value cannot be 0" in wrong.stderr

    pushed = fleet.cli(
        "models", "push", str(model_file), "--name", "vad", "--version", "1",
        "--shape", "input=1x512", "--value", "sr=16000", "--json",
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    out = json.loads(pushed.stdout)
    assert out["warning"] is None
    assert out["reference_error"] is None
    assert out["warmup_unknown"] is False
    assert out["warmup_given"] == {
        "shapes": {"input": [1, 512]},
        "values": {"sr": 16000.0},
        "inputs_sha256": None,
    }
    reference = _reference(fleet, out["sha256"])
    assert reference["input:input"].shape[1:] == (1, 512)
    assert set(reference["input:sr"].tolist()) == {16000}
    session = ort.InferenceSession(MODEL.data, providers=["CPUExecutionProvider"])
    case0 = {"input": reference["input:input"][0], "sr": np.asarray(reference["input:sr"][0])}
    np.testing.assert_allclose(session.run(None, case0)[0], reference["output:frames"][0])

    fleet.deploy_and_wait("vad", "1")
    assert fleet.agent is not None
    url = f"{fleet.agent.daemon.serve_url}/v2/models/vad/infer"
    rng = np.random.default_rng(7)
    with httpx.Client(timeout=30) as http:
        for shape, rate in (((1, 512), 16000), ((2, 100), 8000)):
            feeds = {
                "input": rng.standard_normal(shape).astype(np.float32),
                "sr": np.array(rate, np.int64),
            }
            want = {"frames": session.run(None, feeds)[0]}
            _assert_equal(_outputs(http.post(url, json=_json_body(feeds)), session), want)
            body, headers = _binary_request(feeds)
            _assert_equal(_outputs(http.post(url, content=body, headers=headers), session), want)


def test_push_with_sample_inputs_uses_them(fleet: Fleet, tmp_path: Path, model_file: Path) -> None:
    sample = tmp_path / "sample.npz"
    audio = np.random.default_rng(3).standard_normal((3, 1, 64)).astype(np.float32)
    np.savez(sample, input=audio, sr=np.array([8000, 8000, 16000], np.int64))
    pushed = fleet.cli(
        "models", "push", str(model_file), "--name", "vad", "--version", "3",
        "--inputs", str(sample), "--json", "--no-wait",
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    out = json.loads(pushed.stdout)
    assert out["warmup_given"]["inputs_sha256"]
    reference = _reference(fleet, out["sha256"])
    # the third case's output is shaped unlike the first two (hop 2): the NPZ stacks cases
    np.testing.assert_array_equal(reference["input:input"], audio[:2])
    assert reference["input:sr"].tolist() == [8000, 8000]
    assert reference["output:frames"].shape == (2, 1, 66)  # 64 reflect-padded to 66, hop 1
