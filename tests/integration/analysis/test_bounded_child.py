"""The bound of a child process counts from the moment it is ready, not from its start.

The push's reference run (``--reference-timeout``) and the analysis (``--analysis-timeout``)
run in child processes that import ONNX Runtime and NumPy first: seconds on a loaded 2-core
host. Counting those seconds against the model's bound failed the reference run of an ordinary
classifier at a 2-s bound (the model itself ran in milliseconds). Real child processes here.
"""

from __future__ import annotations

import time
from threading import Timer

from controller.analysis.bounded_child import Children

CHILD = "tests.slow_start_child"


def test_a_slow_start_does_not_count_against_the_bound() -> None:
    began = time.monotonic()
    ended = Children().run(CHILD, ["2.5", "0.1"], timeout_s=1.0)
    assert ended.ok, ended.reason("the child")
    assert ended.last_line == "done"
    assert time.monotonic() - began >= 2.5


def test_work_past_the_bound_is_killed_once_ready() -> None:
    ended = Children().run(CHILD, ["0", "30"], timeout_s=1.0)
    assert ended.timed_out
    assert ended.last_line == "still running after 1 s"


def test_a_child_that_never_gets_ready_is_killed_at_the_start_bound() -> None:
    began = time.monotonic()
    ended = Children().run(CHILD, ["30", "0"], timeout_s=60.0, start_s=1.5)
    assert not ended.ok
    assert not ended.timed_out
    assert ended.reason("the child") == "the child process did not start within 1.5 s"
    assert time.monotonic() - began < 20


def test_a_child_stopped_while_starting_reports_stopped() -> None:
    children = Children()
    began = time.monotonic()
    Timer(1.0, children.stop).start()
    ended = children.run(CHILD, ["30", "0"], timeout_s=60.0)
    assert ended.stopped
    assert time.monotonic() - began < 20
