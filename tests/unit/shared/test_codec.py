from datetime import datetime, timezone

import pytest

from shared.canonical import canonical_json, digest, is_sha256_hex, sha256_hex
from shared.codec import MessageError, decode, decode_for, encode
from shared.delegate import DelegateConfig
from shared.messages import ArtifactRef, DesiredState, ModelSlot, SlotPhase, Status
from shared.telemetry import Telemetry
from shared.topics import Channel

SHA = "ab" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def slot(name: str, version: str = "1") -> ModelSlot:
    return ModelSlot(
        name=name, version=version, artifact=ArtifactRef(url="http://c/a", sha256=SHA, size=3)
    )


def test_desired_state_round_trips_with_its_schema_tag() -> None:
    desired = DesiredState(
        device_id="gw-1", generation=4, issued_at=NOW, slots=(slot("det"), slot("kp"))
    )
    wire = encode(desired)
    assert b'"schema":"jetfleet/desired/1"' in wire
    assert decode(DesiredState, wire) == desired
    assert decode_for(Channel.DESIRED, wire) == desired
    assert desired.slot("kp") == slot("kp")


def test_duplicate_slot_names_are_refused() -> None:
    with pytest.raises(ValueError, match="repeated: det"):
        DesiredState(
            device_id="gw-1", generation=1, issued_at=NOW, slots=(slot("det"), slot("det"))
        )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b"not json", "<payload>"),
        (b"[1, 2]", "<payload>"),
        (b'{"schema": "jetfleet/status/1", "device_id": "gw", "state": "asleep"}', "state"),
        (b'{"schema": "jetfleet/status/2", "device_id": "gw", "state": "online"}', "schema"),
        (b'{"schema": "jetfleet/status/1", "device_id": "gw", "state": "online", "x": 1}', "x"),
    ],
)
def test_bad_payloads_raise_one_error_naming_the_field(payload: bytes, field: str) -> None:
    with pytest.raises(MessageError) as info:
        decode(Status, payload)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_nested_field_errors_name_the_path() -> None:
    payload = (
        b'{"schema":"jetfleet/telemetry/1","device_id":"gw","sample_id":"s1",'
        b'"ts":"2026-11-30T12:00:00Z","interval_s":10,"cpu_percent":1,'
        b'"memory_used_bytes":1,"memory_total_bytes":2,'
        b'"models":[{"name":"det","requests":-1,"errors":0}]}'
    )
    with pytest.raises(MessageError) as info:
        decode(Telemetry, payload)
    assert info.value.field == "models.0.requests"


def test_slot_phase_values_are_the_contract_names() -> None:
    assert [p.value for p in SlotPhase] == [
        "idle", "downloading", "building", "validating", "swapping", "serving", "failed",
        "rolled_back",
    ]  # fmt: skip


def test_canonical_json_is_order_independent_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})
    assert digest(DelegateConfig(precision="fp16")) != digest(DelegateConfig())


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        canonical_json({"x": float("nan")})


def test_sha256_helpers() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert is_sha256_hex(sha256_hex(b"x"))
    assert not is_sha256_hex("E3" * 32)
    assert not is_sha256_hex("ab")
