"""The options every rollout command shares (targets, waves, health gates, failure policy) and
the request body they make: ``jetfleet rollouts create`` and ``jetfleet agent rollout start``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = [
    click.option("--selector", default=None, help="k=v, k!=v, k in (a,b); comma = and."),
    click.option("--device", "devices", multiple=True, help="Target this device (repeatable)."),
    click.option("--hardware-class", default=None, help="e.g. jetson-orin-nano-8gb/jp6.2"),
    click.option("--jetpack-min", default=None, help="Lowest JetPack release, e.g. 6.0."),
    click.option("--jetpack-max", default=None, help="Highest JetPack release, e.g. 6.2."),
    click.option("--include-late", is_flag=True, help="Also devices that enrol while it runs."),
    click.option("--waves", default="1,10%,50%,100%", show_default=True, help="Cumulative waves."),
    click.option("--canary", "canary", multiple=True, help="Canary device, updated first."),
    click.option("--max-in-flight", type=int, default=None, help="Devices updating at once."),
    click.option("--device-timeout", type=float, default=600.0, show_default=True, help="Seconds."),
    click.option("--soak", type=float, default=0.0, show_default=True, help="Seconds healthy."),
    click.option("--max-error-rate", type=float, default=5.0, show_default=True, help="Percent."),
    click.option(
        "--max-p99-ratio", type=float, default=2.0, show_default=True, help="Times baseline p99."
    ),
    click.option("--min-requests", type=int, default=20, show_default=True),
    click.option("--max-failures", type=int, default=None, help="Abort at N failed devices."),
    click.option("--max-failure-percent", type=float, default=None, help="Abort at P% failed."),
]


def rollout_options(func: F) -> F:
    """Add the shared options (their values reach the command by these names)."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def spec_body(o: dict[str, Any], rollback: bool = True) -> dict[str, Any]:
    """``targets``, ``strategy``, ``gates`` and ``policy`` of a create request from the shared
    options' values ``o``."""
    return {
        "targets": {
            "selector": o["selector"],
            "devices": list(o["devices"]),
            "hardware_class": o["hardware_class"],
            "jetpack_min": o["jetpack_min"],
            "jetpack_max": o["jetpack_max"],
            "include_late": o["include_late"],
        },
        "strategy": {
            "waves": o["waves"],
            "canary": list(o["canary"]),
            "max_in_flight": o["max_in_flight"],
            "device_timeout_s": o["device_timeout"],
            "soak_s": o["soak"],
        },
        "gates": {
            "max_error_percent": o["max_error_rate"],
            "max_p99_ratio": o["max_p99_ratio"],
            "min_requests": o["min_requests"],
        },
        "policy": {
            "max_failures": o["max_failures"],
            "max_failure_percent": o["max_failure_percent"],
            "rollback": rollback,
        },
    }
