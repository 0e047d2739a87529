"""One log line per key and window, with a fake clock."""

from __future__ import annotations

from controller.ingest.log_throttle import LogThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_key_per_window_and_the_count_of_lines_held_back() -> None:
    clock = Clock()
    throttle = LogThrottle(window_s=60, clock=clock)
    assert throttle.admit(("gw-1", "too large")) == 0
    assert throttle.admit(("gw-1", "too large")) is None
    assert throttle.admit(("gw-1", "too large")) is None
    assert throttle.admit(("gw-2", "too large")) == 0
    assert throttle.admit(("gw-1", "not JSON")) == 0
    clock.now += 59.9
    assert throttle.admit(("gw-1", "too large")) is None
    clock.now += 0.1
    assert throttle.admit(("gw-1", "too large")) == 3
    assert throttle.admit(("gw-1", "too large")) is None


def test_the_number_of_keys_is_bounded_by_forgetting_the_oldest() -> None:
    clock = Clock()
    throttle = LogThrottle(window_s=60, max_keys=3, clock=clock)
    for device in ("a", "b", "c", "d"):
        assert throttle.admit(device) == 0
    assert throttle.admit("a") == 0, "the oldest key was forgotten, so it logs again"
    assert throttle.admit("d") is None
