"""Power mode (nvpmodel): the pure decision and the adapter that applies it.

:func:`decide` answers what to do about a config's ``power_mode`` on this device: keep the mode
(with the reason), apply a mode, or refuse (unknown mode; a mode whose GPU TPC power-gating mask
differs from the current one, which nvpmodel only applies after a reboot,
docs/tensorrt.md#power-modes-nvpmodel). The agent never reboots a gateway and never switches unless
the config says ``apply_power_mode``. :class:`PowerControl` runs ``nvpmodel -p --verbose``, ``-q``
and ``-m <id>`` through :mod:`agent.hardware.commands`' runner, so tests replay recorded output and
nothing runs nvpmodel on CI. An engine's tuning tag that no longer matches the mode is the
resolver's concern: the slot keeps serving and reports ``tuning_matches=False`` until a matching
engine is found or built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.hardware import jetson_text
from agent.hardware.commands import Runner, default_runner, failure_reason
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts

NVPMODEL_MODES = ("nvpmodel", "-p", "--verbose")
NVPMODEL_QUERY = ("nvpmodel", "-q")

_MODEL = re.compile(r"POWER_MODEL:\s*ID=(?P<id>\d+)\s+NAME=(?P<name>\S+)")
_TPC = re.compile(r"TPC_PG_MASK\s+(?P<mask>\w+)")


@dataclass(frozen=True)
class ModeInfo:
    """One nvpmodel mode: id, name and its GPU TPC power-gating mask (None if not listed)."""

    id: int
    name: str
    tpc_pg_mask: str | None = None


@dataclass(frozen=True)
class Keep:
    """Leave the power mode as it is."""

    reason: str


@dataclass(frozen=True)
class Apply:
    """Switch to ``mode`` with ``nvpmodel -m <id>`` (no reboot needed)."""

    mode: ModeInfo
    reason: str


@dataclass(frozen=True)
class Refuse:
    """The configured mode cannot be applied here; ``reason`` says why and what to do."""

    reason: str


PowerAction = Keep | Apply | Refuse


def parse_modes(text: str) -> list[ModeInfo]:
    """Modes from ``nvpmodel -p --verbose``: each POWER_MODEL line and the TPC mask after it."""
    modes: list[ModeInfo] = []
    for line in text.splitlines():
        model = _MODEL.search(line)
        if model:
            modes.append(ModeInfo(int(model["id"]), model["name"]))
            continue
        tpc = _TPC.search(line)
        if tpc and modes and modes[-1].tpc_pg_mask is None:
            last = modes[-1]
            modes[-1] = ModeInfo(last.id, last.name, tpc["mask"])
    return modes


def decide(config: DelegateConfig, facts: DeviceFacts, modes: Sequence[ModeInfo]) -> PowerAction:
    """What to do about ``config.power_mode`` on the device ``facts`` describes (pure)."""
    wanted = config.power_mode
    jetson = facts.jetson
    if wanted is None:
        return Keep("the config names no power mode")
    if jetson is None:
        return Keep(f"power mode {wanted} ignored: not a Jetson")
    if facts.simulated:
        return Keep(f"power mode {wanted} not applied: simulated profile {facts.profile}")
    current = jetson.power_mode
    if current == wanted:
        return Keep(f"already in power mode {wanted}")
    if not config.apply_power_mode:
        return Keep(
            f"the config wants power mode {wanted} but apply_power_mode is off; "
            f"staying in {current or 'the current mode'}"
        )
    target = next((m for m in modes if m.name == wanted), None)
    if target is None:
        known = ", ".join(m.name for m in modes) or "none listed"
        return Refuse(f"power mode {wanted} is not one of this device's modes ({known})")
    now = next((m for m in modes if m.id == jetson.power_mode_id or m.name == current), None)
    if now is not None and now.tpc_pg_mask != target.tpc_pg_mask:
        return Refuse(
            f"power mode {wanted} changes the GPU TPC mask ({now.tpc_pg_mask} → "
            f"{target.tpc_pg_mask}) and needs a reboot: switch with `sudo nvpmodel -m "
            f"{target.id}` and reboot"
        )
    return Apply(target, f"switching power mode {current} → {wanted} (nvpmodel -m {target.id})")


class PowerError(Exception):
    """nvpmodel failed; the message has its output."""


class PowerControl:
    """Runs nvpmodel through a command runner (the seam tests replay recorded output on)."""

    def __init__(self, run: Runner = default_runner) -> None:
        self._run = run

    def modes(self) -> list[ModeInfo]:
        code, out = self._run(NVPMODEL_MODES)
        if code != 0:
            raise PowerError(failure_reason(NVPMODEL_MODES, code, out))
        return parse_modes(out)

    def current(self) -> jetson_text.PowerMode | None:
        """The mode ``nvpmodel -q`` reports; None when it cannot be read."""
        code, out = self._run(NVPMODEL_QUERY)
        return jetson_text.power_mode_from_query(out) if code == 0 else None

    def ensure(self, config: DelegateConfig, facts: DeviceFacts) -> PowerAction:
        """Decide and, for :class:`Apply`, run ``nvpmodel -m <id>``; PowerError when it fails."""
        if config.power_mode is None or facts.jetson is None or facts.simulated:
            return decide(config, facts, ())
        action = decide(config, facts, self.modes())
        if isinstance(action, Apply):
            argv = ("nvpmodel", "-m", str(action.mode.id))
            code, out = self._run(argv)
            if code != 0 or "NVPM ERROR" in out:
                raise PowerError(failure_reason(argv, code, out))
        return action
