"""Test hook: pause the agent at a named step so a test can ``kill -9`` it there deterministically.

Set ``JETFLEET_TEST_PAUSE_AT`` to a step name (``swap:begin``, ``swap:loaded``,
``swap:validated``, ``swap:committed``, ``swap:switched``, ``swap:drained``, ``swap:unloaded``
for cold swaps). When the agent reaches that step of a swap that *replaces* a serving version (a
model's first load never pauses) it writes the step's name to
``<state>/test-paused-at`` and blocks that thread for good (serving threads keep running). The
crash-safety tests (``tests/integration/hotswap``) wait for the file, SIGKILL the agent and
restart it. Unset in production: the check is one dictionary lookup.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

ENV = "JETFLEET_TEST_PAUSE_AT"
MARKER = "test-paused-at"


def pause_point(step: str, state_dir: Path) -> None:
    """Block forever when ``JETFLEET_TEST_PAUSE_AT`` names ``step``; otherwise return at once."""
    if os.environ.get(ENV) != step:
        return
    (state_dir / MARKER).write_text(step)
    threading.Event().wait()
