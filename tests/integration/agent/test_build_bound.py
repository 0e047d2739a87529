"""A stuck TensorRT build is bounded per delegate config: the config's
``build_timeout_s`` kills it (not the agent's hour-long default), and the slot falls back."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from agent.engines.build_runner import BuildFailed
from agent.engines.cache import EngineCache
from agent.engines.identity import identify
from agent.engines.resolver import EngineResolver
from agent.slots.fallback import fallback_reason
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from tests.integration.agent.test_tensorrt_fallback import tensorrt_facts


def test_a_configs_build_bound_kills_a_stuck_build_and_the_slot_falls_back(tmp_path: Path) -> None:
    data = classifier(seed=2)
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(data)
    events: list[tuple[str, dict[str, Any]]] = []
    resolver = EngineResolver(
        EngineCache(tmp_path / "engines", 1 << 30),
        None,
        "gw-1",
        build_timeout_s=3600,  # the agent's own bound: the config's is shorter
        emit=lambda kind, slot, message, **data: events.append((kind, data)),
        builders={"tensorrt": "tests.integration.agent.slow_builder"},  # never finishes
    )
    config = DelegateConfig(build_timeout_s=2)
    identity = identify("tensorrt", tensorrt_facts(), hashlib.sha256(data).hexdigest(), config)
    with pytest.raises(BuildFailed, match=r"timed out after 2 s and was killed") as failed:
        resolver.resolve("classifier", onnx, identity, config)
    failure = next(data for kind, data in events if kind == "build_failed")
    assert 2 <= failure["seconds"] < 60
    assert fallback_reason(failed.value, config, "tensorrt") is not None
