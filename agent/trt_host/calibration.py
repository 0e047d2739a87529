"""INT8 calibration for :mod:`.build`: a stored cache tied to the release that wrote it, or
batches of the version's sample inputs calibrated on this device.

A calibration cache is text whose first line names the TensorRT release and the calibrator that
wrote it, e.g. ``TRT-8502-EntropyCalibration2``. TensorRT uses a cache only when both match
(NVIDIA's ``samples/sampleINT8/README.md`` up to tag 8.5.2: "If the read calibration file is
compatible with calibrator type ... and TensorRT version, builder would skip the calibration
step"); otherwise it calibrates, and a cache-only calibrator has no batches, so the build fails
late with "no scaling factors detected" (NVIDIA/TensorRT#1378, #1827). Verified for the number:

- 8.x and older: ``major*1000 + minor*100 + patch`` (``kNV_TENSORRT_VERSION_IMPL`` in
  ``include/NvInferRuntimeBase.h`` at v8.6.1; the README's example header ``TRT-7000-...`` for
  7.0.0; public caches ``TRT-8601-EntropyCalibration2`` from 8.6.1);
- 10.x and later: ``major*10000 + minor*100 + patch`` (``NV_TENSORRT_VERSION_INT`` in
  ``include/NvInferRuntimeBase.h`` at v10.3.0 and v10.13.3; a public 10.3 cache reads
  ``TRT-100300-EntropyCalibration2``). The header string itself is written inside libnvinfer,
  whose source is not public: no NVIDIA source prints it.

The build number (``8.5.2.2``'s last part) is not in the header. The algorithm part of
:class:`~tensorrt.IInt8EntropyCalibrator2`'s caches is ``EntropyCalibration2`` (every published
header above).

:class:`SampleBatches` serves an NPZ of ``input:<tensor>`` arrays with a leading case axis (the
reference NPZ layout, ``shared/reference_layout.py``) one case per ``get_batch``, copied to device
buffers through :mod:`.cudart`. TensorRT's binding (``python/src/infer/pyInt8.cpp``) swallows an
exception raised in ``get_batch`` (printed, answered as "no more batches"): the calibrator keeps
it in ``errors`` for the build to report, and copies ``write_calibration_cache``'s memoryview
(TensorRT's memory) into ``written``.

Python 3.8 syntax; standard library and numpy (tensorrt and the CUDA binding come as arguments).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .cudart import MEMCPY_HOST_TO_DEVICE

ALGORITHM = "EntropyCalibration2"
_HEADER = re.compile(r"TRT-(\d+)-(\w+)\Z")
_FIX = (
    "calibrate again on a device with TensorRT %s and store that cache, or remove "
    "calibration_cache_sha256 from the config so the device calibrates from the version's "
    "sample inputs"
)


class CalibrationError(ValueError):
    """The calibration cache or the sample inputs cannot calibrate this build."""


def release_number(version: Sequence[int]) -> int:
    """The number TensorRT ``version`` writes into a cache header (8.5.2 → 8502, 10.3.0 →
    100300)."""
    major, minor, patch = (*(int(p) for p in version), 0, 0, 0)[:3]
    return major * (10000 if major >= 10 else 1000) + minor * 100 + patch


@dataclass(frozen=True)
class CacheHeader:
    """The first line of a calibration cache: who wrote it."""

    number: int
    algorithm: str

    @property
    def release(self) -> Tuple[int, int, int]:
        n = self.number
        if n >= 100000:
            return n // 10000, n // 100 % 100, n % 100
        return n // 1000, n // 100 % 10, n % 100

    @property
    def text(self) -> str:
        return "TRT-%d-%s" % (self.number, self.algorithm)


def parse_header(cache: bytes) -> Optional[CacheHeader]:
    """The header of ``cache``; None when its first line is not ``TRT-<number>-<algorithm>``."""
    first = bytes(cache[:200]).split(b"\n", 1)[0].strip()
    try:
        match = _HEADER.match(first.decode("ascii"))
    except UnicodeDecodeError:
        return None
    if match is None:
        return None
    return CacheHeader(int(match.group(1)), match.group(2))


def _label(version: Sequence[int]) -> str:
    return ".".join(str(int(p)) for p in version)


def cache_problem(version: Sequence[int], cache: bytes) -> Optional[str]:
    """Why TensorRT ``version`` would not use ``cache`` (None when it would)."""
    running = _label(version[:3])
    header = parse_header(cache)
    if header is None:
        shown = bytes(cache[:40]).split(b"\n", 1)[0]
        return (
            "the INT8 calibration cache has no readable TensorRT header (first line %r, expected "
            "like 'TRT-%d-%s'), so it cannot be tied to the release that wrote it: "
            % (shown, release_number(version), ALGORITHM)
        ) + (_FIX % running)
    if header.number != release_number(version):
        return (
            "the INT8 calibration cache was written by TensorRT %s (header %s) but this device "
            "runs TensorRT %s, which ignores a cache of another release and fails the build "
            "with no scaling factors: " % (_label(header.release), header.text, running)
        ) + (_FIX % running)
    if header.algorithm != ALGORITHM:
        return (
            "the INT8 calibration cache was written by a %s calibrator (header %s); this host "
            "calibrates with IInt8EntropyCalibrator2 (%s) and TensorRT ignores a cache of "
            "another calibrator: " % (header.algorithm, header.text, ALGORITHM)
        ) + (_FIX % running)
    return None


def load_samples(path: str, inputs: Dict[str, Tuple[int, ...]]) -> Dict[str, np.ndarray]:
    """The ``input:<tensor>`` arrays of the NPZ at ``path`` for a network whose inputs have
    ``inputs`` dims (-1 = dynamic): floats as float32 (TensorRT calibrates in FP32), one case
    count; CalibrationError naming the first misfit."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k[6:]: npz[k] for k in npz.files if k.startswith("input:")}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CalibrationError("sample inputs %s are not a readable NPZ: %s" % (path, exc)) from exc
    missing = sorted(set(inputs) - set(arrays))
    if missing:
        raise CalibrationError(
            "sample inputs lack input:%s: calibration feeds every network input"
            % ", input:".join(missing)
        )
    counts = set()
    for name, dims in inputs.items():
        array = arrays[name]
        counts.add(array.shape[0] if array.ndim else 0)
        fits = len(array.shape) == len(dims) + 1 and all(
            d < 0 or d == s for d, s in zip(dims, array.shape[1:])
        )
        if not fits:
            raise CalibrationError(
                "sample input %r has shape %s; the network takes %s per case (first axis = case)"
                % (name, tuple(array.shape), dims)
            )
        if array.dtype.kind == "f" and array.dtype != np.float32:
            arrays[name] = array.astype(np.float32)
    if len(counts) != 1 or 0 in counts:
        raise CalibrationError(
            "sample inputs need one case count of at least 1 on their first axis (have %s)"
            % sorted(counts)
        )
    return {name: arrays[name] for name in inputs}


def from_samples(builder: Any, network: Any, path: str, cuda: Any) -> Tuple[SampleBatches, Any]:
    """Batches of the NPZ at ``path`` for ``network`` and the calibration profile of their shapes
    (min = opt = max; None when every input is static); ``cuda`` None opens libcudart."""
    tensors = [network.get_input(i) for i in range(int(network.num_inputs))]
    dims = {str(t.name): tuple(int(d) for d in t.shape) for t in tensors}
    samples = load_samples(path, dims)
    profile = None
    for name, shape in dims.items():
        if any(d < 0 for d in shape):
            if profile is None:
                profile = builder.create_optimization_profile()
            case = tuple(int(d) for d in samples[name].shape[1:])
            profile.set_shape(name, min=case, opt=case, max=case)
    if cuda is None:
        from .cudart import CudaRuntime

        cuda = CudaRuntime()
    return SampleBatches(cuda, samples), profile


class SampleBatches:
    """One case of every sample input per :meth:`batch`, copied into device buffers kept for
    the calibration (one per input, the size of one case); None when the cases run out."""

    def __init__(self, cuda: Any, samples: Dict[str, np.ndarray]) -> None:
        self.cuda = cuda
        self.samples = samples
        self.cases = min(int(a.shape[0]) for a in samples.values())
        self.served = 0
        self.buffers: Dict[str, int] = {}
        self.stream: Optional[int] = None

    def batch(self, names: Sequence[str]) -> Optional[List[int]]:
        if self.served >= self.cases:
            return None
        unknown = [n for n in names if n not in self.samples]
        if unknown:
            raise CalibrationError("TensorRT asked for inputs without samples: %s" % unknown)
        if self.stream is None:
            self.stream = int(self.cuda.stream_create())
        held = []  # the host copies must live until the stream has read them
        pointers = []
        for name in names:
            case = np.ascontiguousarray(self.samples[name][self.served])
            held.append(case)
            if name not in self.buffers:
                self.buffers[name] = int(self.cuda.malloc(case.nbytes))
            pointer = self.buffers[name]
            self.cuda.memcpy_async(
                pointer, case.ctypes.data, case.nbytes, MEMCPY_HOST_TO_DEVICE, self.stream
            )
            pointers.append(pointer)
        self.cuda.stream_synchronize(self.stream)
        self.served += 1
        return pointers

    def close(self) -> None:
        for pointer in self.buffers.values():
            self.cuda.free(pointer)
        self.buffers = {}
        if self.stream is not None:
            self.cuda.stream_destroy(self.stream)
            self.stream = None


def make_calibrator(
    trt: Any, cache: Optional[bytes] = None, batches: Optional[SampleBatches] = None
) -> Any:
    """An ``IInt8EntropyCalibrator2`` serving ``cache`` (checked by :func:`cache_problem`) or,
    without one, the ``batches`` TensorRT calibrates with."""

    class Calibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.written: Optional[bytes] = None
            self.errors: List[str] = []

        def get_batch_size(self) -> int:
            return 1  # explicit batch: a case carries its own batch dimension

        def get_batch(self, names: List[str]) -> Optional[List[int]]:
            if batches is None:
                return None
            try:
                return batches.batch([str(n) for n in names])
            except Exception as exc:  # noqa: BLE001 - TensorRT's binding would only print it
                self.errors.append("calibration batch %d: %s" % (batches.served, exc))
                return None

        def read_calibration_cache(self) -> Optional[bytes]:
            return cache

        def write_calibration_cache(self, cache: Any) -> None:
            self.written = bytes(cache)

        def close(self) -> None:
            if batches is not None:
                batches.close()

    return Calibrator()
