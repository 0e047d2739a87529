"""Candidate names → what each benchmarks, and what ``tune --apply`` stores (pure)."""

from __future__ import annotations

import pytest

from shared.delegate import DelegateConfig, OrtOptions
from shared.jobs import (
    CandidateError,
    candidate_delegate,
    candidate_layer,
    parse_candidate,
    parse_candidates,
)


@pytest.mark.parametrize(
    ("name", "runtime", "precision", "dla", "level", "threads", "ep"),
    [
        ("fp32", "tensorrt", "fp32", None, None, None, None),
        ("fp16+dla0", "tensorrt", "fp16", 0, None, None, None),
        ("dla1", "tensorrt", "fp16", 1, None, None, None),
        ("int8", "tensorrt", "int8", None, None, None, None),
        ("ort-basic", "onnxruntime", None, None, "basic", None, None),
        ("ort-all+threads=2", "onnxruntime", None, None, "all", 2, None),
        ("threads=4", "onnxruntime", None, None, None, 4, None),
        ("ep=trt+fp16", "onnxruntime", "fp16", None, None, None, "trt"),
    ],
)
def test_names_say_runtime_precision_and_options(
    name: str,
    runtime: str,
    precision: str | None,
    dla: int | None,
    level: str | None,
    threads: int | None,
    ep: str | None,
) -> None:
    spec = parse_candidate(name)
    assert (spec.runtime, spec.precision, spec.dla_core, spec.opt_level, spec.threads, spec.ep) == (
        runtime,
        precision,
        dla,
        level,
        threads,
        ep,
    )


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("fp17", "unknown part 'fp17'"),
        ("fp16+fp32", "'fp32' repeats the precision"),
        ("fp16+ort-all", "needs its TensorRT provider (add ep=trt)"),
        ("dla0+fp32", "the DLA runs fp16 or int8"),
        ("threads=0", "needs 1-64 threads"),
        ("ep=rocm", "is not trt, cuda or cpu"),
        ("", "empty candidate name"),
    ],
)
def test_bad_names_say_what_is_wrong(name: str, says: str) -> None:
    with pytest.raises(CandidateError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_candidate(name)


def test_a_list_refuses_repeats() -> None:
    with pytest.raises(CandidateError, match="'fp16' is given twice"):
        parse_candidates(["fp16", "int8", "fp16"])


def test_candidate_config_keeps_the_base_and_sets_its_own_fields() -> None:
    base = DelegateConfig(
        workspace_mib=256,
        dla_core=1,
        onnxruntime=OrtOptions(trt_min_subgraph_size=4, graph_optimization_level="extended"),
    )
    gpu = candidate_delegate(parse_candidate("fp16"), base)
    assert (gpu.runtime, gpu.precision, gpu.dla_core, gpu.workspace_mib) == (
        "tensorrt",
        "fp16",
        None,
        256,
    )
    ort = candidate_delegate(parse_candidate("ort-basic+ep=cuda"), base)
    assert ort.runtime == "onnxruntime"
    assert ort.onnxruntime.graph_optimization_level == "basic"
    assert ort.onnxruntime.providers == ("CUDAExecutionProvider", "CPUExecutionProvider")
    assert ort.onnxruntime.trt_min_subgraph_size == 4


def test_the_stored_layer_holds_only_what_the_candidate_chose() -> None:
    assert candidate_layer(parse_candidate("fp16+dla0")) == {
        "runtime": "tensorrt",
        "precision": "fp16",
        "dla_core": 0,
    }
    assert candidate_layer(parse_candidate("ort-extended+threads=2")) == {
        "runtime": "onnxruntime",
        "onnxruntime": {"graph_optimization_level": "extended"},
    }
