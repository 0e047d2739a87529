"""Delegate config → ONNX Runtime execution providers and their options (pure, tested everywhere).

:func:`session_plan` decides which providers a session gets, in the config's order, keeping only
those this ONNX Runtime build reports (``ort.get_available_providers()``) and falling back to the
CPU provider with a reason; and the options each provider gets. For the TensorRT execution
provider it passes the delegate config through under ONNX Runtime's documented option names:

===============================  ==================================================
delegate config                  TensorRT EP provider option
===============================  ==================================================
onnxruntime.trt_min_subgraph_size ``trt_min_subgraph_size``
precision fp16 / best            ``trt_fp16_enable``
precision int8 / best            ``trt_int8_enable`` (+ ``trt_int8_calibration_table_name``)
dla_core N                       ``trt_dla_enable``, ``trt_dla_core``
workspace_mib                    ``trt_max_workspace_size`` (bytes)
builder_optimization_level       ``trt_builder_optimization_level``
max_aux_streams                  ``trt_auxiliary_streams``
timing_cache                     ``trt_timing_cache_enable`` (+ ``trt_timing_cache_path``)
(engine cache directory)         ``trt_engine_cache_enable``, ``trt_engine_cache_path``
===============================  ==================================================

``onnxruntime.trt_max_partitions`` has no ONNX Runtime counterpart: the EP's
``trt_max_partition_iterations`` bounds the iterations of its partitioning loop (default 1000), not
the number of partitions, so it is left at its default and the plan says so in ``notes``. The
analyzer (``jetfleet models analyze``) reports the partition count a model will get instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from shared.delegate import DelegateConfig

CPU = "CPUExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
MIB = 1024 * 1024


@dataclass(frozen=True)
class OrtSessionPlan:
    """What to pass to ``ort.InferenceSession``: providers, their options, the graph level."""

    providers: tuple[str, ...]
    provider_options: tuple[dict[str, str], ...]
    graph_optimization_level: str
    notes: tuple[str, ...] = ()
    """Why a configured provider or option was not used (logged by the runtime)."""


def _flag(value: bool) -> str:
    return "True" if value else "False"


def tensorrt_options(
    config: DelegateConfig,
    engine_cache_dir: str | None = None,
    calibration_table: str | None = None,
    engine_key: str | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The TensorRT EP's provider options for ``config`` and notes on what could not be set.

    ``engine_cache_dir`` (under the agent's state dir) keeps what the EP builds, so a restart
    loads its engines instead of rebuilding them: with ``engine_key``, engines go to
    ``<dir>/<engine_key>`` (one directory per model engine key, removable with it) and the
    timing cache, valid for every model on this GPU and TensorRT, to ``<dir>/timing``.
    An ``engine_key`` that is not one path component is a ValueError.
    """
    notes: list[str] = []
    ort = config.onnxruntime
    options = {"trt_min_subgraph_size": str(ort.trt_min_subgraph_size)}
    if ort.trt_max_partitions is not None:
        notes.append(
            f"trt_max_partitions={ort.trt_max_partitions} is not passed: ONNX Runtime's TensorRT "
            "provider has no partition limit (trt_max_partition_iterations bounds its "
            "partitioning loop, not the partition count)"
        )
    fp16 = config.precision in ("fp16", "best")
    int8 = config.precision in ("int8", "best")
    if config.strongly_typed:
        notes.append("strongly_typed has no TensorRT provider option: types follow the ONNX")
    else:
        options["trt_fp16_enable"] = _flag(fp16)
        options["trt_int8_enable"] = _flag(int8)
        if int8 and calibration_table:
            options["trt_int8_calibration_table_name"] = calibration_table
        elif int8 and config.calibration_cache_sha256:
            notes.append("INT8 calibration cache not available locally: the provider needs Q/DQ")
    if config.dla_core is not None:
        options["trt_dla_enable"] = "True"
        options["trt_dla_core"] = str(config.dla_core)
    if config.workspace_mib is not None:
        options["trt_max_workspace_size"] = str(config.workspace_mib * MIB)
    options["trt_builder_optimization_level"] = str(config.builder_optimization_level)
    if config.max_aux_streams is not None:
        options["trt_auxiliary_streams"] = str(config.max_aux_streams)
    if engine_cache_dir is not None:
        engines, timing = engine_cache_dir, engine_cache_dir
        if engine_key is not None:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}", engine_key):
                raise ValueError(f"engine key {engine_key!r} is not a directory name")
            engines = os.path.join(engine_cache_dir, engine_key)
            timing = os.path.join(engine_cache_dir, "timing")
        options["trt_engine_cache_enable"] = "True"
        options["trt_engine_cache_path"] = engines
        if config.timing_cache:
            options["trt_timing_cache_enable"] = "True"
            options["trt_timing_cache_path"] = timing
    return options, notes


def session_plan(
    config: DelegateConfig,
    available: Sequence[str],
    engine_cache_dir: str | None = None,
    calibration_table: str | None = None,
    engine_key: str | None = None,
) -> OrtSessionPlan:
    """Providers and options for a session of ``config`` where ``available`` providers exist.

    Configured providers this build lacks are dropped with a note; when none is left, the CPU
    provider serves and the note says why. The CPU provider always ends the list, so nodes no
    accelerator takes still run.
    """
    have = set(available)
    notes: list[str] = []
    wanted: list[str] = list(config.onnxruntime.providers)
    missing = [p for p in wanted if p not in have]
    chosen = [p for p in wanted if p in have]
    if missing:
        notes.append(
            f"{', '.join(missing)} not available in this ONNX Runtime "
            f"(available: {', '.join(sorted(have)) or 'none'})"
        )
    if not chosen or chosen == [CPU]:
        if missing:
            notes[-1] += ": running on CPUExecutionProvider"
        chosen = [CPU]
    elif CPU not in chosen:
        chosen.append(CPU)
    options: list[dict[str, str]] = []
    for provider in chosen:
        if provider == TENSORRT:
            trt, trt_notes = tensorrt_options(
                config, engine_cache_dir, calibration_table, engine_key
            )
            options.append(trt)
            notes += trt_notes
        else:
            options.append({})
    return OrtSessionPlan(
        providers=tuple(chosen),
        provider_options=tuple(options),
        graph_optimization_level=config.onnxruntime.graph_optimization_level,
        notes=tuple(notes),
    )
