"""The agent's state directory: its layout and the last desired document, written atomically.

Keeping the desired document lets a restarted agent serve its models before the broker answers.
A full state directory must not stop the agent (the soak bench's redeploy while the state
directory was full killed it with ENOSPC): :class:`KeptDesired` holds the newest document in
memory until it can be written.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from agent.durable_files import write_atomically
from agent.errors import StartupError
from shared.codec import MessageError, decode, encode
from shared.messages import DesiredState

log = logging.getLogger(__name__)

DESIRED_FILE = "desired.json"


def ensure_layout(state_dir: Path) -> None:
    """Create ``downloads/`` and ``models/``; StartupError naming the setting when impossible."""
    try:
        for sub in ("downloads", "models"):
            (state_dir / sub).mkdir(parents=True, exist_ok=True)
        probe = state_dir / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StartupError(
            f"state directory {state_dir} is not writable ({exc.strerror}): "
            "set JETFLEET_STATE_DIR to a directory this user can write"
        ) from exc


def downloaded(state_dir: Path) -> frozenset[str]:
    """sha256 of every model file moved into ``models/`` (they were verified on arrival)."""
    return frozenset(p.stem for p in (state_dir / "models").glob("*.onnx"))


def save_desired(state_dir: Path, desired: DesiredState) -> None:
    """Keep ``desired`` as the document to serve after a restart."""
    write_atomically(state_dir / DESIRED_FILE, encode(desired))


class KeptDesired:
    """``save`` the desired document; while the state directory cannot be written (full, read
    only) the newest one waits in memory (the agent acts on it meanwhile) and ``retry``, called
    by the agent's loop, writes it at most every ``retry_every_s``. One WARNING line when
    writing starts failing, one INFO line once it is kept again."""

    def __init__(self, state_dir: Path, retry_every_s: float = 1.0) -> None:
        self._state_dir = state_dir
        self._retry_every = retry_every_s
        self._waiting: DesiredState | None = None
        self._failing_since: float | None = None
        self._tried = 0.0

    @property
    def waiting(self) -> DesiredState | None:
        """The document not written yet, if any."""
        return self._waiting

    def save(self, desired: DesiredState) -> None:
        self._waiting = desired
        self._write()

    def retry(self) -> None:
        if self._waiting is not None and time.monotonic() - self._tried >= self._retry_every:
            self._write()

    def _write(self) -> None:
        desired = self._waiting
        if desired is None:
            return
        self._tried = time.monotonic()
        try:
            save_desired(self._state_dir, desired)
        except OSError as exc:
            if self._failing_since is None:
                self._failing_since = self._tried
                log.warning(
                    "cannot keep desired generation %d in %s (%s): acting on it from memory and "
                    "writing it once the state directory can be written",
                    desired.generation,
                    self._state_dir,
                    exc.strerror or exc,
                )
            return
        if self._failing_since is not None:
            log.info(
                "kept desired generation %d in %s, %.0f s after writing it first failed",
                desired.generation,
                self._state_dir,
                self._tried - self._failing_since,
            )
        self._waiting, self._failing_since = None, None


def load_desired(state_dir: Path) -> DesiredState | None:
    """The kept desired document; None when there is none or it does not validate."""
    path = state_dir / DESIRED_FILE
    try:
        payload = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode(DesiredState, payload)
    except MessageError as exc:
        log.warning("ignored %s: field %s: %s", path, exc.field, exc.reason)
        return None
