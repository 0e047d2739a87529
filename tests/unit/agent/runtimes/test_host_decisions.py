"""The TensorRT host client's pure decisions: restart backoff and how a host ended."""

from __future__ import annotations

from agent.runtimes.host import restart_delay
from agent.runtimes.host_process import describe_exit


def test_restarts_back_off_doubling_up_to_the_cap() -> None:
    waits = [restart_delay(n, 0.5, 30.0) for n in range(1, 10)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_host_end_names_the_signal_or_the_status() -> None:
    assert describe_exit(-9) == "was killed by signal 9 (SIGKILL)"
    assert describe_exit(-6) == "was killed by signal 6 (SIGABRT)"
    assert describe_exit(2) == "exited with status 2"
    assert describe_exit(None) == "is still running"
