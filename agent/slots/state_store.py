"""The agent's state directory: its layout and the last desired document, written atomically.

Keeping the desired document lets a restarted agent serve its models before the broker answers.
"""

from __future__ import annotations

import logging
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
