"""``jetfleet engines``: the engines in the controller's store, who built them, and which ones
twins may pull (trust per hardware class, approvals)."""

from __future__ import annotations

from collections.abc import Sequence
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


def builder(engine: dict[str, Any]) -> str:
    """``gw-1 (device)``, ``ci (operator)``; the manifest's word when no uploader was recorded."""
    who = engine.get("uploaded_by")
    if who:
        return f"{who} ({engine.get('uploader')})"
    return f"{engine.get('built_by')} (unverified)"


def resolve_key(text: str, keys: Sequence[str]) -> str:
    """The one engine key in ``keys`` that starts with ``text`` (as ``engines ls`` shows 12)."""
    found = sorted({k for k in keys if k.startswith(text.lower())}) if text else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise click.ClickException(f"no stored engine key starts with {text!r}: see `engines ls`")
    raise click.ClickException(
        f"{len(found)} engine keys start with {text!r}: give more of the key (`engines ls --json`)"
    )


def _tag(tuning: dict[str, Any]) -> str:
    mode = tuning.get("power_mode") or "default"
    return f"{mode}+clocks" if tuning.get("jetson_clocks") else str(mode)


@click.group()
def engines() -> None:
    """Built engines shared through the controller (one build per engine key and tuning)."""


@engines.command("ls")
@api_options
def engines_ls(url: str, as_json: bool) -> None:
    """List stored engines, one row per (engine key, tuning tag): key, who built it, class,
    tuning (power mode, +clocks), whether twins pull it, size and build time.

    BUILT BY is the uploading device, or the operator token that uploaded it. TWINS says
    whether the twins of its class pull it: operator (an operator uploaded it), approved,
    trusted (its class trusts device builds) or pending (only its builder uses it).
    """
    out = call_api(lambda c: c.engines(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            m["engine_key"][:12],
            builder(m),
            engine_class(m["validity"]),
            _tag(m["tuning"]),
            m.get("status"),
            m["size"],
            f"{m['build_seconds']:.1f}",
        )
        for m in out
    ]
    click.echo(table(["engine", "built by", "class", "tuning", "twins", "bytes", "seconds"], rows))
    if any(m.get("status") == "pending" for m in out):
        click.echo(
            "pending: only its builder uses it; share it with `jetfleet engines approve KEY` "
            "or trust its class's device builds with `jetfleet engines trust CLASS --devices`"
        )


@engines.command("approve")
@click.argument("key")
@click.option(
    "--tuning", help="Tuning tag of the build (e.g. 15W+clocks) when the key has several."
)
@api_options
def engines_approve(key: str, tuning: str | None, url: str, as_json: bool) -> None:
    """Let the twins of its class pull the device build of engine KEY (the full key or the start
    that `engines ls` shows). Approve only builds of devices you trust: twins load it as is."""

    def approve(client: Any) -> Any:
        full = resolve_key(key, [m["engine_key"] for m in client.engines()])
        return client.approve_engine(full, tuning)

    out = call_api(approve, url)
    if as_json:
        emit_json(out)
        return
    click.echo(
        f"approved engine {out['engine_key'][:12]} ({_tag(out['tuning'])}) built by "
        f"{builder(out)}: twins pull it now (by {out['approved_by']})"
    )


@engines.command("forget-failure")
@click.argument("key")
@api_options
def engines_forget_failure(key: str, url: str, as_json: bool) -> None:
    """Forget that TensorRT could not build engine KEY (the full 64-hex key a device's
    `fallback` event names): its twins try TensorRT again instead of falling back at once."""

    def forget(client: Any) -> Any:
        failure = client.build_failure(key)
        client.forget_build_failure(key)
        return failure

    out = call_api(forget, url)
    if as_json:
        emit_json(out)
        return
    click.echo(
        f"forgot the failed build of {key[:12]} (reported by {out['device_id']}): its twins "
        "try TensorRT again"
    )


@engines.command("trust")
@click.argument("hardware_class", metavar="[CLASS]", required=False)
@click.option(
    "--devices",
    "mode",
    flag_value="devices",
    help="Twins pull a device's build as soon as it is stored.",
)
@click.option(
    "--approval",
    "mode",
    flag_value="approval",
    help="Twins pull a device's build only once an operator approved it (built-in default).",
)
@api_options
def engines_trust(hardware_class: str | None, mode: str | None, url: str, as_json: bool) -> None:
    """Whether twins of hardware CLASS pull engines their fellow devices built.

    CLASS is a class as `devices ls` shows it (jetson-orin-nano-8gb/jp6.2), or `default` for
    every class without its own setting. Without arguments: list the settings. A device may
    upload engines only for its own hardware in either mode; operators' uploads are always
    shared.
    """
    if hardware_class is None and mode is None:
        out = call_api(lambda c: c.engine_trust(), url)
        if as_json:
            emit_json(out)
            return
        rows = [(t["hardware_class"], t["mode"], t["set_by"], t["set_at"]) for t in out]
        click.echo(table(["class", "device builds", "set by", "set at"], rows))
        return
    if hardware_class is None or mode is None:
        raise click.UsageError("give a CLASS (or default) and one of --devices or --approval")
    chosen = hardware_class
    entry = call_api(lambda c: c.set_engine_trust(chosen, mode), url)
    if as_json:
        emit_json(entry)
        return
    what = (
        "twins pull device builds as soon as they are stored"
        if entry["mode"] == "devices"
        else "twins pull device builds once an operator approves them (`engines approve`)"
    )
    click.echo(f"{entry['hardware_class']}: {what}")
