"""Stopping a child: with its group, what it started ends too; one ignoring SIGTERM is killed."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from controller.demo.stopping import stop

IGNORES_TERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"


def _with_a_child() -> tuple[subprocess.Popen[bytes], psutil.Process]:
    """A process in a session of its own that started a child of its own (both sleep)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
         "time.sleep(60)"],
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not psutil.Process(parent.pid).children():
        assert time.monotonic() < deadline, "the child did not start its own child"
        time.sleep(0.05)
    return parent, psutil.Process(parent.pid).children()[0]


def _ended(process: psutil.Process) -> bool:
    """Gone, or a zombie nobody has reaped yet (this machine's pid 1 may not reap)."""
    try:
        process.wait(10)
    except psutil.TimeoutExpired:
        return process.status() == psutil.STATUS_ZOMBIE
    return True


def test_a_group_stop_ends_the_childs_own_children_and_a_plain_stop_does_not() -> None:
    parent, grandchild = _with_a_child()
    stop(parent, 5.0, group=True)
    assert parent.returncode == -15
    assert _ended(grandchild), "the grandchild outlived the group stop"
    parent, grandchild = _with_a_child()
    try:
        stop(parent, 5.0)
        assert parent.returncode == -15
        assert grandchild.is_running()
        assert grandchild.status() != psutil.STATUS_ZOMBIE
    finally:
        grandchild.kill()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    child = subprocess.Popen([sys.executable, "-c", IGNORES_TERM])
    time.sleep(0.5)  # its handler is set
    stop(child, 0.5)
    assert child.returncode == -9
