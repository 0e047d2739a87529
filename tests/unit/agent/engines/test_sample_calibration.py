"""When a TensorRT build calibrates INT8 from the version's sample
inputs, the resolve stage fetches the reference NPZ before the engine is resolved, checks it from
its headers, hands its path to the build and names its sha256 in the engine's content key; every
other build fetches nothing early and keeps the key it had."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from agent.engines.identity import EngineIdentity, identify
from agent.engines.resolver import EngineResolver
from agent.engines.sample_calibration import calibration_reference, check_samples
from agent.errors import ModelLoadError
from agent.link.downloader import Downloader
from agent.slots.pipeline import SlotRun
from agent.slots.stages import FetchReference, PowerModes, ResolveEngine
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey
from shared.messages import ArtifactRef, ModelSlot
from shared.reference_layout import ReferenceLayoutError
from tests.unit.agent.engines.test_engine_identity import orin_nx

MODEL_SHA = "a" * 64
REF = ArtifactRef(url="http://ctl/api/v1/artifacts/" + "b" * 64, sha256="b" * 64, size=10)
INT8 = DelegateConfig(precision="int8")


def slot(
    delegate: DelegateConfig = INT8, *, calibrates: bool = True, reference: bool = True
) -> ModelSlot:
    return ModelSlot(
        name="classifier",
        version="1",
        artifact=ArtifactRef(url="http://ctl/m", sha256=MODEL_SHA, size=10),
        delegate=delegate,
        reference=REF if reference else None,
        reference_calibrates=calibrates,
    )


def npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


REFERENCE = npz(
    **{
        "input:image": np.ones((2, 1, 3, 8, 8), np.float32),
        "output:probabilities": np.ones((2, 1, 10), np.float32),
    }
)


def test_only_a_weakly_typed_int8_or_best_tensorrt_build_without_a_cache_calibrates() -> None:
    assert calibration_reference("tensorrt", slot()) == REF
    assert calibration_reference("tensorrt", slot(DelegateConfig(precision="best"))) == REF
    cached = DelegateConfig(precision="int8", calibration_cache_sha256="c" * 64)
    for runtime, made in (
        ("onnxruntime", slot()),  # ONNX Runtime takes no calibration
        ("nosuch", slot()),
        ("tensorrt", slot(calibrates=False)),  # random inputs, or a model with Q/DQ nodes
        ("tensorrt", slot(reference=False)),
        ("tensorrt", slot(cached)),  # the config's cache calibrates
        ("tensorrt", slot(DelegateConfig(precision="fp16"))),
        ("tensorrt", slot(DelegateConfig(precision="int8", strongly_typed=True))),
    ):
        assert calibration_reference(runtime, made) is None, (runtime, made.delegate)


def test_the_sample_inputs_are_checked_from_their_headers(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    good.write_bytes(REFERENCE)
    check_samples(good)
    outputs_only = tmp_path / "outputs.npz"
    outputs_only.write_bytes(npz(**{"output:y": np.ones((1, 2), np.float32)}))
    with pytest.raises(ReferenceLayoutError, match="no input:<name> arrays"):
        check_samples(outputs_only)
    disagree = tmp_path / "disagree.npz"
    disagree.write_bytes(npz(**{"input:a": np.ones((2, 1)), "input:b": np.ones((3, 1))}))
    with pytest.raises(ReferenceLayoutError, match="disagree on the number of cases"):
        check_samples(disagree)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(ReferenceLayoutError, match="not a ZIP"):
        check_samples(garbage)


def test_the_content_key_names_the_reference_only_when_calibrating_from_it() -> None:
    facts = orin_nx()
    plain = identify("tensorrt", facts, MODEL_SHA, INT8)
    assert plain.content == ContentKey.of(MODEL_SHA, INT8)  # every key built before: unchanged
    assert plain.content.calibration_sha256 is None
    calibrated = identify("tensorrt", facts, MODEL_SHA, INT8, REF.sha256)
    assert calibrated.content.calibration_sha256 == REF.sha256
    assert calibrated.key != plain.key
    assert identify("tensorrt", facts, MODEL_SHA, INT8, "d" * 64).key != calibrated.key
    cached = DelegateConfig(precision="int8", calibration_cache_sha256="c" * 64)
    assert identify("tensorrt", facts, MODEL_SHA, cached).content.calibration_sha256 == "c" * 64


class FakeDownloader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.fetched: list[str] = []

    def fetch(self, ref: ArtifactRef, on_progress: Any = None) -> Path:
        self.fetched.append(ref.sha256)
        path = self.root / f"{ref.sha256}.onnx"
        path.write_bytes(REFERENCE)
        return path


class FakeResolver:
    def __init__(self) -> None:
        self.calls: list[tuple[EngineIdentity, Path | None]] = []

    def resolve(
        self, slot: str, onnx: Path, identity: EngineIdentity, config: DelegateConfig, **kw: Any
    ) -> str:
        self.calls.append((identity, kw["calibration_inputs"]))
        return "resolved"


def resolve_stage(tmp_path: Path, made: ModelSlot) -> tuple[FakeDownloader, FakeResolver]:
    downloader, resolver = FakeDownloader(tmp_path), FakeResolver()
    power = SimpleNamespace(facts=orin_nx(), apply=lambda slot: False)
    stage = ResolveEngine(
        cast(EngineResolver, resolver),
        cast(PowerModes, power),
        "tensorrt",
        tmp_path,
        FetchReference(cast(Downloader, downloader), on_progress=lambda: None),
    )
    run = SimpleNamespace(slot=made, retune=False, engine=None, phase=lambda phase: None)
    stage.run(cast(SlotRun, run))
    assert run.engine == "resolved"
    return downloader, resolver


def test_the_resolve_stage_fetches_the_samples_first_and_builds_with_them(tmp_path: Path) -> None:
    downloader, resolver = resolve_stage(tmp_path, slot())
    assert downloader.fetched == [REF.sha256]
    ((identity, inputs),) = resolver.calls
    assert inputs == tmp_path / f"{REF.sha256}.onnx"
    assert identity == identify("tensorrt", orin_nx(), MODEL_SHA, INT8, REF.sha256)


def test_a_build_that_does_not_calibrate_fetches_nothing_early_and_keeps_its_key(
    tmp_path: Path,
) -> None:
    for made in (slot(calibrates=False), slot(DelegateConfig(precision="fp16"))):
        downloader, resolver = resolve_stage(tmp_path, made)
        assert downloader.fetched == []
        ((identity, inputs),) = resolver.calls
        assert inputs is None
        assert identity == identify("tensorrt", orin_nx(), MODEL_SHA, made.delegate)


def test_sample_inputs_that_cannot_calibrate_fail_the_load_saying_why(tmp_path: Path) -> None:
    class Broken(FakeDownloader):
        def fetch(self, ref: ArtifactRef, on_progress: Any = None) -> Path:
            path = self.root / "broken.npz"
            path.write_bytes(npz(**{"output:y": np.ones((1, 2), np.float32)}))
            return path

    stage = FetchReference(cast(Downloader, Broken(tmp_path)), on_progress=lambda: None)
    with pytest.raises(ModelLoadError, match=r"sample inputs of 1 \(its reference\) cannot"):
        stage.samples("1", REF)
