"""Test hook: stop the update once at a named step, so a test can ``kill -9`` the agent there.

Set ``JETFLEET_TEST_UPDATE_PAUSE_AT`` to ``update:download`` (after the first chunk is
written), ``update:unpack`` (after the first file's first chunk),
``update:switch`` (after ``pending`` and ``previous`` are written, before ``current`` moves),
``update:restart`` (after the switch, before the agent re-executes the launcher) or
``update:confirm`` (the new release runs, before it confirms). The first time the agent reaches
that step it writes the step's name to ``<state>/test-update-paused-at`` and blocks that thread
for good; a restarted agent (the marker exists) passes. Unset in production: one dictionary
lookup.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

ENV = "JETFLEET_TEST_UPDATE_PAUSE_AT"
MARKER = "test-update-paused-at"


def pause_once(step: str, state_dir: Path) -> None:
    """Block forever the first time the agent reaches ``step``, when the variable names it."""
    if os.environ.get(ENV) != step or (state_dir / MARKER).exists():
        return
    tmp = state_dir / f".{MARKER}.tmp"
    tmp.write_text(step)
    tmp.rename(state_dir / MARKER)  # whole: a test that sees the marker reads the step
    threading.Event().wait()
