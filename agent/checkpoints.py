"""Named checkpoints: a seam where a test or a diagnostic can watch the agent pass named steps.

The agent calls :func:`reached` at the steps of work that must survive a crash: a hot swap that
replaces a serving version (``swap:begin``, ``swap:loaded``, ``swap:validated``,
``swap:committed``, ``swap:switched``, ``swap:drained``; ``swap:unloaded`` for cold swaps,
:mod:`agent.swap.hotswap`) and a self-update (``update:download`` after the first chunk is
written, ``update:unpack`` after the first file's first chunk, ``update:switch`` before
``current`` moves, ``update:restart`` before the launcher is re-executed, ``update:confirm``
before the new release confirms; :mod:`agent.update`).

Observers registered with :func:`observe` run on the thread that reached the step, with the
step's name and the agent's state directory; they may log, count or block that thread. None
is registered by default, so a checkpoint costs one check of an empty list. The crash-safety
tests register one from the agent subprocess's ``sitecustomize`` (``tests/agent_pause/``) that
stops the agent at a step so they can ``kill -9`` it there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

Observer = Callable[[str, Path], None]
"""Called with the step's name and the agent's state directory."""

_observers: list[Observer] = []


def observe(callback: Observer) -> Callable[[], None]:
    """Call ``callback`` at every checkpoint from now on; returns what stops it."""
    _observers.append(callback)
    return lambda: _observers.remove(callback)


def reached(step: str, state_dir: Path) -> None:
    """The agent passes ``step``: tell the observers, if any."""
    if not _observers:
        return
    for observer in tuple(_observers):
        observer(step, state_dir)
