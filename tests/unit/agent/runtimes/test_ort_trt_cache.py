"""ONNX Runtime's TensorRT provider keeps its engines and timing cache under the agent's state
dir, one directory per model engine key, so a restart loads instead of rebuilding."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.runtimes.ort_providers import CPU, CUDA, TENSORRT, session_plan
from shared.delegate import DelegateConfig, OrtOptions

KEY = "3f9a" * 16


def trt_config(**fields: object) -> DelegateConfig:
    ort = OrtOptions(providers=(TENSORRT, CUDA, CPU))
    return DelegateConfig.model_validate({"onnxruntime": ort.model_dump(), **fields})


def test_a_session_gets_its_engine_cache_per_key_and_a_shared_timing_cache(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "state" / "ort-trt"
    plan = session_plan(trt_config(), [TENSORRT, CUDA, CPU], str(cache), engine_key=KEY)
    trt = plan.provider_options[0]
    assert trt["trt_engine_cache_enable"] == "True"
    assert trt["trt_engine_cache_path"] == str(cache / KEY)
    assert trt["trt_timing_cache_enable"] == "True"
    assert trt["trt_timing_cache_path"] == str(cache / "timing")
    other = session_plan(trt_config(), [TENSORRT, CPU], str(cache), engine_key="b" * 64)
    assert other.provider_options[0]["trt_timing_cache_path"] == trt["trt_timing_cache_path"]
    assert other.provider_options[0]["trt_engine_cache_path"] != trt["trt_engine_cache_path"]


def test_timing_cache_off_in_the_config_keeps_only_the_engine_cache(tmp_path: Path) -> None:
    plan = session_plan(trt_config(timing_cache=False), [TENSORRT, CPU], str(tmp_path), None, KEY)
    trt = plan.provider_options[0]
    assert trt["trt_engine_cache_path"] == str(tmp_path / KEY)
    assert "trt_timing_cache_enable" not in trt


@pytest.mark.parametrize("key", ["../etc", "a/b", "", ".hidden"])
def test_an_engine_key_that_is_not_a_directory_name_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="is not a directory name"):
        session_plan(trt_config(), [TENSORRT, CPU], str(tmp_path), engine_key=key)
