"""Reference outputs of a model version: seeded random inputs and ONNX Runtime FP32 outputs, as NPZ.

Computed at push (or taken from an operator-uploaded NPZ, checked by :func:`check_npz` against
the model's tensors, its size from the headers before anything is inflated) and
stored as an artifact; each device validates a new engine against it before switching to it
(``agent.swap.validation``). Layout: ``input:<name>`` and ``output:<name>`` arrays whose first axis
is the case. The inputs' shapes and values follow :func:`shared.warmup_inputs.plan_inputs`: what
the operator gave at push (``--shape``, ``--value``), else the model's dims with dynamic ones 1;
or the operator's sample inputs (``--inputs``), taken as they are. Pure apart from running ONNX
Runtime on the CPU, except
:func:`store_reference` / :func:`reference_ref`, which keep the NPZ as an ordinary artifact and an
index document ``artifacts/references/<onnx sha256>.json`` → its sha256 and size, in the artifact
store's backend (no schema change).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Collection
from typing import Any

import numpy as np
import onnxruntime as ort

from controller.artifacts.backend import artifact_key
from controller.artifacts.store import ArtifactStore, StoredArtifact
from shared.messages import ArtifactRef
from shared.reference_layout import (
    MAX_REFERENCE_BYTES,
    ExpectedTensor,
    ReferenceLayoutError,
    check_reference,
    size_text,
)
from shared.warmup_inputs import InputPlan, WarmupSpec, WarmupSpecError, plan_inputs

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


class InputsRefused(ReferenceOutputsError):
    """ONNX Runtime loaded the model but failed running it on the inputs tried: devices would
    fail the same way at warm-up (its warm-up inputs are unknown)."""


def _session(onnx_bytes: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    try:
        return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ReferenceOutputsError(f"ONNX Runtime cannot load the model: {exc}") from exc


def _dtype(arg: object) -> type:
    kind = getattr(arg, "type", "")
    dtype = _ORT_DTYPES.get(kind)
    if dtype is None:
        raise ReferenceOutputsError(
            f"input {getattr(arg, 'name', '?')!r} has type {kind}: upload reference outputs "
            "(--reference file.npz) for this model"
        )
    return dtype


def _input(arg: object, plan: InputPlan, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(_dtype(arg))
    if plan.fill is not None:
        if dtype.kind in "iu" and not float(plan.fill).is_integer():
            raise ReferenceOutputsError(
                f"--value {plan.name}={plan.fill:g}: input {plan.name!r} holds integers "
                f"({dtype.name})"
            )
        return np.full(plan.shape, plan.fill, dtype)
    if dtype.kind == "f":
        return rng.standard_normal(plan.shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, plan.shape).astype(dtype)
    return rng.integers(0, 8, plan.shape).astype(dtype)


def plans_of(session: ort.InferenceSession, given: WarmupSpec | None) -> list[InputPlan]:
    """The shape and fill of each input of ``session`` (:func:`plan_inputs`, given at push)."""
    inputs = [(a.name, list(a.shape)) for a in session.get_inputs()]
    try:
        return plan_inputs(inputs, given=given)
    except WarmupSpecError as exc:
        raise ReferenceOutputsError(str(exc)) from exc


def _shapes_text(
    session: ort.InferenceSession, feeds: dict[str, np.ndarray], plans: list[InputPlan] | None
) -> str:
    """``input [1, 1] (dynamic dims 1, random), sr [] (random)``: what ONNX Runtime was fed."""
    if plans is None:
        return ", ".join(f"{n} {list(v.shape)}" for n, v in feeds.items())
    dynamic = {
        a.name: any(not (isinstance(d, int) and d > 0) for d in a.shape)
        for a in session.get_inputs()
    }
    parts = []
    for p in plans:
        notes = ["dynamic dims 1"] if p.source == "default" and dynamic.get(p.name) else []
        notes.append("random" if p.fill is None else f"= {p.fill:g}")
        parts.append(f"{p.name} {list(feeds[p.name].shape)} ({', '.join(notes)})")
    return ", ".join(parts)


def reference_npz(
    onnx_bytes: bytes,
    cases: int = DEFAULT_CASES,
    seed: int = DEFAULT_SEED,
    max_bytes: int = MAX_REFERENCE_BYTES,
    given: WarmupSpec | None = None,
    sample: dict[str, np.ndarray] | None = None,
) -> bytes:
    """NPZ bytes of ``cases`` seeded random input sets and the model's FP32 outputs for them;
    fewer cases when that many would pass ``max_bytes`` uncompressed, the cap agents enforce.

    ``given``: the shapes and values the operator gave at push (:func:`plan_inputs`);
    ``sample``: their sample inputs (:func:`sample_cases`), used instead of random ones; a
    sample case whose inputs or outputs are shaped unlike the first case's is left out."""
    session = _session(onnx_bytes)
    rng = np.random.default_rng(seed)
    plans = plans_of(session, given)
    fixed = sample_cases(session, dict(sample)) if sample is not None else None
    if fixed is not None:
        cases = len(fixed)
    inputs: dict[str, list[np.ndarray]] = {a.name: [] for a in session.get_inputs()}
    outputs: dict[str, list[np.ndarray]] = {a.name: [] for a in session.get_outputs()}
    case = 0
    while case < cases:
        if fixed is not None:
            feeds = fixed[case]
        else:
            args = session.get_inputs()
            feeds = {a.name: _input(a, p, rng) for a, p in zip(args, plans, strict=True)}
        try:
            results = session.run(list(outputs), feeds)
        except Exception as exc:
            what = "the sample inputs" if fixed is not None else "a random input"
            raise InputsRefused(
                f"ONNX Runtime failed on {what} "
                f"({_shapes_text(session, feeds, None if fixed else plans)}): {exc}"
            ) from exc
        case += 1
        if case > 1 and not _stacks(inputs, feeds, outputs, results):
            continue  # a sample case shaped unlike the first: the NPZ stacks cases, skip it
        for name, value in feeds.items():
            inputs[name].append(value)
        for name, value in zip(outputs, results, strict=True):
            outputs[name].append(np.asarray(value))
        if case == 1:
            cases = min(cases, _cases_within(max_bytes, feeds.values(), results))
    arrays = {f"input:{n}": np.stack(v) for n, v in inputs.items()}
    arrays |= {f"output:{n}": np.stack(v) for n, v in outputs.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _stacks(
    inputs: dict[str, list[np.ndarray]],
    feeds: dict[str, np.ndarray],
    outputs: dict[str, list[np.ndarray]],
    results: list[Any],
) -> bool:
    """Whether this case's arrays have the first case's shapes (the NPZ stacks cases)."""
    same_in = all(np.shape(v) == inputs[n][0].shape for n, v in feeds.items())
    firsts = [v[0] for v in outputs.values()]
    return same_in and all(np.shape(r) == f.shape for r, f in zip(results, firsts, strict=True))


def sample_cases(
    session: ort.InferenceSession, sample: dict[str, np.ndarray]
) -> list[dict[str, np.ndarray]]:
    """The operator's sample inputs (``--inputs``) as cases: an array of its input's rank is one
    case; one rank more, its first axis counts the cases (the same count for every input)."""
    args = session.get_inputs()
    names = [a.name for a in args]
    missing, extra = [n for n in names if n not in sample], sorted(set(sample) - set(names))
    if missing or extra:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"not inputs: {', '.join(extra)}"] if extra else []
        )
        raise ReferenceOutputsError(
            f"sample inputs must hold exactly the model's inputs ({', '.join(names)}): "
            + "; ".join(problems)
        )
    counts = set()
    for arg in args:
        rank, array = len(arg.shape), sample[arg.name]
        if array.ndim == rank:
            sample[arg.name] = array[np.newaxis]
        elif array.ndim != rank + 1:
            raise ReferenceOutputsError(
                f"sample input {arg.name!r} has shape {list(array.shape)}; the model takes "
                f"rank {rank} ({arg.shape}), or rank {rank + 1} for several cases"
            )
        counts.add(sample[arg.name].shape[0])
    if len(counts) != 1:
        raise ReferenceOutputsError(f"sample inputs hold different case counts {sorted(counts)}")
    dtypes = {a.name: np.dtype(_dtype(a)) for a in args}
    return [
        {n: np.array(sample[n][c], dtype=dtypes[n]) for n in names}  # 0-d stays 0-d
        for c in range(counts.pop())
    ]


def read_sample(npz_bytes: bytes) -> dict[str, np.ndarray]:
    """Sample inputs (``--inputs``): an NPZ of arrays named after the inputs (``input:<name>``
    also accepted), numeric, at most :data:`MAX_REFERENCE_BYTES` as their headers declare
    (:func:`shared.reference_layout.read_layout` checks need the ``input:`` names, so the size
    is summed from the ZIP directory here, before any array is inflated)."""
    try:
        with zipfile.ZipFile(io.BytesIO(npz_bytes)) as archive:
            declared = sum(info.file_size for info in archive.infolist())
        if declared > MAX_REFERENCE_BYTES:
            raise ReferenceOutputsError(
                f"sample inputs take {size_text(declared)}, over the "
                f"{size_text(MAX_REFERENCE_BYTES)} cap"
            )
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as npz:
            arrays = {k.removeprefix("input:"): npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ReferenceOutputsError(f"sample inputs are not a readable NPZ: {exc}") from exc
    odd = sorted(n for n, a in arrays.items() if a.dtype.kind not in "biuf")
    if odd:
        raise ReferenceOutputsError(f"sample inputs {', '.join(odd)} are not numeric arrays")
    return arrays


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


def _index_name(onnx_sha256: str) -> str:
    artifact_key(onnx_sha256)  # refuses anything but a sha256 (no path tricks)
    return f"references/{onnx_sha256}.json"


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
    entry = {"sha256": stored.sha256, "size": stored.size}
    store.write_document(_index_name(onnx_sha256), json.dumps(entry).encode())
    return stored


def reference_ref(store: ArtifactStore, public_url: str, onnx_sha256: str) -> ArtifactRef | None:
    """The ArtifactRef of the reference NPZ of model ``onnx_sha256``; None if none is stored."""
    raw = store.read_document(_index_name(onnx_sha256))
    try:
        entry = json.loads(raw or b"")
    except ValueError:
        return None
    sha, size = str(entry.get("sha256", "")), int(entry.get("size", 0))
    if not store.contains(sha):
        return None
    return ArtifactRef(
        url=f"{public_url.rstrip('/')}/api/v1/artifacts/{sha}", sha256=sha, size=size
    )
