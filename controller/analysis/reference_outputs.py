"""Reference outputs of a model version: seeded random inputs and ONNX Runtime FP32 outputs, as NPZ.

Computed at push (or taken from an operator-uploaded NPZ, checked by :func:`check_npz` against
the model's tensors, its size from the headers before anything is inflated) and
stored as an artifact; each device validates a new engine against it before switching to it
(``agent.swap.validation``). Layout: ``input:<name>`` and ``output:<name>`` arrays whose first axis
is the case; dynamic dimensions are 1. Pure apart from running ONNX Runtime on the CPU, except
:func:`store_reference` / :func:`reference_ref`, which keep the NPZ as an ordinary artifact and an
index ``artifacts/references/<onnx sha256>.json`` → its sha256 and size (no schema change).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Collection
from pathlib import Path

import numpy as np
import onnxruntime as ort

from controller.artifacts.store import ArtifactStore, StoredArtifact
from shared.messages import ArtifactRef
from shared.reference_layout import (
    MAX_REFERENCE_BYTES,
    ExpectedTensor,
    ReferenceLayoutError,
    check_reference,
    size_text,
)

DEFAULT_CASES = 4
DEFAULT_SEED = 20240601
_HEADER_BYTES = 4096
"""Room left under the cap for each array's .npy header (numpy writes 128 bytes or so)."""

_ORT_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


class ReferenceOutputsError(ValueError):
    """The model cannot be run for references, or an uploaded NPZ does not fit it."""


def _session(onnx_bytes: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    try:
        return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ReferenceOutputsError(f"ONNX Runtime cannot load the model: {exc}") from exc


def _input(arg: object, rng: np.random.Generator) -> np.ndarray:
    kind = getattr(arg, "type", "")
    dtype = _ORT_DTYPES.get(kind)
    if dtype is None:
        raise ReferenceOutputsError(
            f"input {getattr(arg, 'name', '?')!r} has type {kind}: upload reference outputs "
            "(--reference file.npz) for this model"
        )
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in getattr(arg, "shape", ()))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)


def reference_npz(
    onnx_bytes: bytes,
    cases: int = DEFAULT_CASES,
    seed: int = DEFAULT_SEED,
    max_bytes: int = MAX_REFERENCE_BYTES,
) -> bytes:
    """NPZ bytes of ``cases`` seeded random input sets and the model's FP32 outputs for them;
    fewer cases when that many would pass ``max_bytes`` uncompressed, the cap agents enforce."""
    session = _session(onnx_bytes)
    rng = np.random.default_rng(seed)
    inputs: dict[str, list[np.ndarray]] = {a.name: [] for a in session.get_inputs()}
    outputs: dict[str, list[np.ndarray]] = {a.name: [] for a in session.get_outputs()}
    case = 0
    while case < cases:
        feeds = {a.name: _input(a, rng) for a in session.get_inputs()}
        try:
            results = session.run(list(outputs), feeds)
        except Exception as exc:
            raise ReferenceOutputsError(f"ONNX Runtime failed on a random input: {exc}") from exc
        for name, value in feeds.items():
            inputs[name].append(value)
        for name, value in zip(outputs, results, strict=True):
            outputs[name].append(np.asarray(value))
        if case == 0:
            cases = min(cases, _cases_within(max_bytes, feeds.values(), results))
        case += 1
    arrays = {f"input:{n}": np.stack(v) for n, v in inputs.items()}
    arrays |= {f"output:{n}": np.stack(v) for n, v in outputs.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _cases_within(
    max_bytes: int, feeds: Collection[np.ndarray], results: Collection[object]
) -> int:
    """How many cases the size of this one fit ``max_bytes`` with their .npy headers."""
    per_case = sum(np.asarray(a).nbytes for a in (*feeds, *results))
    headers = _HEADER_BYTES * (len(feeds) + len(results))
    fitting = (max_bytes - headers) // max(per_case, 1)
    if fitting < 1:
        raise ReferenceOutputsError(
            f"one reference case takes {size_text(per_case)}, over the {size_text(max_bytes)} "
            "cap on reference outputs"
        )
    return fitting


def check_npz(onnx_bytes: bytes, npz_bytes: bytes) -> None:
    """An operator-uploaded NPZ must hold exactly the model's inputs and outputs, each with a
    leading case axis, the tensor's dims and dtype, within :data:`MAX_REFERENCE_BYTES`
    uncompressed (checked from the headers, before any array is inflated), and intact."""
    session = _session(onnx_bytes)
    inputs = [_expected(a) for a in session.get_inputs()]
    outputs = [_expected(a) for a in session.get_outputs()]
    try:
        check_reference(npz_bytes, inputs, outputs)
    except ReferenceLayoutError as exc:
        raise ReferenceOutputsError(str(exc)) from exc


def _expected(arg: object) -> ExpectedTensor:
    dtype = _ORT_DTYPES.get(getattr(arg, "type", ""))
    return ExpectedTensor(
        name=str(getattr(arg, "name", "?")),
        dims=tuple(getattr(arg, "shape", ())),
        dtype=None if dtype is None else np.dtype(dtype).name,
    )


def _index_path(store: ArtifactStore, onnx_sha256: str) -> Path:
    store.path_of(onnx_sha256)  # refuses anything but a sha256 (no path tricks)
    return store.root / "references" / f"{onnx_sha256}.json"


def store_reference(
    store: ArtifactStore, onnx_sha256: str, onnx_bytes: bytes, npz_bytes: bytes | None = None
) -> StoredArtifact:
    """Store the reference NPZ of a model (computed, or ``npz_bytes`` checked) as an artifact."""
    if npz_bytes is None:
        npz_bytes = reference_npz(onnx_bytes)
    else:
        check_npz(onnx_bytes, npz_bytes)
    return keep_reference(store, onnx_sha256, npz_bytes)


def keep_reference(store: ArtifactStore, onnx_sha256: str, npz_bytes: bytes) -> StoredArtifact:
    """Store an NPZ computed by :func:`reference_npz` (here or in a child process) as the
    reference outputs of model ``onnx_sha256``, unchecked."""
    pending = store.begin()
    try:
        pending.write(npz_bytes)
        stored = pending.commit()
    except BaseException:
        pending.abort()
        raise
    index = _index_path(store, onnx_sha256)
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(f".{index.name}.tmp")
    tmp.write_text(json.dumps({"sha256": stored.sha256, "size": stored.size}))
    os.replace(tmp, index)
    return stored


def reference_ref(store: ArtifactStore, public_url: str, onnx_sha256: str) -> ArtifactRef | None:
    """The ArtifactRef of the reference NPZ of model ``onnx_sha256``; None if none is stored."""
    index = _index_path(store, onnx_sha256)
    try:
        entry = json.loads(index.read_text())
    except (OSError, ValueError):
        return None
    sha, size = str(entry.get("sha256", "")), int(entry.get("size", 0))
    if not store.contains(sha):
        return None
    return ArtifactRef(
        url=f"{public_url.rstrip('/')}/api/v1/artifacts/{sha}", sha256=sha, size=size
    )
