"""Running the board's command-line tools (nvpmodel, jetson_clocks, dpkg-query) behind a seam.

A :data:`Runner` takes an argv and answers ``(returncode, output)``; tests pass one that replays
recorded output. The default runner never raises for a missing, hung or forbidden tool: it answers
a shell-style return code (127, 124, 126) with a sentence saying what happened, so every probe
turns a failure into a reason the same way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

Runner = Callable[[Sequence[str]], tuple[int, str]]

COMMAND_TIMEOUT_S = 5.0
NOT_INSTALLED = 127
TIMED_OUT = 124
NOT_PERMITTED = 126


def default_runner(argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
    """Run ``argv`` without a shell; stdout and stderr together, decoded as UTF-8."""
    name = argv[0]
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError:
        return NOT_INSTALLED, f"{name} not installed (not found on PATH)"
    except PermissionError:
        return NOT_PERMITTED, f"{name} is not executable by this user"
    except subprocess.TimeoutExpired:
        return TIMED_OUT, f"{name} did not answer within {timeout_s:g} s"
    return done.returncode, done.stdout.decode("utf-8", errors="replace")


def failure_reason(argv: Sequence[str], returncode: int, output: str) -> str:
    """One sentence for a command that failed: the runner's own words, or exit code + output."""
    if returncode in (NOT_INSTALLED, TIMED_OUT, NOT_PERMITTED) and output.strip():
        return output.strip()
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return f"`{' '.join(argv)}` exited {returncode}: {first}"
