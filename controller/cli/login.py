"""``jetfleet login``: check a token against the controller, then save URL and token for later."""

from __future__ import annotations

from pathlib import Path

import click

from controller.cli.render import emit_json
from controller.client import user_config
from controller.client.http import ApiError, ControllerClient


@click.command()
@click.option(
    "--url",
    envvar=user_config.URL_ENV,
    default=user_config.saved_url,
    show_default=f"the saved URL, else {user_config.DEFAULT_URL}",
    help="Controller URL (env JETFLEET_URL).",
)
@click.option(
    "--token",
    envvar=user_config.TOKEN_ENV,
    prompt="API token",
    hide_input=True,
    help="API token jf_<id>.<secret> (env JETFLEET_TOKEN; asked for when absent).",
)
@click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar=user_config.CA_ENV,
    help="CA bundle of an HTTPS controller with a private CA (env JETFLEET_CA_FILE).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def login(url: str, token: str, ca_file: Path | None, as_json: bool) -> None:
    """Verify TOKEN against the controller at URL and save both for later commands.

    The file is $XDG_CONFIG_HOME/jetfleet/config.toml (default ~/.config), mode 0600.
    """
    token = token.strip()
    ca = str(ca_file.resolve()) if ca_file else None
    try:
        with ControllerClient(url, token=token, ca_file=ca, ambient_credentials=False) as client:
            me = client.whoami()
    except ApiError as exc:
        raise click.ClickException(f"not logged in: {exc}") from exc
    path = user_config.save(user_config.UserConfig(url=url.rstrip("/"), token=token, ca_file=ca))
    if as_json:
        emit_json({**me, "url": url.rstrip("/"), "config": str(path)})
        return
    click.echo(f"logged in to {url.rstrip('/')} as {me['name']} (role {me['role']})")
    if not me.get("auth_required", True):
        click.echo("note: this controller does not check tokens (--insecure-no-auth)")
    click.echo(f"saved to {path}")
