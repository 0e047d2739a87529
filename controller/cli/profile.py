"""``jetfleet devices profile``: on-device jobs, and how the CLI follows them.

A job runs on the device; the CLI creates it, then polls ``GET /api/v1/jobs/{id}`` and prints each
progress step as it arrives (on stderr with ``--json``, so stdout stays one JSON document) until
the job ends or ``--timeout`` passes. ``--no-wait`` prints the job and returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from controller.cli.operator import api_options, call_api
from controller.cli.render import emit_json, table
from controller.client.http import ControllerClient

POLL_S = 0.5
FINISHED = ("succeeded", "failed", "cancelled")


class JobsClient(ControllerClient):
    """The ``/api/v1`` job calls."""

    def profile(self, device_id: str, body: dict[str, Any]) -> Any:
        return self._request("POST", f"/api/v1/devices/{device_id}/profile", json=body)

    def tune(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/api/v1/tune", json=body)

    def job(self, job_id: str) -> Any:
        return self._request("GET", f"/api/v1/jobs/{job_id}")

    def jobs(self, params: dict[str, Any]) -> Any:
        return self._request("GET", "/api/v1/jobs", params=params)

    def cancel(self, job_id: str) -> Any:
        return self._request("POST", f"/api/v1/jobs/{job_id}/cancel")


def settled(job: dict[str, Any]) -> bool:
    """Finished, and (when it was asked to apply) its recommendation applied or refused."""
    if job["status"] not in FINISHED:
        return False
    return (
        job.get("apply") is None or job["status"] != "succeeded" or job.get("applied") is not None
    )


def wait_for_job(job: dict[str, Any], url: str, timeout_s: float, as_json: bool) -> dict[str, Any]:
    """Poll the job until it settles, printing each new progress step; the final job."""
    printed = 0
    job_id = job["id"]
    deadline = time.monotonic() + timeout_s
    click.echo(f"job {job['id']} sent to {job['device_id']}", err=as_json)
    while True:
        steps = job.get("progress") or []
        for step in steps[printed:]:
            click.echo(f"  [{step['step']}/{step['steps']}] {step['detail']}", err=as_json)
        printed = len(steps)
        if settled(job):
            return job
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"job {job['id']} still {job['status']} after {timeout_s:g} s (the device may be "
                f"offline); follow it with `jetfleet jobs show {job['id']}`"
            )
        time.sleep(POLL_S)
        job = call_api(lambda c: c.job(job_id), url, JobsClient)


def _pct(share: float | None) -> str | None:
    return None if share is None else f"{share * 100:.1f}%"


def print_profile(job: dict[str, Any]) -> None:
    """The top operators and layers of a finished profile job, as tables."""
    p = job["profile"]
    units = ", ".join(f"{u} {_pct(s)}" for u, s in sorted(p["device_shares"].items()))
    key = (p.get("engine_key") or "")[:12] or "-"
    click.echo(
        f"{job['device_id']} {p['model']}:{p.get('version') or '?'} on {p['runtime']} "
        f"(engine {key}, {p['source']}): {p['per_run_ms']:.3f} ms per run over {p['runs']} runs"
        f"; {units or 'no nodes timed'}"
    )
    rows = [
        (
            o["op_type"],
            o["device"],
            o["provider"],
            o["calls"],
            f"{o['total_ms']:.3f}",
            _pct(o["share"]),
        )
        for o in p["ops"]
    ]
    click.echo(table(["operator", "unit", "provider", "calls", "total ms", "share"], rows))
    layers = [
        (lay["name"], lay["op_type"], lay["device"], f"{lay['total_ms']:.3f}", _pct(lay["share"]))
        for lay in p["layers"]
    ]
    click.echo(table(["layer", "operator", "unit", "total ms", "share"], layers))


def finish(job: dict[str, Any], as_json: bool, show: Callable[[dict[str, Any]], None]) -> None:
    """Print the settled job; a failed or cancelled one is a one-line error (exit 1)."""
    if as_json:
        emit_json(job)
    elif job["status"] == "succeeded":
        show(job)
    if job["status"] != "succeeded":
        raise click.ClickException(f"job {job['id']} {job['status']}: {job.get('error') or '-'}")


@click.command("profile")
@click.argument("device_id")
@click.option("--model", required=True, help="A model the device serves.")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--timeout", "timeout_s", default=300.0, show_default=True, type=click.FloatRange(1))
@click.option("--no-wait", is_flag=True, help="Create the job and return (print its id).")
@api_options
def profile(
    device_id: str, model: str, runs: int, timeout_s: float, no_wait: bool, url: str, as_json: bool
) -> None:
    """Profile the active engine of MODEL on DEVICE_ID: top operators, where each ran, share."""
    job = call_api(lambda c: c.profile(device_id, {"model": model, "runs": runs}), url, JobsClient)
    if no_wait:
        emit_json(job) if as_json else click.echo(job["id"])
        return
    finish(wait_for_job(job, url, timeout_s, as_json), as_json, print_profile)
