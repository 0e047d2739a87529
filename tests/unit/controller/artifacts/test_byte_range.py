from __future__ import annotations

import pytest

from controller.artifacts.byte_range import ByteRange, plan_range
from controller.errors import RangeNotSatisfiable


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-9", ByteRange(0, 9, 100)),
        ("bytes=90-", ByteRange(90, 99, 100)),
        ("bytes=-10", ByteRange(90, 99, 100)),
        ("bytes=-1000", ByteRange(0, 99, 100)),
        ("bytes=50-5000", ByteRange(50, 99, 100)),
    ],
)
def test_single_ranges(header: str, expected: ByteRange) -> None:
    assert plan_range(header, 100) == expected


@pytest.mark.parametrize(
    "header", [None, "", "items=0-1", "bytes=0-1,5-6", "bytes=x-y", "bytes=9-2"]
)
def test_unsupported_or_absent_range_means_whole_body(header: str | None) -> None:
    assert plan_range(header, 100) is None


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=500-600", "bytes=-0"])
def test_range_outside_the_artifact_is_416(header: str) -> None:
    with pytest.raises(RangeNotSatisfiable) as info:
        plan_range(header, 100)
    assert info.value.size == 100


def test_content_range_header() -> None:
    assert ByteRange(0, 9, 100).content_range() == "bytes 0-9/100"
