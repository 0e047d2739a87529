"""Crash-safe engine pointers: which engine each model serves (active) and the one it replaced
(rollback), persisted atomically in ``<state>/swap-journal.json``.

Written with tmp + fsync + rename + fsync of the directory (:func:`agent.slots.state_store.
write_atomically`), so after ``kill -9`` at any instant the file is either the previous or the
next version, never a torn one. The hot-swap writes ``pending`` before loading a new engine and
commits ``active``/``rollback`` in one write at the switch; a restarted agent serves ``active``
(falling back to ``rollback`` when ``active`` no longer loads) and ignores ``pending`` — a swap
that did not reach its switch never happened. Engine files named here stay pinned in the cache.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent.durable_files import write_atomically
from agent.hardware.runtime_kinds import ONNXRUNTIME

log = logging.getLogger(__name__)

JOURNAL_FILE = "swap-journal.json"


@dataclass(frozen=True)
class Pointer:
    """One engine a model can serve: enough to load it again without the network."""

    version: str
    sha256: str
    engine_path: str
    engine_key: str | None = None
    runtime: str = ONNXRUNTIME.name
    fallback_reason: str | None = None
    """Why this ONNX Runtime engine serves on a TensorRT device (:mod:`agent.slots.fallback`):
    restored as such after a restart instead of building TensorRT again."""


@dataclass(frozen=True)
class ModelPointers:
    """A model's entry in the journal."""

    active: Pointer | None = None
    rollback: Pointer | None = None
    pending: Pointer | None = None


def _pointer(raw: Any) -> Pointer | None:
    if not isinstance(raw, dict):
        return None
    try:
        return Pointer(**raw)
    except TypeError:
        return None


class SwapJournal:
    """The journal of one state directory; every method writes the whole file atomically."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / JOURNAL_FILE
        self._lock = threading.Lock()
        self._models = self._read()

    def _read(self) -> dict[str, ModelPointers]:
        try:
            raw = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignored unreadable %s: %s", self.path, exc)
            return {}
        models = raw.get("models", {}) if isinstance(raw, dict) else {}
        return {
            str(name): ModelPointers(
                _pointer(entry.get("active")),
                _pointer(entry.get("rollback")),
                _pointer(entry.get("pending")),
            )
            for name, entry in models.items()
            if isinstance(entry, dict)
        }

    def _write(self) -> None:
        doc = {
            "models": {
                name: {k: (asdict(v) if v else None) for k, v in asdict_shallow(p).items()}
                for name, p in sorted(self._models.items())
            }
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(doc, indent=1).encode())

    def models(self) -> dict[str, ModelPointers]:
        with self._lock:
            return dict(self._models)

    def get(self, name: str) -> ModelPointers:
        with self._lock:
            return self._models.get(name, ModelPointers())

    def begin(self, name: str, pending: Pointer) -> None:
        """A swap of ``name`` to ``pending`` starts (only a record: nothing serves it yet)."""
        with self._lock:
            old = self._models.get(name, ModelPointers())
            self._models[name] = ModelPointers(old.active, old.rollback, pending)
            self._write()

    def commit(self, name: str, active: Pointer) -> None:
        """The switch: ``active`` serves, the previous active becomes the rollback."""
        with self._lock:
            old = self._models.get(name, ModelPointers())
            rollback = old.active if old.active != active else old.rollback
            self._models[name] = ModelPointers(active, rollback, None)
            self._write()

    def abort(self, name: str) -> None:
        """The swap failed before its switch: forget ``pending``."""
        with self._lock:
            old = self._models.get(name)
            if old is None or old.pending is None:
                return
            self._models[name] = ModelPointers(old.active, old.rollback, None)
            self._write()

    def remove(self, name: str) -> None:
        """``name`` is no longer served."""
        with self._lock:
            if self._models.pop(name, None) is not None:
                self._write()


def asdict_shallow(p: ModelPointers) -> dict[str, Pointer | None]:
    return {"active": p.active, "rollback": p.rollback, "pending": p.pending}
