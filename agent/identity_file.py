"""The enrolled identity on disk: ``<state_dir>/identity.json``, read, written and turned into
settings.

``jetfleet-agent enroll`` (:mod:`agent.link.enrolment`) stores the controller's answer
(:class:`shared.enrolment.EnrolmentAnswer`, whose field names are the file's keys) here (mode
0600, replaced atomically): the device id, its own broker credential, an API token for the
controller, the fleet's public signing key (pinned by :mod:`agent.trust.store`) and the labels it
was granted. :func:`agent.settings.load_settings` fills the settings an identity provides
(:data:`SETTINGS_FROM_IDENTITY`) unless the config file or the environment sets them.

A leaf of the agent, like :mod:`agent.settings` beside it: it imports no agent module but
:mod:`agent.durable_files`, so settings can read the file without importing the network package.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.durable_files import fsync_dir
from shared.enrolment import ENROLMENT_FIELDS

IDENTITY_FILE = "identity.json"
IDENTITY_KEYS = ENROLMENT_FIELDS
NOT_SETTINGS = ("fleet_key", "enrolled_at")  # the trust store's, and a record
SETTINGS_FROM_IDENTITY = tuple(key for key in IDENTITY_KEYS if key not in NOT_SETTINGS)
"""Settings an identity fills when neither the config file nor the environment sets them."""


def identity_path(state_dir: Path) -> Path:
    return state_dir / IDENTITY_FILE


def read_identity(state_dir: Path) -> dict[str, Any] | None:
    """The stored identity, or None before enrolment; ValueError when the file is unusable."""
    path = identity_path(state_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON ({exc}): enrol again") from exc
    if not isinstance(data, dict) or not isinstance(data.get("device_id"), str):
        raise ValueError(f"{path} holds no device identity: enrol again")
    return data


def identity_settings(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The settings values an identity provides (None values left out)."""
    return {
        key: identity[key]
        for key in SETTINGS_FROM_IDENTITY
        if identity.get(key) is not None and identity.get(key) != {}
    }


def write_identity(state_dir: Path, identity: Mapping[str, Any]) -> Path:
    """Replace ``identity.json`` atomically, created with mode 0600 (it holds secrets)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = identity_path(state_dir)
    data = {key: identity.get(key) for key in IDENTITY_KEYS}
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(state_dir)
    return path
