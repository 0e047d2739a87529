"""Power mode decisions and the nvpmodel adapter, on replayed nvpmodel output (never run for real).

``orin-nx-16gb-p-verbose.txt`` is written in the ``nvpmodel -p --verbose`` line format jtop parses
(POWER_MODEL / TPC_PG_MASK / PM_CONFIG, docs/tensorrt.md#power-modes-nvpmodel); its 10W mode gates
TPCs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agent.jobs.power import Apply, Keep, PowerControl, PowerError, Refuse, decide, parse_modes
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts, JetsonFacts

VERBOSE = (
    Path(__file__).resolve().parents[3] / "fixtures/nvpmodel/orin-nx-16gb-p-verbose.txt"
).read_text()
MODES = parse_modes(VERBOSE)


def nx(mode: str = "MAXN", mode_id: int = 0, simulated: bool = False) -> DeviceFacts:
    return DeviceFacts(
        hostname="nx",
        os="Ubuntu",
        arch="aarch64",
        jetson=JetsonFacts(power_mode=mode, power_mode_id=mode_id),
        simulated=simulated,
        profile="orin-nx-16gb" if simulated else None,
    )


def wants(mode: str | None, apply: bool = True) -> DelegateConfig:
    return DelegateConfig(power_mode=mode, apply_power_mode=apply)


def test_modes_are_parsed_with_their_tpc_masks() -> None:
    assert [(m.id, m.name, m.tpc_pg_mask) for m in MODES] == [
        (0, "MAXN", "0"),
        (1, "10W", "254"),
        (2, "15W", "0"),
        (3, "25W", "0"),
    ]


def test_a_mode_with_the_same_tpc_mask_is_applied() -> None:
    action = decide(wants("25W"), nx(), MODES)
    assert isinstance(action, Apply)
    assert action.mode.id == 3
    assert action.reason == "switching power mode MAXN → 25W (nvpmodel -m 3)"


@pytest.mark.parametrize(
    ("config", "facts", "reason"),
    [
        (wants(None), nx(), "the config names no power mode"),
        (wants("MAXN"), nx(), "already in power mode MAXN"),
        (wants("25W", apply=False), nx(), "apply_power_mode is off; staying in MAXN"),
        (wants("25W"), nx(simulated=True), "simulated profile orin-nx-16gb"),
        (
            wants("25W"),
            DeviceFacts(hostname="x", os="Debian", arch="x86_64"),
            "not a Jetson",
        ),
    ],
)
def test_the_mode_is_kept_with_the_reason(
    config: DelegateConfig, facts: DeviceFacts, reason: str
) -> None:
    action = decide(config, facts, MODES)
    assert isinstance(action, Keep)
    assert reason in action.reason


def test_a_mode_that_gates_tpcs_needs_a_reboot_and_is_refused() -> None:
    action = decide(wants("10W"), nx(), MODES)
    assert isinstance(action, Refuse)
    assert "needs a reboot" in action.reason
    assert "sudo nvpmodel -m 1" in action.reason


def test_an_unknown_mode_is_refused_listing_the_known_ones() -> None:
    action = decide(wants("40W"), nx(), MODES)
    assert isinstance(action, Refuse)
    assert action.reason.endswith("(MAXN, 10W, 15W, 25W)")


class Replay:
    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        key = " ".join(argv)
        self.calls.append(key)
        return self.answers.get(key, (127, f"{argv[0]} not installed (not found on PATH)"))


def test_the_adapter_runs_nvpmodel_m_only_for_an_apply() -> None:
    run = Replay({"nvpmodel -p --verbose": (0, VERBOSE), "nvpmodel -m 3": (0, "")})
    action = PowerControl(run).ensure(wants("25W"), nx())
    assert isinstance(action, Apply)
    assert run.calls == ["nvpmodel -p --verbose", "nvpmodel -m 3"]
    run.calls.clear()
    assert isinstance(PowerControl(run).ensure(wants("10W"), nx()), Refuse)
    assert run.calls == ["nvpmodel -p --verbose"]


def test_the_adapter_reports_nvpmodels_own_error() -> None:
    run = Replay(
        {
            "nvpmodel -p --verbose": (0, VERBOSE),
            "nvpmodel -m 3": (255, "NVPM ERROR: failed to write /sys/...: Permission denied\n"),
        }
    )
    with pytest.raises(PowerError, match="exited 255: NVPM ERROR: failed to write"):
        PowerControl(run).ensure(wants("25W"), nx())


def test_current_mode_is_read_from_nvpmodel_q() -> None:
    run = Replay({"nvpmodel -q": (0, "NV Power Mode: 25W\n3\n")})
    mode = PowerControl(run).current()
    assert mode is not None
    assert (mode.name, mode.id) == ("25W", 3)
