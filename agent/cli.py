"""``jetfleet-agent``: run the gateway agent, print this device's facts, or check its setup."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from agent.daemon import run_agent
from agent.errors import AgentError, SettingsError
from agent.hardware.facts import probe
from agent.link.enrolment import enroll
from agent.service.doctor import doctor
from agent.service.logging_setup import configure_logging
from agent.service.self_check import self_check_command
from agent.settings import AgentSettings, load_settings

CONFIG_OPTION = click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML settings file; JETFLEET_* environment variables win over it.",
)


def _settings(config: Path | None, *, with_identity: bool = True) -> AgentSettings:
    try:
        return load_settings(config, with_identity=with_identity)
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _fail(exc: AgentError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2 if isinstance(exc, SettingsError) else 1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jetfleet")
def cli() -> None:
    """Jetfleet gateway agent: serves the models its controller assigns, reports telemetry."""


@cli.command()
@CONFIG_OPTION
def run(config: Path | None) -> None:
    """Connect to the broker, serve the desired models, report until SIGINT/SIGTERM."""
    settings = _settings(config)
    configure_logging(settings.log_level)
    try:
        settings.require_device_id()
        run_agent(settings)
    except AgentError as exc:
        _fail(exc)


@cli.command("probe")
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print DeviceFacts and the runtime as JSON.")
def probe_command(config: Path | None, as_json: bool) -> None:
    """Print this device's facts (absent sources say why) and the runtime it would use."""
    settings = _settings(config)
    try:
        probed = probe(
            simulated_profile=settings.simulated_profile,
            runtime=settings.runtime,
            tensorrt_python=settings.tensorrt_python,
        )
    except AgentError as exc:
        _fail(exc)
        return
    facts = probed.facts
    if as_json:
        data = facts.model_dump(mode="json", by_alias=True)
        data["runtime"] = probed.runtime
        data["runtime_reason"] = probed.runtime_reason
        click.echo(json.dumps(data, indent=2))
        return
    for key, value in facts.model_dump(mode="json", exclude={"sources", "schema_"}).items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None) or None
        click.echo(f"{key:20} {value if value is not None else '-'}")
    click.echo(f"{'runtime':20} {probed.runtime} ({probed.runtime_reason})")
    click.echo("sources:")
    for name, source in sorted(facts.sources.items()):
        state = "ok" if source.available else f"absent: {source.reason}"
        click.echo(f"  {name:18} {state}")


@cli.command("enroll")
@click.option(
    "--controller", "controller_url", required=True, metavar="URL", help="Controller base URL."
)
@click.option(
    "--token",
    required=True,
    envvar="JETFLEET_ENROLL_TOKEN",
    help="One-time enrolment token from `jetfleet devices enroll-token` "
    "(env JETFLEET_ENROLL_TOKEN).",
)
@click.option("--device-id", help="This gateway's id [default: device_id setting, or the token's].")
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the stored identity without secrets.")
def enroll_command(
    controller_url: str, token: str, device_id: str | None, config: Path | None, as_json: bool
) -> None:
    """Exchange a one-time token for this device's identity (saved 0600 in the state dir)."""
    settings = _settings(config, with_identity=False)
    try:
        summary = enroll(settings, controller_url, token, device_id)
    except AgentError as exc:
        _fail(exc)
        return
    if summary["ignored_labels"]:
        asked = ",".join(f"{k}={v}" for k, v in sorted(summary["ignored_labels"].items()))
        click.echo(
            f"warning: the controller ignored the labels {asked} of this agent's settings: "
            "labels come from the enrolment token (`jetfleet devices enroll-token --labels`) "
            f"or from `jetfleet devices label {summary['device_id']} k=v` on the controller",
            err=True,
        )
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"enrolled as {summary['device_id']}: identity saved to {summary['path']} (0600)")
    click.echo(f"broker {summary['broker_url']} as {summary['broker_username'] or '(anonymous)'}")
    click.echo("restart the agent to use it: systemctl restart jetfleet-agent")


cli.add_command(doctor)
cli.add_command(self_check_command)


def main() -> None:
    """Console-script entry point."""
    cli()
