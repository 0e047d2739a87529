"""Engine identity: same inputs give the same key; any validity or content change gives another;
the power mode changes only the tuning tag."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.delegate import BUILD_FIELDS, BUILD_FIELDS_IF_SET, DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey, engine_key

SHA = "cd" * 32

ORIN_NANO = ValidityKey(
    runtime="tensorrt",
    runtime_version="10.3.0.30",
    platform="linux-aarch64-tegra",
    compute_capability="8.7",
    sm_count=8,
    memory_total_mib=7620,
    device_name="p3767-0003",
    cuda_major=12,
)

VALIDITY_CHANGES: dict[str, Any] = {
    "runtime": "onnxruntime",
    "runtime_version": "10.3.0.26",
    "platform": "linux-x86_64",
    "compute_capability": "7.2",
    "sm_count": 4,
    "memory_total_mib": 15656,
    "device_name": "p3767-0000",
    "cuda_major": 13,
    "dla_core": 0,
    "providers": ("CPUExecutionProvider",),
    "hardware_compatibility": "ampere_plus",
    "version_compatible": True,
}

CONTENT_CHANGES: dict[str, Any] = {
    "precision": "fp16",
    "dla_core": 1,
    "gpu_fallback": False,
    "workspace_mib": 512,
    "runtime": "tensorrt",
    "strongly_typed": True,
    "builder_optimization_level": 5,
    "max_aux_streams": 0,
    "calibration_cache_sha256": "02" * 32,
    "onnxruntime": {"providers": ("CUDAExecutionProvider", "CPUExecutionProvider")},
    "shapes": ({"input": "x", "min": (1, 3), "opt": (4, 3), "max": (8, 3)},),
}

LATER_CONTENT_CHANGES: dict[str, Any] = {
    "tf32": True,
    "refittable": True,
    "disabled_tactic_sources": ("CUBLAS", "CUBLAS_LT", "CUDNN"),
}


def key(validity: ValidityKey = ORIN_NANO, config: DelegateConfig | None = None) -> str:
    return engine_key(validity, ContentKey.of(SHA, config or DelegateConfig()))


def test_identical_inputs_give_identical_keys() -> None:
    assert key() == key(ORIN_NANO.model_copy(), DelegateConfig())
    assert len(key()) == 64


def test_every_validity_field_changes_the_key() -> None:
    assert set(VALIDITY_CHANGES) == set(ValidityKey.model_fields), (
        "a new validity field needs a case here"
    )
    for field, value in VALIDITY_CHANGES.items():
        changed = ORIN_NANO.model_copy(update={field: value})
        assert key(changed) != key(), field


def test_every_build_field_of_the_delegate_config_changes_the_key() -> None:
    for field, value in {**CONTENT_CHANGES, **LATER_CONTENT_CHANGES}.items():
        config = DelegateConfig.model_validate({field: value})
        assert key(config=config) != key(), field


def test_model_bytes_and_calibration_cache_change_the_key() -> None:
    base = ContentKey.of(SHA, DelegateConfig())
    assert engine_key(ORIN_NANO, ContentKey.of("ef" * 32, DelegateConfig())) != engine_key(
        ORIN_NANO, base
    )
    calibrated = ContentKey.of(SHA, DelegateConfig(precision="int8"), calibration_sha256="01" * 32)
    uncalibrated = ContentKey.of(SHA, DelegateConfig(precision="int8"))
    assert engine_key(ORIN_NANO, calibrated) != engine_key(ORIN_NANO, uncalibrated)


def test_build_fields_cover_every_field_that_is_not_run_time_or_tuning() -> None:
    run_or_tuning = {"streams", "timing_cache", "power_mode", "apply_power_mode", "jetson_clocks"}
    run_or_tuning |= {"preference", "max_batch_size", "max_queue_delay_ms", "fallback"}
    run_or_tuning |= {"build_timeout_s"}  # how long to wait for a build, not what it builds
    run_or_tuning |= {"default_shapes"}  # a marker: the default profiles themselves are in shapes
    every = set(BUILD_FIELDS) | set(BUILD_FIELDS_IF_SET)
    assert every == set(DelegateConfig.model_fields) - run_or_tuning
    assert set(CONTENT_CHANGES) == set(BUILD_FIELDS)
    assert set(LATER_CONTENT_CHANGES) == set(BUILD_FIELDS_IF_SET)


def test_engines_built_before_the_later_fields_existed_keep_their_keys() -> None:
    """An upgrade that adds tf32/refittable/tactic sources must not rebuild the whole fleet."""
    for config in (DelegateConfig(), DelegateConfig(precision="fp16", workspace_mib=256)):
        dumped = config.model_dump(mode="json")
        before = ContentKey(onnx_sha256=SHA, build_config={k: dumped[k] for k in BUILD_FIELDS})
        assert engine_key(ORIN_NANO, before) == key(config=config)


@given(
    power_mode=st.sampled_from(["7W", "15W", "25W", "MAXN_SUPER"]),
    streams=st.integers(1, 16),
    preference=st.sampled_from(["sustained_throughput", "lowest_latency"]),
    clocks=st.sampled_from([None, True, False]),
    timing_cache=st.booleans(),
)
def test_run_time_and_tuning_settings_never_change_the_key(
    power_mode: str, streams: int, preference: str, clocks: bool | None, timing_cache: bool
) -> None:
    config = DelegateConfig.model_validate(
        {
            "power_mode": power_mode,
            "apply_power_mode": True,
            "streams": streams,
            "preference": preference,
            "jetson_clocks": clocks,
            "timing_cache": timing_cache,
        }
    )
    assert key(config=config) == key()


@given(a=st.sampled_from(["7W", "15W", "25W"]), b=st.sampled_from(["7W", "15W", "25W"]))
def test_power_mode_changes_only_the_tuning_tag(a: str, b: str) -> None:
    tag_a, tag_b = TuningTag(power_mode=a), TuningTag(power_mode=b)
    assert (tag_a.digest() == tag_b.digest()) == (a == b)
    assert TuningTag(power_mode=a, jetson_clocks=True).label() == f"{a}+clocks"


@given(st.dictionaries(st.sampled_from(sorted(CONTENT_CHANGES)), st.just(None), max_size=3))
def test_keys_are_deterministic_for_any_field_order(fields: dict[str, None]) -> None:
    values = {f: CONTENT_CHANGES[f] for f in fields}
    forward = DelegateConfig.model_validate(values)
    backward = DelegateConfig.model_validate(dict(reversed(list(values.items()))))
    assert key(config=forward) == key(config=backward)
