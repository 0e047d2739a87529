"""INT8 from a calibration cache of another TensorRT release, on the stand-in of
every release with a calibrator (and the newest, which has none).

TensorRT ignores a cache whose header names another release or calibrator; the cache-only
calibrator had no batches, so the build failed late ("no scaling factors detected",
NVIDIA/TensorRT#1378, #1827). Now such a cache is refused before anything is parsed or built, and
without a cache the build calibrates here from the version's sample inputs (an NPZ of
``input:<tensor>`` arrays, first axis = case). ``build_serialized_network`` is scripted to call the
calibrator as TensorRT does (``get_batch`` until None, then ``write_calibration_cache`` with a
memoryview); the stand-in checks names and arguments, never numbers.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.trt_host import cudart
from agent.trt_host.backend_trt import build_options
from agent.trt_host.build import BuildError, BuildOptions, BuildResult, build
from agent.trt_host.calibration import cache_problem, parse_header, release_number
from tests.tensorrt_api.conftest import RecordingCuda, is_named_kind
from tests.tensorrt_api.scenes import (
    TWO_INPUTS,
    caps_of,
    conv_onnx,
    network_with_two_dynamic_inputs,
)
from tests.tensorrt_api.standin import StandIn

pytestmark = pytest.mark.tensorrt_api
CALIBRATORS = pytest.mark.parametrize("release", ["8.5.2", "8.6.1", "10.3.0", "10.13.3"])
# The header each release writes (see agent/trt_host/calibration.py for where this is verified).
HEADERS = {
    "8.5.2": b"TRT-8502-EntropyCalibration2",
    "8.6.1": b"TRT-8601-EntropyCalibration2",
    "10.3.0": b"TRT-100300-EntropyCalibration2",
    "10.13.3": b"TRT-101303-EntropyCalibration2",
}
WRITTEN = b"TRT-8502-EntropyCalibration2\nx: 3c010a14\ny: 3c010a14\nout: 3d4c8f5c\n"


class SnapshotCuda(RecordingCuda):
    """Also keeps the bytes each host→device copy reads, at the time of the copy."""

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[bytes] = []

    def memcpy_async(self, dst: int, src: int, nbytes: int, kind: Any, stream: int) -> None:
        super().memcpy_async(dst, src, nbytes, kind, stream)
        self.copied.append(ctypes.string_at(src, nbytes))


def build_with(s: StandIn, cuda: Any = None, **options: Any) -> BuildResult:
    opts = BuildOptions(profiles=TWO_INPUTS, **options)
    extra = {} if cuda is None else {"cuda": cuda}  # without: the call the code before had
    return build(s.module, caps_of(s), conv_onnx(), opts, lambda p, m: None, **extra)


def calibrate_like_tensorrt(s: StandIn, names: tuple[str, ...] = ("x", "y")) -> list[Any]:
    """build_serialized_network asks the calibrator for batches until None, then hands it the
    cache it wrote; returns what each get_batch answered."""
    answers: list[Any] = []

    def build_serialized(self: Any, network: Any, config: Any) -> Any:
        calibrator = s.recorder.sets("IBuilderConfig.int8_calibrator")[-1].args[0]
        assert calibrator.get_batch_size() == 1
        assert calibrator.read_calibration_cache() is None  # no cache: calibrate
        while True:
            answers.append(calibrator.get_batch(list(names)))
            if answers[-1] is None:
                break
        calibrator.write_calibration_cache(memoryview(WRITTEN))
        return s._new("IHostMemory")

    s.script("Builder.build_serialized_network", build_serialized)
    return answers


def samples(tmp_path: Path, cases: int = 3, shape: tuple[int, ...] = (2, 3, 16, 16)) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path / "reference.npz"
    arrays = {
        "input:x": rng.normal(size=(cases, *shape)),  # float64: calibrated as float32
        "input:y": rng.normal(size=(cases, *shape)).astype(np.float32),
        "output:out": np.zeros((cases, *shape), np.float32),
    }
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


@CALIBRATORS
def test_row2_a_calibration_cache_of_another_release_is_refused_before_building(
    release: str,
) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    other = "8.6.1" if release == "8.5.2" else "8.5.2"
    cache = HEADERS[other] + b"\nx: 3c010a14\n"
    with pytest.raises(BuildError) as refused:
        build_with(s, precision="int8", calibration_cache=cache)
    text = str(refused.value)
    assert f"written by TensorRT {other}" in text
    assert f"this device runs TensorRT {release}" in text
    assert f"calibrate again on a device with TensorRT {release}" in text
    assert "remove calibration_cache_sha256" in text
    assert not s.recorder.touched("OnnxParser.parse")
    assert not s.recorder.touched("Builder.build_serialized_network")


@CALIBRATORS
def test_row2_a_calibration_cache_without_a_readable_header_is_refused(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    with pytest.raises(BuildError, match="no readable TensorRT header"):
        build_with(s, precision="int8", calibration_cache=b"x: 3c010a14\ny: 3c010a14\n")
    assert not s.recorder.touched("Builder.build_serialized_network")


@CALIBRATORS
def test_row2_a_calibration_cache_of_this_release_is_served(release: str) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    cache = HEADERS[release] + b"\nx: 3c010a14\n"
    build_with(s, precision="int8", calibration_cache=cache)
    calibrator = s.recorder.sets("IBuilderConfig.int8_calibrator")[0].args[0]
    assert calibrator.read_calibration_cache() == cache
    assert calibrator.get_batch(["x", "y"]) is None
    assert s.recorder.touched("Builder.build_serialized_network")


@CALIBRATORS
def test_row2_without_a_cache_int8_calibrates_from_the_versions_sample_inputs(
    release: str, tmp_path: Path
) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    answers = calibrate_like_tensorrt(s)
    cuda = SnapshotCuda()
    path = samples(tmp_path)
    result = build_with(s, cuda, precision="int8", calibration_inputs=str(path))
    rec, trt = s.recorder, s.module
    assert rec.calls("IBuilderConfig.set_flag")[0].args == (trt.BuilderFlag.INT8,)
    assert rec.touched("IInt8EntropyCalibrator2")
    # one case per get_batch, into the same two device buffers, then None
    mallocs = [args[0] for name, args in cuda.calls if name == "malloc"]
    assert mallocs == [2 * 3 * 16 * 16 * 4] * 2
    pointers = answers[0]
    assert len(pointers) == 2
    assert answers == [pointers, pointers, pointers, None]
    copies = [args for name, args in cuda.calls if name == "memcpy_async"]
    assert [c[0] for c in copies] == pointers * 3
    assert all(is_named_kind(c[3]) and c[3] is cudart.MEMCPY_HOST_TO_DEVICE for c in copies)
    with np.load(path) as npz:
        x, y = npz["input:x"].astype(np.float32), npz["input:y"]
    assert cuda.copied == [a[case].tobytes() for case in range(3) for a in (x, y)]
    names = [name for name, _ in cuda.calls]
    assert names.count("stream_synchronize") == 3
    assert names[-3:] == ["free", "free", "stream_destroy"]  # after the build, not before
    # the calibration profile is the samples' shape, min = opt = max
    profile = rec.calls("IBuilderConfig.set_calibration_profile")[0].args[0]
    assert profile is not rec.calls("IBuilderConfig.add_optimization_profile")[0].args[0]
    shapes = [c.kwargs for c in rec.calls("IOptimizationProfile.set_shape")[-2:]]
    assert all(k["min"] == k["opt"] == k["max"] == (2, 3, 16, 16) for k in shapes)
    assert result.calibration_cache == WRITTEN
    assert not [e for e in rec.events if e.op == "missing"]


@CALIBRATORS
def test_row2_a_calibration_batch_that_fails_inside_tensorrt_fails_the_build(
    release: str, tmp_path: Path
) -> None:
    """TensorRT's binding prints an exception raised in get_batch and reads it as "no more
    batches": the build reports it instead of calibrating on fewer cases (or none)."""
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    calibrate_like_tensorrt(s, names=("x", "z"))
    cuda = RecordingCuda()
    with pytest.raises(BuildError, match=r"calibration batch 0: .*without samples: \['z'\]"):
        build_with(s, cuda, precision="int8", calibration_inputs=str(samples(tmp_path)))
    assert [name for name, _ in cuda.calls if name == "malloc"] == []


@CALIBRATORS
def test_row2_sample_inputs_that_do_not_fit_the_network_are_refused_before_building(
    release: str, tmp_path: Path
) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s)
    narrow = samples(tmp_path, shape=(2, 3, 8, 8))
    with pytest.raises(BuildError, match=r"sample input 'x' has shape \(3, 2, 3, 8, 8\)"):
        build_with(s, precision="int8", calibration_inputs=str(narrow))
    lacking = tmp_path / "lacking.npz"
    np.savez(lacking, **{"input:x": np.zeros((1, 1, 3, 16, 16), np.float32)})  # type: ignore[arg-type]
    with pytest.raises(BuildError, match="sample inputs lack input:y"):
        build_with(s, precision="int8", calibration_inputs=str(lacking))
    with pytest.raises(BuildError, match="need precision int8"):
        build_with(s, precision="fp16", calibration_inputs=str(narrow))
    assert not s.recorder.touched("Builder.build_serialized_network")


def test_row2_the_newest_release_refuses_int8_calibration(tmp_path: Path) -> None:
    s = StandIn("newest")
    network_with_two_dynamic_inputs(s)
    with pytest.raises(BuildError, match="strongly typed"):
        build_with(s, precision="int8", calibration_inputs=str(samples(tmp_path)))
    assert not s.recorder.touched("IInt8EntropyCalibrator2")


@pytest.mark.parametrize("release", ["8.6.1"])
def test_row2_a_quantized_model_is_not_calibrated(release: str, tmp_path: Path) -> None:
    s = StandIn(release)
    network_with_two_dynamic_inputs(s, layer_types=("QUANTIZE", "CONVOLUTION", "DEQUANTIZE"))
    result = build_with(s, precision="int8", calibration_inputs=str(samples(tmp_path)))
    assert "not calibrated" in " ".join(result.notes)
    assert not s.recorder.sets("IBuilderConfig.int8_calibrator")


def test_row2_plain_options_carry_the_sample_inputs(tmp_path: Path) -> None:
    options = build_options({"precision": "int8", "calibration_inputs_path": "/r/ref.npz"})
    assert options.calibration_inputs == "/r/ref.npz"
    assert build_options({"calibration_cache_out_path": "/c.cache"}).calibration_inputs is None


def test_row2_cache_headers_name_the_release_that_wrote_them() -> None:
    """Headers as TensorRT writes them (8.x: major*1000+minor*100+patch; 10.x and later:
    major*10000+minor*100+patch), with the cache's scale lines after them."""
    cases = {
        b"TRT-7000-EntropyCalibration2\ndata: 3c008912\nconv1: 3c88edfc\n": (7, 0, 0),
        b"TRT-8502-EntropyCalibration2\ninput: 3c010a14\n": (8, 5, 2),
        b"TRT-8601-EntropyCalibration2\r\nimages: 3b66eddc\n168: 3dc6cf6e\n": (8, 6, 1),
        b"TRT-8510-EntropyCalibration2\nx: 4000890a\n": (8, 5, 10),
        b"TRT-100300-EntropyCalibration2\ninput_1:0: 3c010a14\n": (10, 3, 0),
        b"TRT-101303-EntropyCalibration2": (10, 13, 3),
    }
    for cache, release in cases.items():
        header = parse_header(cache)
        assert header is not None, cache
        assert header.release == release
        assert header.number == release_number(release)
        assert header.algorithm == "EntropyCalibration2"
        assert cache_problem(release, cache) is None
    minmax = parse_header(b"TRT-8601-MinMaxCalibration\nx: 3c010a14\n")
    assert minmax is not None
    assert minmax.algorithm == "MinMaxCalibration"
    minmax_cache = b"TRT-8601-MinMaxCalibration\nx: 3c010a14\n"
    assert "MinMaxCalibration calibrator" in (cache_problem((8, 6, 1), minmax_cache) or "")
    for unreadable in (b"", b"\x89PNG\r\n", b"images: 3b66eddc\n", b"TRT-86x1-Entropy\n"):
        assert parse_header(unreadable) is None
        assert "no readable TensorRT header" in (cache_problem((8, 6, 1), unreadable) or "")
    assert release_number((11, 1, 0)) == 110100
    assert "written by TensorRT 8.6.0" in (cache_problem((8, 6, 1), b"TRT-8600-X") or "")
