"""The pure batching decisions: what to merge, when to flush, how outputs go back per request."""

from __future__ import annotations

import numpy as np
import pytest

from agent.errors import InferenceError
from agent.runtimes.base import TensorSpec
from agent.serving.batching import (
    BatchPolicy,
    Pending,
    batchable,
    merge,
    plan,
    signature_of,
    split,
)
from shared.messages import ServingSettings

A = (("x", "<f4", (16,)),)
B = (("x", "<f4", (8,)),)
POLICY = BatchPolicy(max_batch_size=4, max_queue_delay_s=0.010)


def test_a_lone_request_waits_for_company_until_the_delay() -> None:
    pending = [Pending(1, A, enqueued_at=100.0)]
    early = plan(pending, POLICY, now=100.004)
    assert early.take == ()
    assert early.wait_s == pytest.approx(0.006)
    assert plan(pending, POLICY, now=100.010).take == (0,)


def test_a_full_batch_runs_at_once_and_the_rest_waits() -> None:
    pending = [Pending(1, A, 100.0 + i / 1000) for i in range(6)]
    decision = plan(pending, POLICY, now=100.006)
    assert decision.take == (0, 1, 2, 3)


def test_requests_of_other_shapes_are_never_merged() -> None:
    pending = [Pending(1, A, 100.0), Pending(1, B, 100.001), Pending(1, A, 100.002)]
    decision = plan(pending, POLICY, now=100.011)
    assert decision.take == (0, 2)
    rest = plan([pending[1]], POLICY, now=100.02)
    assert rest.take == (0,)


def test_batches_never_exceed_max_batch_size_but_a_big_request_runs_alone() -> None:
    pending = [Pending(3, A, 100.0), Pending(2, A, 100.001), Pending(9, B, 99.0)]
    assert plan(pending, POLICY, now=100.0).take == (0,)
    assert plan([pending[2]], POLICY, now=99.0).take == (0,)


def test_nothing_pending_means_no_deadline() -> None:
    assert plan([], POLICY, now=1.0).take == ()
    assert plan([], POLICY, now=1.0).wait_s is None


def test_policy_from_slot_settings_defaults_to_off() -> None:
    settings = ServingSettings()
    assert settings.max_batch_size == 1
    assert settings.max_queue_delay_ms == 0
    assert not BatchPolicy.of(settings.max_batch_size, settings.max_queue_delay_ms).enabled
    on = BatchPolicy.of(8, 5)
    assert on.enabled
    assert on.max_queue_delay_s == pytest.approx(0.005)


def test_only_models_with_a_dynamic_batch_dimension_are_batchable() -> None:
    dynamic = [TensorSpec("x", "FP32", (-1, 16))]
    static = [TensorSpec("x", "FP32", (1, 16))]
    out = [TensorSpec("y", "FP32", (-1, 4))]
    assert batchable(dynamic, out)
    assert not batchable(static, out)
    assert not batchable(dynamic, [TensorSpec("y", "FP32", (4,))])


def test_signature_needs_one_batch_size_over_all_inputs() -> None:
    one: dict[str, np.ndarray] = {
        "x": np.zeros((2, 16), np.float32),
        "m": np.zeros((2, 3), np.int64),
    }
    rows_sig = signature_of(one)
    assert rows_sig is not None
    assert rows_sig[0] == 2
    assert signature_of({"x": np.zeros((2, 16)), "m": np.zeros((3, 3))}) is None


def test_merge_then_split_gives_each_request_its_rows() -> None:
    reqs = [{"x": np.full((n, 2), n, np.float32)} for n in (1, 3, 2)]
    merged = merge(reqs)
    assert merged["x"].shape == (6, 2)
    parts = split({"y": merged["x"] * 10}, [1, 3, 2])
    for req, part in zip(reqs, parts, strict=True):
        np.testing.assert_array_equal(part["y"], req["x"] * 10)


def test_an_output_that_lost_the_batch_fails_with_the_fix() -> None:
    with pytest.raises(InferenceError, match="max_batch_size to 1"):
        split({"y": np.zeros((1, 2))}, [1, 1])
