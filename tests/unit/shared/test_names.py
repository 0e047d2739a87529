"""Names that may become paths: shared.names and the wire models refuse every hostile form."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.delegate import DelegateConfig
from shared.messages import ArtifactRef, ModelSlot
from shared.names import (
    InvalidName,
    check_device_id,
    check_engine_key,
    check_file_name,
    check_model_name,
    check_sha256,
    check_version,
    is_sha256,
    quoted,
)

SHA = "ab" * 32

HOSTILE = [
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "..\\..\\windows",
    "/etc/passwd",
    "x/y",
    "x\x00",
    "\x00",
    "x\n",
    "x\r",
    " x",
    "a" * 65,
    "a" * 100_000,
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_names_are_refused_by_every_name_check(value: str) -> None:
    for check in (check_model_name, check_version, check_device_id, check_sha256):
        with pytest.raises(InvalidName):
            check(value)


@pytest.mark.parametrize(
    "value", [SHA.upper(), SHA + "\n", SHA[:-1], SHA + "0", SHA[:-1] + "g", "../" + SHA[3:]]
)
def test_sha256_and_engine_keys_are_exactly_64_lower_case_hex_digits(value: str) -> None:
    assert not is_sha256(value)
    with pytest.raises(InvalidName, match="64 lower-case hex digits"):
        check_engine_key(value)
    assert check_sha256(SHA) == SHA
    assert is_sha256(SHA)


def test_good_names_pass_unchanged() -> None:
    assert check_model_name("resnet-50.v2_int8") == "resnet-50.v2_int8"
    assert check_version("1.0.0+build_7") == "1.0.0+build_7"
    assert check_device_id("GW-01.lab") == "GW-01.lab"
    assert check_file_name("calibration-" + SHA + ".cache")


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "a\\b", "a\x00", "a\x7f", "é" * 128])
def test_file_names_are_one_component_of_at_most_255_bytes(value: str) -> None:
    with pytest.raises(InvalidName, match="one path component"):
        check_file_name(value)


def test_errors_quote_an_over_long_name_shortened() -> None:
    with pytest.raises(InvalidName) as refused:
        check_model_name("a" * 100_000)
    assert len(str(refused.value)) < 250
    assert "(100000 characters)" in str(refused.value)
    assert quoted("short") == "'short'"


@pytest.mark.parametrize("value", [v for v in HOSTILE if v != ""])
def test_the_wire_models_refuse_the_same_forms(value: str) -> None:
    with pytest.raises(ValidationError):
        ArtifactRef(url="http://c/x", sha256=value, size=1)
    ref = ArtifactRef(url="http://c/x", sha256=SHA, size=1)
    with pytest.raises(ValidationError):
        ModelSlot(name=value, version="1", artifact=ref)
    with pytest.raises(ValidationError):
        ModelSlot(name="m", version=value, artifact=ref)
    with pytest.raises(ValidationError):
        DelegateConfig(calibration_cache_sha256=value)
