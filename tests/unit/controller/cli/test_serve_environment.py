"""Health thresholds and telemetry retention: environment variables read once into the settings,
with the defaults deployments had before they were settings, and one line naming a bad one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.cli.main import cli
from controller.settings import HealthThresholds, Settings, from_environment


def base(tmp_path: Path) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'x.db'}", broker_url=None, data_dir=tmp_path)


def test_without_variables_the_defaults_are_the_old_ones(tmp_path: Path) -> None:
    s = from_environment(base(tmp_path), {})
    assert s.health == HealthThresholds()
    assert (s.health.offline_after_s, s.health.p99_ms, s.health.min_requests) == (90.0, 500.0, 20)
    assert (s.retention_raw_s, s.retention_rollup_s) == (24 * 3600, 30 * 24 * 3600)


def test_variables_set_the_thresholds_and_the_retention(tmp_path: Path) -> None:
    env = {
        "JETFLEET_HEALTH_TEMPERATURE_C": "70",
        "JETFLEET_HEALTH_MIN_REQUESTS": "5",
        "JETFLEET_RETENTION_RAW_HOURS": "2",
        "JETFLEET_RETENTION_ROLLUP_DAYS": "7",
    }
    s = from_environment(base(tmp_path), env)
    assert (s.health.temperature_c, s.health.min_requests, s.health.p99_ms) == (70.0, 5, 500.0)
    assert (s.retention_raw_s, s.retention_rollup_s) == (2 * 3600, 7 * 86400)


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        (
            "JETFLEET_HEALTH_P99_MS",
            "fast",
            "JETFLEET_HEALTH_P99_MS='fast' is not a number: set it to e.g. 500.0",
        ),
        ("JETFLEET_HEALTH_ERROR_RATE", "-0.1", "JETFLEET_HEALTH_ERROR_RATE must be >= 0, got -0.1"),
        (
            "JETFLEET_RETENTION_RAW_HOURS",
            "a day",
            "JETFLEET_RETENTION_RAW_HOURS='a day' is not a number: set e.g. "
            "JETFLEET_RETENTION_RAW_HOURS=24",
        ),
        (
            "JETFLEET_RETENTION_ROLLUP_DAYS",
            "0",
            "JETFLEET_RETENTION_ROLLUP_DAYS must be > 0, got 0",
        ),
    ],
)
def test_serve_refuses_a_bad_value_with_one_line_naming_the_variable(
    tmp_path: Path, variable: str, value: str, line: str
) -> None:
    """Refused before anything starts (the database here is not even migrated)."""
    result = CliRunner().invoke(
        cli,
        ["serve", "--data-dir", str(tmp_path), "--http", "127.0.0.1:0"],
        env={variable: value},
    )
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"Error: {line}"]
