"""Agent rollouts (pure): which devices may be ordered a release, and how a device's report of
its agent update is judged.

A device is ordered a release only when it can act on the order: its architecture (from its
reported facts) has a release of that version built for its JetPack line (:func:`pick`), its
agent understands orders (:func:`shared.agent_releases.can_update`: an older agent would
refuse the whole desired document), and it does not run that release already. A release older
than a device's own is a downgrade, refused unless the operator allowed it.

A device passes when it reports the new ``agent_version``, its update ``confirmed`` and every
slot it reports serving again (then its inference health is gated like a model rollout's); it
fails when its update for this release ends ``rolled_back``, ``failed`` or ``refused``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from controller.records import AgentReleaseRecord, DeviceRecord
from shared.agent_releases import (
    FIRST_UPDATABLE_VERSION,
    AgentUpdateStatus,
    can_update,
    is_older,
)
from shared.messages import SlotPhase, SlotStatus

FAILED_PHASES = frozenset({"rolled_back", "failed", "refused"})
_ARCH_ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64"}


@dataclass(frozen=True)
class AgentObservation:
    """What a device last reported of its agent and slots."""

    observed_generation: int | None
    agent_version: str | None
    update: AgentUpdateStatus | None
    slots: tuple[SlotStatus, ...] = ()

    @property
    def slots_serving(self) -> bool:
        """Every slot it reports serves (a device with no slot serves nothing, and passes)."""
        return all(s.phase is SlotPhase.SERVING for s in self.slots)


Verdict = Literal["waiting", "confirmed", "failed"]


def device_arch(device: DeviceRecord) -> str | None:
    """The release architecture of a device's reported ``arch`` (None: no facts)."""
    if device.device_facts is None:
        return None
    arch = device.device_facts.arch
    return _ARCH_ALIASES.get(arch, arch)


def device_jetpack(device: DeviceRecord) -> str | None:
    """The JetPack release a device reports (None: not a Jetson, or no facts)."""
    jetson = device.device_facts.jetson if device.device_facts is not None else None
    return jetson.jetpack if jetson is not None else None


def pick(device: DeviceRecord, releases: Sequence[AgentReleaseRecord]) -> AgentReleaseRecord | str:
    """The release of one version (``releases``: its builds) for this device, or why none fits:
    its architecture, and on a Jetson a build for its JetPack line (the fewest lines that
    include it) before one for any line."""
    arch = device_arch(device)
    if arch is None:
        return "no reported facts yet: its architecture is unknown"
    builds = [r for r in releases if r.arch == arch]
    if not builds:
        version = releases[0].version if releases else "?"
        pushed = ", ".join(sorted({r.arch for r in releases})) or "none"
        return f"no release {version} for its architecture {arch} (pushed for: {pushed})"
    jetpack = device_jetpack(device)
    line = jetpack.split(".")[0] if jetpack else None
    # off a Jetson (no JetPack) the lines say nothing: any build of its architecture fits
    fitting = [r for r in builds if line is None or not r.jetpack or line in r.jetpack]
    if not fitting:
        lines = "; ".join(",".join(r.jetpack) for r in builds)
        return (
            f"release {builds[0].version} for {arch} runs on JetPack {lines}; the device has "
            f"JetPack {jetpack}"
        )
    return min(fitting, key=lambda r: (len(r.jetpack) or 99, -r.id))


def why_not(
    device: DeviceRecord,
    running: str | None,
    releases: Sequence[AgentReleaseRecord],
    version: str,
    *,
    ordering: bool = False,
) -> str | None:
    """Why ``device`` (running agent ``running``) cannot be ordered release ``version``
    (``releases``: its builds); None when it can. ``ordering``: the device is in the rollout
    already, so running ``version`` is no reason (it ignores the order)."""
    release = pick(device, releases)
    if isinstance(release, str):
        return release
    if running is None:
        return "it has not reported its agent version"
    if not can_update(running):
        return (
            f"its agent {running} is older than {FIRST_UPDATABLE_VERSION}, the first that "
            f"updates itself (it would refuse the order): upgrade it once by hand"
        )
    if running == version and not ordering:
        return f"it already runs agent {version}"
    return None


def downgrade(running: str | None, version: str) -> bool:
    """True when release ``version`` is older than the agent the device runs."""
    return running is not None and is_older(version, running)


def verdict(
    obs: AgentObservation | None,
    version: str,
    generation: int,
    started_at: datetime,
) -> tuple[Verdict, str]:
    """How the device's report stands against the order of ``version`` sent at ``generation``
    (``started_at``): an update status counts once it is about this release and newer than the
    order (the device saw that generation, or entered the phase after the order went out)."""
    if obs is None or obs.update is None:
        return "waiting", ""
    update = obs.update
    fresh = (obs.observed_generation or -1) >= generation or update.at >= started_at
    if update.version != version or not fresh:
        return "waiting", ""
    if update.phase in FAILED_PHASES:
        why = update.error or "no error given"
        if update.phase == "rolled_back":
            back = f" to {update.previous}" if update.previous else ""
            return "failed", f"the device rolled back{back}: {why}"
        return "failed", f"the agent update {update.phase.replace('_', ' ')}: {why}"
    if update.phase == "confirmed" and obs.agent_version == version and obs.slots_serving:
        return "confirmed", ""
    return "waiting", ""


def waiting_reason(obs: AgentObservation | None, version: str, timeout_s: float) -> str:
    """Why a device that never confirmed ``version`` failed after ``timeout_s``."""
    if obs is None or obs.update is None or obs.update.version != version:
        return f"no update to agent {version} reported within {timeout_s:g} s"
    if obs.update.phase == "confirmed" and not obs.slots_serving:
        return f"agent {version} confirmed but its slots do not serve within {timeout_s:g} s"
    return f"agent {version} not confirmed within {timeout_s:g} s (phase {obs.update.phase})"


CONFIRM_DEFAULT_S = 300
CONFIRM_MIN_S = 30


def confirm_bound(device_timeout_s: float) -> int:
    """How long a device gives a new release to confirm before it switches back by itself.

    Never longer than the rollout waits for the device (``device_timeout_s``), so a release that
    does not confirm is rolled back on the device before the controller fails it; never longer
    than the wire's default (300 s) nor shorter than its minimum (30 s).
    """
    return max(CONFIRM_MIN_S, min(CONFIRM_DEFAULT_S, int(device_timeout_s)))
