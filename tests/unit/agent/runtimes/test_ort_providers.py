"""Delegate config → ONNX Runtime providers and TensorRT EP options (pure)."""

from __future__ import annotations

from agent.runtimes.ort_providers import CPU, CUDA, TENSORRT, session_plan
from shared.delegate import DelegateConfig, OrtOptions

ALL = [TENSORRT, CUDA, CPU]


def trt_config(**fields: object) -> DelegateConfig:
    ort = OrtOptions(providers=(TENSORRT, CUDA, CPU), trt_min_subgraph_size=5)
    return DelegateConfig.model_validate({"onnxruntime": ort.model_dump(), **fields})


def test_tensorrt_provider_gets_the_delegate_config_under_its_option_names() -> None:
    config = trt_config(precision="fp16", dla_core=1, workspace_mib=512, max_aux_streams=0)
    plan = session_plan(config, ALL, engine_cache_dir="/var/lib/jetfleet/ort-trt")
    assert plan.providers == (TENSORRT, CUDA, CPU)
    trt, cuda, cpu = plan.provider_options
    assert trt == {
        "trt_min_subgraph_size": "5",
        "trt_fp16_enable": "True",
        "trt_int8_enable": "False",
        "trt_dla_enable": "True",
        "trt_dla_core": "1",
        "trt_max_workspace_size": str(512 * 1024 * 1024),
        "trt_builder_optimization_level": "3",
        "trt_auxiliary_streams": "0",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": "/var/lib/jetfleet/ort-trt",
        "trt_timing_cache_enable": "True",
        "trt_timing_cache_path": "/var/lib/jetfleet/ort-trt",
    }
    assert cuda == cpu == {}
    assert plan.notes == ()


def test_max_partitions_has_no_onnxruntime_option_and_says_so() -> None:
    plan = session_plan(
        trt_config(onnxruntime={"providers": [TENSORRT], "trt_max_partitions": 2}), ALL
    )
    assert "trt_max_partition_iterations" not in plan.provider_options[0]
    assert any("trt_max_partitions=2 is not passed" in note for note in plan.notes)
    assert plan.providers == (TENSORRT, CPU)


def test_int8_passes_the_calibration_table_when_there_is_one() -> None:
    plan = session_plan(trt_config(precision="int8"), ALL, calibration_table="calib.cache")
    options = plan.provider_options[0]
    assert options["trt_int8_enable"] == "True"
    assert options["trt_int8_calibration_table_name"] == "calib.cache"


def test_missing_providers_fall_back_to_the_cpu_with_the_reason() -> None:
    plan = session_plan(trt_config(), [CPU])
    assert plan.providers == (CPU,)
    assert plan.provider_options == ({},)
    assert plan.notes == (
        "TensorrtExecutionProvider, CUDAExecutionProvider not available in this ONNX Runtime "
        "(available: CPUExecutionProvider): running on CPUExecutionProvider",
    )


def test_an_available_accelerator_keeps_the_cpu_as_the_last_resort() -> None:
    plan = session_plan(trt_config(), [CUDA, CPU])
    assert plan.providers == (CUDA, CPU)
    assert "TensorrtExecutionProvider not available" in plan.notes[0]


def test_the_default_config_is_the_cpu_at_the_full_optimisation_level() -> None:
    plan = session_plan(DelegateConfig(), [CPU])
    assert (plan.providers, plan.graph_optimization_level, plan.notes) == ((CPU,), "all", ())
