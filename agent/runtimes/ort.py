"""ONNX Runtime as a runtime: the only serving-side module that imports onnxruntime.

Sessions get the providers and provider options :func:`agent.runtimes.ort_providers.session_plan`
derives
from the slot's delegate config (the TensorRT execution provider's options included), limited to
the providers this build reports; when a configured provider is missing the session runs on the
CPU provider and the reason is logged. ``profile_dir`` turns ONNX Runtime's profiler on for a
session (``SessionOptions.enable_profiling``); :meth:`OrtModel.end_profiling` returns its trace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from agent.errors import InferenceError, InvalidInputError, ModelLoadError
from agent.runtimes.base import TensorSpec
from agent.runtimes.ort_providers import session_plan
from agent.trt_host.backend_ort import ORT_TO_KSERVE  # one table for both sides of the host
from shared.delegate import DelegateConfig

log = logging.getLogger(__name__)

LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def _spec(arg: Any) -> TensorSpec:
    datatype = ORT_TO_KSERVE.get(arg.type)
    if datatype is None:
        raise ModelLoadError(f"tensor {arg.name!r} has type {arg.type}, which is not served yet")
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape)
    return TensorSpec(name=arg.name, datatype=datatype, shape=shape)


class OrtModel:
    """One InferenceSession; thread-safe for concurrent ``infer`` calls, as ORT sessions are."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session: ort.InferenceSession | None = session
        self._inputs = tuple(_spec(a) for a in session.get_inputs())
        self._outputs = tuple(_spec(a) for a in session.get_outputs())

    @property
    def inputs(self) -> Sequence[TensorSpec]:
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorSpec]:
        return self._outputs

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        session = self._session
        if session is None:
            raise InferenceError("model was unloaded")
        names = [spec.name for spec in self._outputs]
        try:
            results = session.run(names, dict(feeds))
        except InvalidArgument as exc:  # the request's fault (a shape the model refuses)
            raise InvalidInputError(f"the model refused the input: {exc}") from exc
        except Exception as exc:
            raise InferenceError(f"onnxruntime failed: {exc}") from exc
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    @property
    def providers(self) -> list[str]:
        """The providers the session runs on, in order (empty once closed)."""
        session = self._session
        return list(session.get_providers()) if session is not None else []

    def end_profiling(self) -> Path | None:
        """Stop the profiler and return its trace file (None when profiling was off)."""
        session = self._session
        if session is None or not session.get_session_options().enable_profiling:
            return None
        return Path(session.end_profiling())

    def close(self) -> None:
        self._session = None


def available_providers() -> list[str]:
    """The execution providers this ONNX Runtime build has."""
    return list(ort.get_available_providers())


def load_ort(
    path: Path,
    *,
    intra_op_threads: int = 1,
    delegate: DelegateConfig | None = None,
    profile_dir: Path | None = None,
    engine_cache_dir: Path | None = None,
    engine_key: str | None = None,
) -> OrtModel:
    """Load ``path`` with ``delegate``'s providers (CPU without one); ModelLoadError when ORT
    refuses it. ``profile_dir``: profile the session, trace written there."""
    plan = session_plan(
        delegate or DelegateConfig(),
        ort.get_available_providers(),
        engine_cache_dir=str(engine_cache_dir) if engine_cache_dir is not None else None,
        engine_key=engine_key,
    )
    for note in plan.notes:
        log.warning("%s: %s", path.name, note)
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = LEVELS[plan.graph_optimization_level]
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_dir / "ort-profile")
    try:
        session = ort.InferenceSession(
            str(path),
            sess_options=options,
            providers=list(plan.providers),
            provider_options=[dict(o) for o in plan.provider_options],
        )
    except Exception as exc:
        raise ModelLoadError(f"onnxruntime cannot load {path.name}: {exc}") from exc
    return OrtModel(session)
