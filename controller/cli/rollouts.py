"""``jetfleet rollouts``: create, list, show and watch rollouts; pause, resume, abort,
rollback and retry them (HTTP API clients, like every operator command)."""

from __future__ import annotations

import time
from typing import Any

import click

from controller.cli.operator import api_options, call_api, split_ref
from controller.cli.render import ago, emit_json, table
from controller.cli.rollout_options import rollout_options, spec_body
from controller.client.http import ControllerClient


class RolloutsClient(ControllerClient):
    """The ``/api/v1/rollouts`` calls."""

    def create_rollout(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/rollouts", json=body)

    def rollouts(self) -> Any:
        return self._request("GET", "/api/v1/rollouts")

    def rollout(self, rollout_id: str) -> Any:
        return self._request("GET", f"/api/v1/rollouts/{rollout_id}")

    def rollout_audit(self, rollout_id: str) -> Any:
        return self._request("GET", f"/api/v1/rollouts/{rollout_id}/audit")

    def operate(self, rollout_id: str, op: str) -> Any:
        return self._request("POST", f"/api/v1/rollouts/{rollout_id}/{op}")


@click.group()
def rollouts() -> None:
    """Roll a model version (or an agent release: `jetfleet agent rollout start`) out in
    waves, gated on each device's health."""


@rollouts.command("create")
@click.option("--model", "model_ref", required=True, help="NAME:VERSION to roll out.")
@click.option("--config", default=None, help="Named delegate config, resolved per device.")
@rollout_options
@click.option("--no-rollback", is_flag=True, help="On abort, leave updated devices as they are.")
@click.option(
    "--strict", is_flag=True, help="Refuse when a target cannot build the model (no fallback)."
)
@api_options
def rollouts_create(
    model_ref: str,
    config: str | None,
    no_rollback: bool,
    strict: bool,
    url: str,
    as_json: bool,
    **options: Any,
) -> None:
    """Create a rollout and start it."""
    name, version = split_ref(model_ref)
    if version is None:
        raise click.BadParameter(f"{model_ref!r}: expected NAME:VERSION", param_hint="--model")
    body = {
        "model": name,
        "version": version,
        "config": config,
        **spec_body(options, rollback=not no_rollback),
        "strict": strict,
    }
    out = call_api(lambda c: c.create_rollout(body), url, RolloutsClient)
    if as_json:
        emit_json(out)
        return
    click.echo(
        f"created rollout {out['id']}: {out['model']}:{out['version']} to "
        f"{sum(w['devices'] for w in out['waves'])} device(s) in {len(out['waves'])} wave(s)"
    )
    for warning in out.get("warnings", []):
        click.echo(f"warning: {warning}", err=True)


@rollouts.command("ls")
@api_options
def rollouts_ls(url: str, as_json: bool) -> None:
    """List rollouts, newest first."""
    out = call_api(lambda c: c.rollouts(), url, RolloutsClient)
    if as_json:
        emit_json(out)
        return
    rows = [
        [
            r["id"],
            r.get("kind", "model"),
            _subject(r),
            r["state"],
            f"{r['current_wave']}/{len(r['waves'])}",
            _counts(r["counts"]),
            ago(r["created_at"]),
        ]
        for r in out
    ]
    click.echo(table(["id", "kind", "what", "state", "wave", "devices", "created"], rows))


def _subject(r: dict[str, Any]) -> str:
    """``model:version``, or ``jetfleet-agent X`` (with ``(downgrade allowed)``)."""
    if r.get("kind") == "agent":
        return f"{r['model']} {r['version']}" + (
            " (downgrade allowed)" if r.get("allow_downgrade") else ""
        )
    return f"{r['model']}:{r['version']}"


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "-"


def _render(r: dict[str, Any]) -> str:
    head = (
        f"rollout {r['id']}  {r.get('kind', 'model')} {_subject(r)}"
        + (f" config={r['config']}" if r["config"] else "")
        + f"\nstate: {r['state']}"
        + (f" (requested: {r['requested_op']})" if r["requested_op"] else "")
        + f"  wave {r['current_wave']}/{len(r['waves'])}"
        + (f"\nreason: {r['reason']}" if r["reason"] else "")
    )
    waves = table(
        ["wave", "devices", "progress"],
        [[w["wave"], w["devices"], _counts(w["counts"])] for w in r["waves"]],
    )
    devices = table(
        ["device", "wave", "status", "from", "gen", "reason"],
        [
            [
                t["device_id"],
                t["wave"],
                t["status"],
                t["previous_version"],
                t["generation"],
                t["reason"],
            ]
            for t in r.get("targets") or []
        ],
    )
    return f"{head}\n\n{waves}\n\n{devices}"


@rollouts.command("show")
@click.argument("rollout_id")
@click.option("--audit", is_flag=True, help="Also print the audit trail.")
@api_options
def rollouts_show(rollout_id: str, audit: bool, url: str, as_json: bool) -> None:
    """One rollout: waves and a table of its devices."""
    out = call_api(lambda c: c.rollout(rollout_id), url, RolloutsClient)
    trail = call_api(lambda c: c.rollout_audit(rollout_id), url, RolloutsClient) if audit else None
    if as_json:
        emit_json(out if trail is None else {**out, "audit": trail})
        return
    click.echo(_render(out))
    if trail is not None:
        rows = [
            [
                e["ts"],
                e["actor"],
                e["kind"],
                e["device_id"],
                f"{e['from_state'] or ''}→{e['to_state'] or ''}",
                e["reason"],
            ]
            for e in trail
        ]
        click.echo("\n" + table(["ts", "actor", "kind", "device", "change", "reason"], rows))


@rollouts.command("watch")
@click.argument("rollout_id")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds.")
@click.option("--once", is_flag=True, help="Print once and exit (for scripts and tests).")
@api_options
def rollouts_watch(rollout_id: str, interval: float, once: bool, url: str, as_json: bool) -> None:
    """Live progress per wave and per device until the rollout finishes (Ctrl-C stops)."""
    while True:
        out = call_api(lambda c: c.rollout(rollout_id), url, RolloutsClient)
        if as_json:
            emit_json(out)
        else:
            if not once:
                click.clear()
            click.echo(_render(out))
        if once or out["state"] not in ("pending", "running", "paused"):
            return
        time.sleep(interval)


def _operation(op: str, help_text: str) -> click.Command:
    @click.argument("rollout_id")
    @api_options
    def command(rollout_id: str, url: str, as_json: bool) -> None:
        out = call_api(lambda c: c.operate(rollout_id, op), url, RolloutsClient)
        if as_json:
            emit_json(out)
            return
        pending = " (requested; the rollout loop applies it)" if out["requested_op"] else ""
        click.echo(f"rollout {out['id']}: {op} → {out['state']}{pending}")

    command.__doc__ = help_text
    return rollouts.command(op)(command)


for _op, _help in (
    ("pause", "Start no more devices (those updating are still judged)."),
    ("resume", "Continue a paused rollout."),
    ("abort", "Stop: devices not started are skipped; updated ones stay."),
    ("rollback", "Give every updated device its previous version and config back."),
    ("retry", "Try the failed devices again."),
):
    _operation(_op, _help)
