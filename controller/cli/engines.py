"""``jetfleet engines``: the engines stored in the controller's engine store."""

from __future__ import annotations

from typing import Any

import click

from controller.cli.operator import api_options, call_api
from controller.cli.render import emit_json, table


def engine_class(validity: dict[str, Any]) -> str:
    """Where an engine runs, from its validity key: device/GPU name, else runtime and platform."""
    name = validity.get("device_name")
    if name:
        cc = validity.get("compute_capability")
        return f"{name} (sm {cc})" if cc else str(name)
    return f"{validity.get('runtime')} {validity.get('platform')}"


def _tag(tuning: dict[str, Any]) -> str:
    mode = tuning.get("power_mode") or "default"
    return f"{mode}+clocks" if tuning.get("jetson_clocks") else str(mode)


@click.group()
def engines() -> None:
    """Built engines shared through the controller (one build per engine key and tuning)."""


@engines.command("ls")
@api_options
def engines_ls(url: str, as_json: bool) -> None:
    """List stored engines, one row per (engine key, tuning tag): key, builder, class, tuning
    (power mode, +clocks), size and build time."""
    out = call_api(lambda c: c.engines(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            m["engine_key"][:12],
            m["built_by"],
            engine_class(m["validity"]),
            _tag(m["tuning"]),
            m["size"],
            f"{m['build_seconds']:.1f}",
        )
        for m in out
    ]
    click.echo(table(["engine", "built by", "class", "tuning", "bytes", "seconds"], rows))
