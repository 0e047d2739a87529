"""INT8 calibration from sample inputs, agent side, with a real resolver and builder child: an
INT8 TensorRT slot
without a calibration cache whose reference holds the operator's sample inputs gets that NPZ
before its engine is built; the build request (and so the TensorRT host's options) names the
file, which holds the reference's inputs; its engine is keyed by the reference, so another
reference is another engine, and the same one is taken from the cache."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from agent.engines.cache import EngineCache
from agent.engines.resolver import EngineResolver, Resolved
from agent.link.downloader import Downloader
from agent.slots.pipeline import SlotRun
from agent.slots.stages import FetchReference, PowerModes, ResolveEngine
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from shared.messages import ArtifactRef, ModelSlot
from tests.integration.agent.test_tensorrt_fallback import tensorrt_facts

MODEL = classifier(seed=3)


def reference(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        **{
            "input:image": rng.random((3, 1, 3, 32, 32), np.float32),
            "output:probabilities": rng.random((3, 1, 10), np.float32),
        },
    )
    return buffer.getvalue()


class LocalDownloader:
    """Serves artifacts from a dict, into the state directory as the real one does."""

    def __init__(self, state_dir: Path, blobs: dict[str, bytes]) -> None:
        self.state_dir = state_dir
        self.blobs = blobs

    def fetch(self, ref: ArtifactRef, on_progress: Any = None) -> Path:
        path = self.state_dir / "models" / f"{ref.sha256}.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.blobs[ref.sha256])
        return path


def test_an_int8_build_gets_the_references_sample_inputs(tmp_path: Path) -> None:
    refs = {seed: reference(seed) for seed in (1, 2)}
    blobs = {hashlib.sha256(data).hexdigest(): data for data in refs.values()}
    model_sha = hashlib.sha256(MODEL).hexdigest()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / f"{model_sha}.onnx").write_bytes(MODEL)
    events: list[tuple[str, str]] = []
    resolver = EngineResolver(
        EngineCache(tmp_path / "engines", 1 << 30),
        None,
        "gw-1",
        build_timeout_s=120,
        emit=lambda kind, slot, message, **data: events.append((kind, message)),
        builders={"tensorrt": "tests.integration.agent.recording_builder"},
    )
    stage = ResolveEngine(
        resolver,
        cast(PowerModes, SimpleNamespace(facts=tensorrt_facts(), apply=lambda slot: False)),
        "tensorrt",
        tmp_path,
        FetchReference(cast(Downloader, LocalDownloader(tmp_path, blobs)), lambda: None),
    )

    def resolve(data: bytes, delegate: DelegateConfig) -> Resolved:
        sha = hashlib.sha256(data).hexdigest()
        slot = ModelSlot(
            name="classifier",
            version="1",
            artifact=ArtifactRef(url="http://ctl/m", sha256=model_sha, size=len(MODEL)),
            delegate=delegate,
            reference=ArtifactRef(url="http://ctl/r", sha256=sha, size=len(data)),
            reference_calibrates=True,
        )
        run = SimpleNamespace(slot=slot, retune=False, engine=None, phase=lambda phase: None)
        stage.run(cast(SlotRun, run))
        return cast(Resolved, run.engine)

    int8 = DelegateConfig(precision="int8")
    built = resolve(refs[1], int8)
    assert built.source == "built"
    record = json.loads(built.path.read_text())
    sha1 = hashlib.sha256(refs[1]).hexdigest()
    assert record["options"]["calibration_inputs_path"] == str(tmp_path / "models" / f"{sha1}.onnx")
    assert "calibration_cache_path" not in record["options"]
    assert record["samples"]["input:image"] == [3, 1, 3, 32, 32]  # the reference's inputs
    assert built.manifest.content.calibration_sha256 == sha1
    started = next(message for kind, message in events if kind == "build_started")
    assert started.endswith("calibrating INT8 from the version's sample inputs")

    assert resolve(refs[1], int8).source == "cached"  # the same samples: the same engine
    other = resolve(refs[2], int8)  # other samples: another engine
    assert other.source == "built"
    assert other.key != built.key

    fp16 = resolve(refs[1], DelegateConfig(precision="fp16"))  # nothing to calibrate
    assert "calibration_inputs_path" not in json.loads(fp16.path.read_text())["options"]
    assert fp16.manifest.content.calibration_sha256 is None
