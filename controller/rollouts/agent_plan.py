"""An agent rollout's targets at creation (pure): who is skipped and why, and the downgrade
check. See :mod:`controller.rollouts.agent_gate` for the rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.errors import Conflict, InvalidInput
from controller.records import AgentReleaseRecord, AgentReport, DeviceRecord
from controller.rollouts import agent_gate
from controller.rollouts.model import RolloutSpec, Target, TargetStatus
from shared.agent_releases import AGENT_ARTIFACT_NAME

SHOWN = 5
"""Devices named in a refusal before "and N more"."""


def check_agent_spec(spec: RolloutSpec) -> None:
    """Refuse an agent rollout that names a model's things."""
    if spec.model != AGENT_ARTIFACT_NAME:
        raise InvalidInput(f"an agent rollout's model is {AGENT_ARTIFACT_NAME}, not {spec.model!r}")
    if spec.config is not None:
        raise InvalidInput("an agent rollout takes no delegate config")


def agent_skips(
    spec: RolloutSpec,
    devices: Sequence[DeviceRecord],
    reports: Mapping[str, AgentReport],
    releases: Sequence[AgentReleaseRecord],
) -> list[Target]:
    """The matched ``devices`` that cannot be ordered the release, as skipped targets;
    :class:`Conflict` when the release is older than the agent of a device that could take it
    and the spec does not allow a downgrade."""
    skipped: list[Target] = []
    older: list[str] = []
    for device in devices:
        report = reports.get(device.id)
        running = report.agent_version if report is not None else None
        why = agent_gate.why_not(device, running, releases, spec.version)
        if why is not None:
            skipped.append(Target(device.id, 0, TargetStatus.SKIPPED, why))
        elif agent_gate.downgrade(running, spec.version):
            older.append(f"{device.id} runs {running}")
    if older and not spec.allow_downgrade:
        more = f" and {len(older) - SHOWN} more" if len(older) > SHOWN else ""
        raise Conflict(
            f"release {spec.version} is older than the agent of {len(older)} device(s) "
            f"({', '.join(older[:SHOWN])}{more}): refused; start it with --allow-downgrade "
            "to go back to it"
        )
    return skipped
