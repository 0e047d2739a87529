"""A device's artifact uploads are bounded per day, forgotten as the day passes."""

from __future__ import annotations

import pytest

from controller.artifacts.device_quota import DeviceUploadQuota
from controller.errors import QuotaExceeded


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_uploads_within_the_window_add_up_and_free_up_as_it_passes() -> None:
    clock = Clock()
    quota = DeviceUploadQuota(bytes_per_window=1000, window_s=3600, clock=clock)
    quota.charge("gw-1", 600)
    clock.now = 1800
    quota.charge("gw-1", 400)
    with pytest.raises(QuotaExceeded, match="room frees up in 1800 s") as refused:
        quota.charge("gw-1", 1)
    assert refused.value.retry_after_s == 1800
    quota.charge("gw-2", 1000)  # another device has its own
    clock.now = 3601
    quota.charge("gw-1", 600)  # the first 600 left the window


def test_a_refused_upload_is_not_counted() -> None:
    quota = DeviceUploadQuota(bytes_per_window=1000, window_s=3600, clock=Clock())
    with pytest.raises(QuotaExceeded):
        quota.charge("gw-1", 1001)
    quota.charge("gw-1", 1000)
