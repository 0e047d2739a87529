"""The agent's ``build_started`` event states the shape profile an engine is built for, the
default profile the controller added from the version's warm-up shapes
included, and says nothing of one for a config without profiles."""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any

from agent.engines.cache import EngineCache
from agent.engines.identity import identify
from agent.engines.resolver import EngineResolver
from shared.delegate import DelegateConfig, ShapeProfile
from shared.facts import DeviceFacts
from tests.integration.controller.test_default_profile import dynamic_model

FACTS = DeviceFacts(
    hostname="h",
    os="Debian",
    arch="x86_64",
    onnxruntime_version=importlib.metadata.version("onnxruntime"),
)
PROFILE = ShapeProfile(input="x", min=(2, 4), opt=(2, 4), max=(2, 4))


def started(tmp_path: Path, config: DelegateConfig) -> str:
    data = dynamic_model()
    tmp_path.mkdir()
    path = tmp_path / "dyn.onnx"
    path.write_bytes(data)
    events: list[tuple[str, str]] = []

    def emit(kind: str, slot: str | None, message: str, **data: Any) -> None:
        events.append((kind, message))

    cache = EngineCache(tmp_path / "engines", 1 << 30)
    resolver = EngineResolver(cache, None, "gw-1", build_timeout_s=60, emit=emit)
    identity = identify("onnxruntime", FACTS, hashlib.sha256(data).hexdigest(), config)
    assert resolver.resolve("dyn", path, identity, config).source == "built"
    return next(message for kind, message in events if kind == "build_started")


def test_build_started_names_the_shape_profile_it_builds_for(tmp_path: Path) -> None:
    """The default profile reaches the agent as a profile (``default_shapes`` stays in the
    controller, whose resolve says where it came from)."""
    marked = DelegateConfig(shapes=(PROFILE,), default_shapes=("x",))
    assert started(tmp_path / "a", marked).endswith(" with shape profile x=2x4")
    assert "shape profile" not in started(tmp_path / "b", DelegateConfig())
