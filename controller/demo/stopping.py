"""Stopping a child process the way a service manager does: SIGTERM, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess


def stop(
    process: subprocess.Popen[bytes],
    grace_s: float,
    *,
    group: bool = False,
    kill_wait_s: float = 5.0,
) -> None:
    """SIGTERM to ``process`` (to its whole process group with ``group``, for a child started
    with ``start_new_session=True`` whose own children must end with it), SIGKILL to what is
    left after ``grace_s``; returns once it is reaped, or after ``kill_wait_s`` more."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        try:
            if group:
                os.killpg(process.pid, sig)
            elif process.poll() is None:
                process.send_signal(sig)
        except ProcessLookupError:
            break
        try:
            process.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
