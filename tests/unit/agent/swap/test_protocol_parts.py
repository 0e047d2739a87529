"""KServe binary tensor extension, Prometheus exposition and the crash-safe swap journal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agent.errors import InvalidInputError
from agent.runtimes.base import TensorSpec
from agent.serving.core import ModelRegistry
from agent.serving.kserve import binary_outputs, decode_request, encode_response, split_body
from agent.serving.prometheus import PromMetrics
from agent.swap.journal import Pointer, SwapJournal

SPEC = [TensorSpec("x", "FP32", (1, 3))]


def test_binary_input_round_trip() -> None:
    data = np.array([[1.5, -2.0, 3.25]], dtype="<f4").tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "shape": [1, 3],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(data)},
                }
            ],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
        }
    ).encode()
    head, tail = split_body(header + data, str(len(header)))
    body = json.loads(head)
    feeds = decode_request(body, SPEC, tail)
    np.testing.assert_array_equal(feeds["x"], [[1.5, -2.0, 3.25]])
    assert binary_outputs(body, ["y"]) == {"y"}
    payload, length = encode_response({"model_name": "m"}, {"y": feeds["x"] * 2}, ["y"], {"y"})
    assert length is not None
    meta = json.loads(payload[:length])
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 12
    np.testing.assert_array_equal(np.frombuffer(payload[length:], "<f4"), [3.0, -4.0, 6.5])


def test_binary_size_mismatch_says_what_was_expected() -> None:
    header = {
        "inputs": [
            {
                "name": "x",
                "shape": [1, 3],
                "datatype": "FP32",
                "parameters": {"binary_data_size": 8},
            }
        ]
    }
    with pytest.raises(InvalidInputError, match="needs 12"):
        decode_request(header, SPEC, b"\0" * 8)
    with pytest.raises(InvalidInputError, match="outside the body"):
        split_body(b"{}", "99")


def test_prometheus_text_counts_requests_and_histogram() -> None:
    prom = PromMetrics(ModelRegistry())
    prom.record("m", 0.003, True)
    prom.record("m", 0.2, True)
    prom.record("m", 0.0, False)
    text = prom.render()
    assert 'jetfleet_requests_total{model="m"} 3' in text
    assert 'jetfleet_request_errors_total{model="m"} 1' in text
    assert 'jetfleet_request_latency_seconds_bucket{model="m",le="0.005"} 1' in text
    assert 'jetfleet_request_latency_seconds_bucket{model="m",le="+Inf"} 2' in text
    assert "# TYPE jetfleet_request_latency_seconds histogram" in text
    assert "jetfleet_queue_depth 0" in text


def test_journal_commit_keeps_rollback_and_survives_reopen(tmp_path: Path) -> None:
    a = Pointer("1", "a" * 64, "/e/a.engine", "ka")
    b = Pointer("2", "b" * 64, "/e/b.engine", "kb")
    journal = SwapJournal(tmp_path)
    journal.commit("m", a)
    journal.begin("m", b)
    reopened = SwapJournal(tmp_path).get("m")
    assert (reopened.active, reopened.pending) == (a, b)
    journal.commit("m", b)
    after = SwapJournal(tmp_path).get("m")
    assert (after.active, after.rollback, after.pending) == (b, a, None)
    assert not list(tmp_path.glob(".*.tmp"))
