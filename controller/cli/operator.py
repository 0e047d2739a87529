"""What every operator command shares (``--url``/``--token``/``--ca-file``/``--json``, one
API call with its errors as CLI errors, NAME:VERSION), and ``deploy`` / ``undeploy``.

The commands are HTTP API clients (:class:`controller.client.http.ControllerClient`): models and
artifacts in :mod:`controller.cli.models`, devices and telemetry in
:mod:`controller.cli.devices`, the rest beside them; ``controller.cli.main`` gathers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

import click

from controller.cli.render import emit_json
from controller.client import user_config
from controller.client.http import DEFAULT_URL, ApiError, ControllerClient

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=ControllerClient)


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """An option callback that keeps the value for the API client (see ``user_config``)."""

    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[key] = str(value)

    return store


def api_options(func: F) -> F:
    """``--url``, ``--token``, ``--ca-file`` and ``--json`` on every command that talks to the
    API (the token and CA file reach the client through ``user_config.ambient``)."""
    func = click.option(
        "--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."
    )(func)
    func = click.option(
        "--ca-file",
        type=click.Path(exists=True, dir_okay=False),
        expose_value=False,
        callback=_remember(user_config.META_CA),
        help="CA bundle of an HTTPS controller with a private CA (env JETFLEET_CA_FILE).",
    )(func)
    func = click.option(
        "--token",
        expose_value=False,
        callback=_remember(user_config.META_TOKEN),
        help="API token (env JETFLEET_TOKEN; default: the one `jetfleet login` saved).",
    )(func)
    return click.option(
        "--url",
        envvar=user_config.URL_ENV,
        default=user_config.saved_url,
        show_default=f"the URL `jetfleet login` saved, else {DEFAULT_URL}",
        help="Controller URL (env JETFLEET_URL).",
    )(func)


@overload
def call_api(action: Callable[[ControllerClient], Any], url: str) -> Any: ...


@overload
def call_api(action: Callable[[C], Any], url: str, kind: type[C]) -> Any: ...


def call_api(
    action: Callable[[Any], Any], url: str, kind: type[ControllerClient] = ControllerClient
) -> Any:
    """Run ``action`` with a client of ``url`` (a ``kind``: a subclass adds a command group's
    calls), closed afterwards; an API error becomes a one-line CLI error."""
    try:
        with kind(url) as client:
            return action(client)
    except ApiError as exc:
        raise click.ClickException(str(exc)) from exc


def split_ref(ref: str) -> tuple[str, str | None]:
    """``name:version`` → (name, version); ``name`` → (name, None)."""
    name, sep, version = ref.partition(":")
    if not name or (sep and not version):
        raise click.BadParameter(f"{ref!r}: expected NAME:VERSION")
    return name, (version or None)


def _target(device: str | None, selector: str | None) -> dict[str, str | None]:
    if (device is None) == (selector is None):
        raise click.UsageError("give exactly one of --device ID or --selector k=v")
    return {"device": device, "selector": selector}


# --- deploy / undeploy -----------------------------------------------------------------------


def print_changes(out: dict[str, Any], verb: str) -> None:
    """One line per device a deploy/undeploy/config change touched."""
    for change in out["devices"]:
        state = verb if change["changed"] else "unchanged"
        click.echo(f"{change['device_id']}: {state} (generation {change['generation']})")


@click.command()
@click.argument("ref")
@click.option("--device", help="Target one device by id.")
@click.option("--selector", help="Target every device whose labels match k=v[,k2=v2].")
@click.option("--config", "config", help="Named delegate config, resolved per device.")
@api_options
def deploy(
    ref: str,
    device: str | None,
    selector: str | None,
    config: str | None,
    url: str,
    as_json: bool,
) -> None:
    """Deploy model NAME:VERSION to a device or to every device matching a selector."""
    name, version = split_ref(ref)
    if version is None:
        raise click.BadParameter(f"{ref!r}: expected NAME:VERSION", param_hint="REF")
    body = {"model": name, "version": version, "config": config, **_target(device, selector)}
    out = call_api(lambda c: c.deploy(body), url)
    if as_json:
        emit_json(out)
        return
    print_changes(out, "deployed")


@click.command()
@click.argument("name")
@click.option("--device", help="Target one device by id.")
@click.option("--selector", help="Target every device whose labels match k=v[,k2=v2].")
@api_options
def undeploy(name: str, device: str | None, selector: str | None, url: str, as_json: bool) -> None:
    """Remove model NAME's slot from a device or from every device matching a selector."""
    body = {"model": name, **_target(device, selector)}
    out = call_api(lambda c: c.undeploy(body), url)
    if as_json:
        emit_json(out)
        return
    print_changes(out, "removed")
