"""Validation before the switch: warm-up runs, then outputs against the reference (pure numpy).

The reference is an NPZ the controller stores with each model version (computed at push with
ONNX Runtime FP32 on seeded random inputs, or uploaded by the operator). Its arrays are named
``input:<tensor>`` and ``output:<tensor>``; the first axis of every array is the *case* (several
input sets per reference). Tolerance follows the engine's precision:

* ``fp32``: tight (``rtol 1e-3``, ``atol 1e-4``: reordered float arithmetic, nothing more);
* ``fp16`` / ``best``: looser (``rtol 5e-2``, ``atol 5e-3``), plus cosine similarity ≥ 0.99;
* ``int8``: values are not comparable element-wise; top-1 agreement ≥ 90 % of the rows and
  cosine similarity ≥ 0.98.

An output that selects rows (as many as the reference, more than one, not an input's batch:
NonMaxSuppression, NonZero) passes when its rows equal the reference's in another order:
runtimes order selections their own way (TensorRT's NMS by score, ONNX Runtime's per class).

NaN or Inf in any output fails, whatever the precision. Without a reference the check is the
warm-up alone: the outputs of zeros and of a seeded random input must be finite.

Warm-up inputs are ones the model accepts (:func:`warmup_feeds`): each input's
shape from the delegate config's shape profile (``opt``), else the reference's first case (its
values too: a scalar ``sr`` of 16000 stays 16000), else the model's dims with dynamic ones 1.
A model that needs a sequence of at least 2 or a sample rate no longer fails on 1s and zeros.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first model, not at agent start (idle RSS)
    import numpy as np

from agent.runtimes.base import KSERVE_TO_NUMPY, LoadedModel, TensorSpec
from shared.reference_layout import ReferenceLayoutError, read_layout
from shared.warmup_inputs import InputPlan, plan_inputs


@dataclass(frozen=True)
class Tolerance:
    """How close an engine's outputs must be to the reference at one precision."""

    rtol: float | None
    atol: float | None
    min_cosine: float | None = None
    min_top1: float | None = None


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(rtol=1e-3, atol=1e-4),
    "fp16": Tolerance(rtol=5e-2, atol=5e-3, min_cosine=0.99),
    "best": Tolerance(rtol=5e-2, atol=5e-3, min_cosine=0.99),
    "int8": Tolerance(rtol=None, atol=None, min_cosine=0.98, min_top1=0.90),
}


@dataclass(frozen=True)
class Reference:
    """Cases of inputs and the FP32 outputs expected for them; leading axis = case."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]

    @property
    def cases(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0]) if self.inputs else 0


@dataclass
class ValidationReport:
    """``ok`` and, when not, every problem found (each names the output and the numbers)."""

    problems: list[str] = field(default_factory=list)
    checked: str = "warm-up only"

    @property
    def ok(self) -> bool:
        return not self.problems


class BadReference(ValueError):
    """The reference NPZ is unreadable or does not fit the model."""


def parse_reference(data: bytes) -> Reference:
    """An NPZ of ``input:<name>`` / ``output:<name>`` arrays → Reference; BadReference if not.

    Its headers are checked first (:func:`shared.reference_layout.read_layout`): no object
    arrays, at most ``MAX_REFERENCE_BYTES`` uncompressed, so a forged NPZ cannot make this
    allocate more than that."""
    import numpy as np

    try:
        read_layout(data).cases()
    except ReferenceLayoutError as exc:
        raise BadReference(str(exc)) from exc
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BadReference(f"reference outputs are not a readable NPZ: {exc}") from exc
    inputs = {k.removeprefix("input:"): v for k, v in arrays.items() if k.startswith("input:")}
    outputs = {k.removeprefix("output:"): v for k, v in arrays.items() if k.startswith("output:")}
    if not inputs or not outputs:
        raise BadReference("reference NPZ needs input:<name> and output:<name> arrays")
    return Reference(inputs, outputs)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays taken as flat vectors (1.0 for two zero vectors)."""
    import numpy as np

    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0.0 and ny == 0.0:
        return 1.0
    if nx == 0.0 or ny == 0.0:
        return 0.0
    return float(np.dot(x, y) / (nx * ny))


def top1_agreement(got: np.ndarray, want: np.ndarray) -> float:
    """Share of rows (last axis = classes) whose arg-max agrees."""
    import numpy as np

    g = got.reshape(-1, got.shape[-1]) if got.ndim else got.reshape(1, 1)
    w = want.reshape(-1, want.shape[-1]) if want.ndim else want.reshape(1, 1)
    return float(np.mean(np.argmax(g, axis=-1) == np.argmax(w, axis=-1)))


def compare(got: np.ndarray, want: np.ndarray, precision: str, name: str) -> list[str]:
    """Problems of one output against its reference at ``precision`` (empty when it passes)."""
    import numpy as np

    if not np.all(np.isfinite(got)):
        return [f"output {name!r} has NaN or Inf"]
    if got.shape != want.shape:
        return [f"output {name!r}: shape {list(got.shape)}, reference {list(want.shape)}"]
    tol = TOLERANCES.get(precision, TOLERANCES["fp32"])
    problems = []
    if tol.rtol is not None and tol.atol is not None:
        g, w = got.astype(np.float64), want.astype(np.float64)
        excess = np.abs(g - w) - (tol.atol + tol.rtol * np.abs(w))
        if np.any(excess > 0):
            worst = float(np.max(np.abs(g - w)))
            problems.append(
                f"output {name!r} differs from the reference by up to {worst:.3g} "
                f"(tolerance at {precision}: rtol {tol.rtol}, atol {tol.atol})"
            )
    if tol.min_cosine is not None:
        cos = cosine(got, want)
        if cos < tol.min_cosine:
            problems.append(
                f"output {name!r}: cosine similarity {cos:.4f} < {tol.min_cosine} ({precision})"
            )
    if tol.min_top1 is not None:
        agree = top1_agreement(got, want)
        if agree < tol.min_top1:
            problems.append(
                f"output {name!r}: top-1 agrees on {agree:.0%} of rows < {tol.min_top1:.0%}"
            )
    return problems


def _random_for(spec: TensorSpec, seed: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    import numpy as np

    if shape is None:
        shape = tuple(d if d >= 0 else 1 for d in spec.shape)
    dtype = np.dtype(KSERVE_TO_NUMPY[spec.datatype])
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)


def warmup_plan(
    specs: Sequence[TensorSpec],
    reference: Reference | None,
    profile_opt: Mapping[str, Sequence[int]] | None = None,
) -> list[InputPlan]:
    """The shape of each input in warm-up (:func:`shared.warmup_inputs.plan_inputs`): profile
    opt, else the reference's first case, else dims with dynamic ones 1."""
    shapes = {}
    if reference is not None and reference.cases:
        shapes = {n: tuple(a.shape[1:]) for n, a in reference.inputs.items()}
    inputs = [(s.name, list(s.shape)) for s in specs]
    return plan_inputs(inputs, profile_opt=profile_opt, reference_shapes=shapes)


def warmup_feeds(
    specs: Sequence[TensorSpec],
    reference: Reference | None,
    profile_opt: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """Inputs the model accepts for warm-up: the reference's first case where it has the planned
    shape (its values too: a shape tensor or a sample rate is valid only with its own values),
    zeros of the planned shape elsewhere."""
    import numpy as np

    feeds = {}
    for spec, plan in zip(specs, warmup_plan(specs, reference, profile_opt), strict=True):
        stacked = reference.inputs.get(spec.name) if reference and reference.cases else None
        if stacked is not None and tuple(stacked.shape[1:]) == tuple(plan.shape):
            feeds[spec.name] = _case(stacked, 0)
        else:
            feeds[spec.name] = np.zeros(plan.shape, KSERVE_TO_NUMPY[spec.datatype])
    return feeds


def _case(stacked: np.ndarray, case: int) -> np.ndarray:
    """One case of a stacked reference array; a scalar input's case stays a 0-d array (numpy
    indexing gives a numpy scalar, which ONNX Runtime refuses)."""
    import numpy as np

    return np.asarray(stacked[case])


def _selection(got: np.ndarray, want: np.ndarray, feeds: Mapping[str, np.ndarray]) -> bool:
    """Whether an output is a selection of rows whose order the runtime chooses: as many rows
    as the reference, more than one, and not the batch of any input (NonMaxSuppression's
    ``selected_indices``: ONNX Runtime orders them per class, TensorRT by score; NonZero)."""
    batches = {int(a.shape[0]) for a in feeds.values() if a.ndim}
    rows = int(got.shape[0]) if got.ndim else 0
    return got.shape == want.shape and rows > 1 and rows not in batches


def _rows(array: np.ndarray) -> np.ndarray:
    """``array``'s rows (axis 0) in lexicographic order."""
    import numpy as np

    flat = array.reshape(array.shape[0], -1)
    return array[np.lexsort(flat.T[::-1])] if flat.shape[1] else array


def _finite(results: Mapping[str, np.ndarray], what: str) -> list[str]:
    import numpy as np

    return [
        f"output {n!r} has NaN or Inf on {what}"
        for n, a in results.items()
        if a.dtype.kind == "f" and not np.all(np.isfinite(a))
    ]


def validate(
    model: LoadedModel,
    reference: Reference | None,
    precision: str = "fp32",
    warmups: int = 2,
    profile_opt: Mapping[str, Sequence[int]] | None = None,
) -> ValidationReport:
    """Warm ``model`` up on inputs it accepts (:func:`warmup_feeds`; ``profile_opt``: the
    delegate config's shape profile opt per input), then check it; InferenceError from the
    runtime propagates."""
    report = ValidationReport()
    specs = list(model.inputs)
    feeds = warmup_feeds(specs, reference, profile_opt)
    for _ in range(max(1, warmups)):
        warm = model.infer(feeds)
    report.problems += _finite(warm, "the warm-up input")
    if reference is None:
        plans = warmup_plan(specs, None, profile_opt)
        randoms = {s.name: _random_for(s, 0, p.shape) for s, p in zip(specs, plans, strict=True)}
        report.problems += _finite(model.infer(randoms), "a seeded random input")
        return report
    missing = [s.name for s in model.inputs if s.name not in reference.inputs]
    if missing:
        report.problems.append(f"reference lacks input(s) {', '.join(missing)}")
        return report
    report.checked = f"{reference.cases} reference case(s) at {precision}"
    for case in range(reference.cases):
        feeds = {s.name: _case(reference.inputs[s.name], case) for s in model.inputs}
        got = model.infer(feeds)
        for name, want in reference.outputs.items():
            if name not in got:
                report.problems.append(f"the model has no output {name!r} the reference has")
                continue
            found = compare(got[name], want[case], precision, name)
            if found and _selection(got[name], want[case], feeds):
                found = compare(_rows(got[name]), _rows(want[case]), precision, name) and found
            report.problems += [f"case {case}: {p}" for p in found]
        if report.problems:
            break
    return report
