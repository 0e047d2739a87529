"""Pause an agent subprocess at a named checkpoint (:mod:`agent.checkpoints`) for crash tests.

The pausing lives in this directory's ``sitecustomize.py``, which an agent subprocess loads
when :func:`pythonpath` puts the directory first on its ``PYTHONPATH``; the product has no
test behaviour of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tests.agent_pause.sitecustomize import SWAP_ENV, SWAP_MARKER, UPDATE_ENV, UPDATE_MARKER

SITE_DIR = Path(__file__).resolve().parent

__all__ = ["SITE_DIR", "SWAP_ENV", "SWAP_MARKER", "UPDATE_ENV", "UPDATE_MARKER", "pythonpath"]


def pythonpath(env: Mapping[str, str]) -> str:
    """``env``'s ``PYTHONPATH`` with this directory first, so its ``sitecustomize`` loads."""
    rest = env.get("PYTHONPATH")
    return os.pathsep.join([str(SITE_DIR), rest] if rest else [str(SITE_DIR)])
