"""Agent releases on the wire: the order to install one, and the device's account of it.

The controller asks a device to run another agent release through its desired document
(:attr:`shared.messages.DesiredState.agent`, an :class:`AgentReleaseOrder`); the device answers in
its reported document (:attr:`shared.messages.ReportedState.agent_update`, an
:class:`AgentUpdateStatus`) and with ``agent_update`` events whose ``data`` is one too.

Both fields are left out of the JSON while unset, so agents that predate self-update keep
accepting desired documents (wire models refuse unknown fields) and controllers that predate it
keep accepting reports. The controller never sends an order to an agent whose reported
``agent_version`` is older than :data:`FIRST_UPDATABLE_VERSION`: such an agent would refuse the
whole document. Those devices are upgraded once by hand (``apt install``), then by the fleet.

The release artifact is signed like a model: a :class:`shared.manifests.SignedManifest` of kind
``agent``, name :data:`AGENT_ARTIFACT_NAME`, version = the release version.

Pure: pydantic only.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from shared.manifests import SignedManifest
from shared.wire_model import VERSION_PATTERN, WireModel

AGENT_ARTIFACT_NAME: Final = "jetfleet-agent"
"""The manifest ``name`` of every agent release artifact."""

FIRST_UPDATABLE_VERSION: Final = "0.2.0"
"""The first agent release that understands :class:`AgentReleaseOrder`."""

AgentArch = Literal["aarch64", "x86_64"]

AgentUpdatePhase = Literal[
    "downloading",  # fetching the artifact (resumable, sha256-checked)
    "verifying",  # checking the signature and the release's own metadata
    "unpacking",  # into a new release directory beside the running one
    "checking",  # the new release's self-check (it starts, finds its TensorRT host, reads config)
    "switching",  # the `current` link is being moved (by the agent itself: no root needed)
    "restarting",  # the service restarts into the new release
    "confirming",  # the new release runs; it confirms once connected and serving
    "confirmed",  # the new release confirmed health: the update is done
    "rolled_back",  # the new release did not confirm in time; the previous one runs again
    "failed",  # the update stopped before the switch; the running release is unchanged
    "refused",  # the order was refused (older than the running release, bad signature, arch)
]
"""Where a device's agent update stands. Terminal: confirmed, rolled_back, failed, refused."""

TERMINAL_PHASES: Final = frozenset({"confirmed", "rolled_back", "failed", "refused"})


class AgentReleaseArtifact(WireModel):
    """Where the device fetches the release's bytes, and how it recognises them."""

    url: str = Field(description="HTTP(S) URL of the release archive (supports Range).")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the bytes.")
    size: int = Field(ge=1, description="Size in bytes.")
    format: Literal["deb", "tar.gz"] = Field(
        description="`deb`: the jetfleet-agent package; `tar.gz`: the release tree it installs."
    )
    signed: SignedManifest | None = Field(
        default=None,
        description="The release's manifest (kind `agent`) signed with the fleet key; an agent "
        "with a pinned fleet key refuses a release without a valid one.",
    )


class AgentReleaseOrder(WireModel):
    """Run agent release ``version`` (the device ignores an order for the version it runs)."""

    version: str = Field(pattern=VERSION_PATTERN, description="The release to run.")
    arch: AgentArch = Field(description="The architecture the release was built for.")
    artifact: AgentReleaseArtifact
    allow_downgrade: bool = Field(
        default=False,
        exclude_if=lambda allow: not allow,
        description="The operator allowed an older release than the one running.",
    )
    confirm_within_s: int = Field(
        default=300,
        ge=30,
        le=3600,
        description="How long the new release has to connect and serve before it is switched back.",
    )


class AgentUpdateStatus(WireModel):
    """A device's account of its latest agent update."""

    version: str = Field(pattern=VERSION_PATTERN, description="The release it was told to run.")
    phase: AgentUpdatePhase
    previous: str | None = Field(
        default=None, description="The release that ran before (the rollback target)."
    )
    error: str | None = Field(
        default=None,
        max_length=2000,
        description="Why it failed, was refused or rolled back, in one line.",
    )
    at: datetime = Field(description="When the phase was entered.")


_NUMBER = re.compile(r"\d+")


def version_key(version: str) -> tuple[tuple[int, object], ...]:
    """A sort key for release versions: numeric parts compare as numbers (0.10.0 > 0.9.1).

    A pre-release tag sorts before the release (``0.2.0rc1`` < ``0.2.0``); a local part
    after ``+`` sorts after it.
    """
    public, _, local = version.partition("+")
    parts: list[tuple[int, object]] = []
    for piece in re.split(r"[.\-_]", public):
        match = _NUMBER.match(piece)
        if match and match.end() == len(piece):
            parts.append((2, int(piece)))
        elif match:
            parts.append((2, int(match.group())))
            parts.append((0, piece[match.end() :]))  # 2.0rc1 < 2.0
        else:
            parts.append((0, piece))
    parts.append((1, local))
    return tuple(parts)


def is_older(candidate: str, running: str) -> bool:
    """True when release ``candidate`` is older than ``running``."""
    return version_key(candidate) < version_key(running)


def can_update(agent_version: str) -> bool:
    """True when an agent of ``agent_version`` understands an :class:`AgentReleaseOrder`."""
    return not is_older(agent_version, FIRST_UPDATABLE_VERSION)


def deb_version(version: str) -> str:
    """A Debian package version without epoch and revision: ``1:0.2.0-1`` → ``0.2.0``."""
    upstream = version.split(":", 1)[-1]
    head, dash, revision = upstream.rpartition("-")
    return head if dash and head and revision else upstream


def control_fields(text: str) -> dict[str, str]:
    """The fields of a Debian control file (continuation lines joined)."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key is not None:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip()
            fields[key] = value.strip()
    return fields
