"""``jetfleet devices enroll-token|revoke|identities|label``: device enrolment and labels from
the operator's side (labels are the operator's to set: devices cannot choose their own).

Added to the ``devices`` group by ``controller.cli.main``; they go through the API like the
other operator commands (with the token of ``jetfleet login``).
"""

from __future__ import annotations

from typing import Any

import click

from controller.auth.tokens import parse_duration
from controller.cli.operator import api_options, call_api
from controller.cli.render import emit_json, table
from controller.client.http import ControllerClient


class EnrolmentClient(ControllerClient):
    """The enrolment calls: tokens, revocation, identities."""

    def create_enrol_token(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/enrol-tokens", json=body)

    def revoke_device(self, device_id: str) -> Any:
        return self._request("POST", f"/api/v1/devices/{device_id}/revoke")

    def identities(self) -> Any:
        return self._request("GET", "/api/v1/identities")


def _labels(pairs: tuple[str, ...], hint: str = "--labels") -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint=hint)
        labels[key.strip()] = value.strip()
    return labels


@click.command("enroll-token")
@click.option(
    "--labels",
    "label_pairs",
    multiple=True,
    metavar="K=V",
    help="Label the enrolled device gets (repeat, or k=v,k2=v2); on re-enrolment they "
    "replace its labels [default: none, or the labels it has].",
)
@click.option(
    "--expires", default="24h", show_default=True, metavar="DURATION", help="e.g. 24h, 7d, 90m."
)
@click.option(
    "--device",
    "device_id",
    metavar="ID",
    help="Only this device id may enrol with it; needed to re-enrol a device whose identity is "
    "not revoked.",
)
@api_options
def enroll_token(
    label_pairs: tuple[str, ...], expires: str, device_id: str | None, url: str, as_json: bool
) -> None:
    """Create a one-time, expiring enrolment token; it is printed this once.

    The enrolled device gets the token's labels (the ones its agent asks for are ignored). A
    token without --device enrols only a new or revoked device id.
    """
    try:
        lifetime = parse_duration(expires)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--expires") from exc
    pairs = tuple(p for item in label_pairs for p in item.split(",") if p.strip())
    body = {
        "labels": _labels(pairs),
        "expires_in_s": lifetime.total_seconds(),
        "device_id": device_id,
    }
    out = call_api(lambda c: c.create_enrol_token(body), url, EnrolmentClient)
    if as_json:
        emit_json(out)
        return
    bound = f" for device {out['device_id']}" if out.get("device_id") else ""
    click.echo(f"enrolment token {out['id']}{bound}, expires {str(out['expires_at'])[:19]} UTC:")
    click.echo(out["token"])
    click.echo(
        f"On the gateway: jetfleet-agent enroll --controller {url} --token <token>"
        + ("" if out.get("device_id") else " --device-id <id>"),
        err=True,
    )
    click.echo("Keep it now: the token is not shown again and works once.", err=True)


@click.command("revoke")
@click.argument("device_id")
@api_options
def revoke_device(device_id: str, url: str, as_json: bool) -> None:
    """Cut DEVICE_ID off at once: broker credential deleted (connection closed), API token
    revoked. It can come back only by enrolling again with a new token."""
    out = call_api(lambda c: c.revoke_device(device_id), url, EnrolmentClient)
    if as_json:
        emit_json(out)
        return
    click.echo(
        f"revoked device {out['device_id']}: broker user {out['broker_username']} removed"
        + (f", API token {out['api_token_id']} revoked" if out.get("api_token_id") else "")
    )


@click.command("identities")
@api_options
def identities(url: str, as_json: bool) -> None:
    """List enrolled device identities (never their secrets)."""
    out = call_api(lambda c: c.identities(), url, EnrolmentClient)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            i["device_id"],
            i["broker_username"],
            i["api_token_id"],
            str(i["enrolled_at"])[:19],
            "revoked " + str(i["revoked_at"])[:19] if i.get("revoked_at") else "active",
        )
        for i in out
    ]
    click.echo(table(["device", "broker user", "api token", "enrolled", "state"], rows))


@click.command("label")
@click.argument("device_id")
@click.argument("pairs", nargs=-1, metavar="KEY=VALUE...")
@click.option("--clear", is_flag=True, help="Remove every label of the device.")
@api_options
def label_device(
    device_id: str, pairs: tuple[str, ...], clear: bool, url: str, as_json: bool
) -> None:
    """Set DEVICE_ID's labels to exactly KEY=VALUE... (its whole set; labels not given are
    removed). Selectors match devices by these; what a device reports about itself is ignored."""
    if clear == bool(pairs):
        raise click.UsageError("give the device's labels as KEY=VALUE..., or --clear")
    labels = _labels(pairs, hint="KEY=VALUE")
    out = call_api(lambda c: c.set_labels(device_id, labels), url)
    if as_json:
        emit_json(out)
        return
    shown = ",".join(f"{k}={v}" for k, v in sorted(out["labels"].items())) or "(none)"
    click.echo(f"{out['id']}: labels {shown}")
