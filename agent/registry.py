"""Compatibility name for :mod:`agent.serving_core` (the two-slot serving core and its essay)."""

from __future__ import annotations

from agent.serving_core import Busy, ModelRegistry, ModelSlots, NotServed, ServedModel

__all__ = ["Busy", "ModelRegistry", "ModelSlots", "NotServed", "ServedModel"]
