"""``jetfleet-agent doctor``: what stands between this gateway and serving, each with its fix.

The command runs the probes (:mod:`agent.service.doctor_probes`: broker, controller, hardware,
credentials, disk), judges what they saw with the pure checks (:mod:`agent.service.doctor_checks`)
and prints one line per check, or JSON; it exits 1 when a check blocks serving. The names callers
use (``observe``, ``run_checks``, ``Observations``...) are importable from here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import click

from agent.errors import SettingsError
from agent.service.doctor_checks import (
    CHECKS,
    CheckResult,
    HttpAnswer,
    Observations,
    check_broker,
    check_controller,
    evaluate,
    run_checks,
)
from agent.service.doctor_probes import free_bytes, http_health, list_credentials, observe
from agent.settings import load_settings

__all__ = [  # the doctor's names, wherever they live (callers import them from here)
    "CHECKS",
    "CheckResult",
    "HttpAnswer",
    "Observations",
    "check_broker",
    "check_controller",
    "doctor",
    "evaluate",
    "free_bytes",
    "http_health",
    "list_credentials",
    "observe",
    "render_text",
    "run_checks",
]


def render_text(results: Sequence[CheckResult]) -> str:
    """One line per check, its fix indented below it when there is one."""
    marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    lines = []
    for r in results:
        lines.append(f"{marks[r.status]} {r.name:12} {r.detail}")
        if r.fix and r.status != "ok":
            lines.append(f"     {'':12} fix: {r.fix}")
    return "\n".join(lines)


@click.command("doctor")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML settings file; JETFLEET_* environment variables win over it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as a JSON list.")
def doctor(config: Path | None, as_json: bool) -> None:
    """Check what serving needs; exit 1 when something blocks it."""
    try:
        settings = load_settings(config)
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    results = run_checks(observe(settings))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        click.echo(render_text(results))
    sys.exit(evaluate(results))
