"""A loop failing every tick through an outage writes one ERROR, a reminder per minute and one
line when it works again (the soak's PostgreSQL restart wrote 60 ERROR lines in 15 s)."""

from __future__ import annotations

import logging

import pytest

from controller.failure_log import FailureLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_of_ticks_is_one_error_a_reminder_a_minute_and_one_recovery_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    log = FailureLog(logging.getLogger("jf.test.loop"), "rollout loop", every_s=60.0, clock=clock)
    caplog.set_level(logging.INFO, logger="jf.test.loop")
    for _ in range(4 * 90):  # 90 s of ticks at 4 per second, all failing
        log.failed("database error: connection refused")
        clock.now += 0.25
    assert log.failing
    log.succeeded()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["ERROR", "WARNING", "INFO"]
    assert lines[0][1] == "rollout loop: database error: connection refused"
    assert "still failing after 60 s (240 more failure(s)" in lines[1][1]
    assert "working again after 90.0 s (360 failure(s))" in lines[2][1]
    assert not log.failing


def test_a_new_outage_after_recovery_is_logged_at_error_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    log = FailureLog(logging.getLogger("jf.test.loop2"), "jobs", clock=clock)
    caplog.set_level(logging.INFO, logger="jf.test.loop2")
    log.succeeded()  # nothing was failing: nothing to say
    log.failed("first")
    log.succeeded()
    clock.now += 1.0
    log.failed("second")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "jobs: first"),
        ("INFO", "jobs: working again after 0.0 s (1 failure(s))"),
        ("ERROR", "jobs: second"),
    ]
