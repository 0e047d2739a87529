"""Stop the agent at a named checkpoint so a crash-safety test can ``kill -9`` it there.

Loaded as ``sitecustomize`` by an agent subprocess whose ``PYTHONPATH`` starts with this
directory (:func:`tests.agent_pause.pythonpath`). It registers an observer of
:mod:`agent.checkpoints` only when one of the variables below is set; otherwise it imports
nothing.

- ``JETFLEET_TEST_PAUSE_AT`` names a ``swap:*`` step: every time the agent reaches it, the
  step's name is written to ``<state>/test-paused-at`` and that thread blocks for good (serving
  threads keep running). Used by ``tests/integration/hotswap/test_crash_safety.py``.
- ``JETFLEET_TEST_UPDATE_PAUSE_AT`` names an ``update:*`` step: the first time only (the marker
  ``<state>/test-update-paused-at`` does not exist yet), the step's name is written to the
  marker atomically and that thread blocks for good; a restarted agent passes. Used by
  ``tests/integration/agent_update/test_kill_during_update.py``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

SWAP_ENV = "JETFLEET_TEST_PAUSE_AT"
SWAP_MARKER = "test-paused-at"
UPDATE_ENV = "JETFLEET_TEST_UPDATE_PAUSE_AT"
UPDATE_MARKER = "test-update-paused-at"


def pause_every_time(at: str, step: str, state_dir: Path) -> None:
    """Block forever when ``step`` is ``at``, after writing the marker; otherwise return."""
    if step != at:
        return
    (state_dir / SWAP_MARKER).write_text(step)
    threading.Event().wait()


def pause_once(at: str, step: str, state_dir: Path) -> None:
    """Block forever the first time ``step`` is ``at`` (no marker yet); otherwise return."""
    if step != at or (state_dir / UPDATE_MARKER).exists():
        return
    tmp = state_dir / f".{UPDATE_MARKER}.tmp"
    tmp.write_text(step)
    tmp.rename(state_dir / UPDATE_MARKER)  # whole: a test that sees the marker reads the step
    threading.Event().wait()


def install(environ: Mapping[str, str] = os.environ) -> list[Callable[[], None]]:
    """Register the observers the variables in ``environ`` ask for; returns what stops them."""
    swap_at, update_at = environ.get(SWAP_ENV), environ.get(UPDATE_ENV)
    if not swap_at and not update_at:
        return []
    from agent.checkpoints import observe

    stops = []
    if swap_at:
        stops.append(observe(lambda step, state_dir: pause_every_time(swap_at, step, state_dir)))
    if update_at:
        stops.append(observe(lambda step, state_dir: pause_once(update_at, step, state_dir)))
    return stops


if __name__ == "sitecustomize":
    install()
