"""``jetfleet tune`` and ``jetfleet jobs``: tune a model's delegate config on a device; list jobs.

``tune`` asks one device to build, benchmark and validate each candidate (one at a time, beside
what it serves), prints each candidate's row as it arrives, then the table with latency,
throughput, memory and the accuracy deltas against the reference outputs, and the recommendation:
the fastest candidate within its precision's tolerance. ``--apply CLASS`` stores that candidate
as the hardware class's layer of a named config (the device slot's config, else the model name).
"""

from __future__ import annotations

from typing import Any

import click

from controller.cli.operator import api_options, call_api, split_ref
from controller.cli.profile import JobsClient, finish, print_profile, wait_for_job
from controller.cli.render import ago, emit_json, table

MIB = 1024 * 1024


def _num(value: float | None, fmt: str) -> str | None:
    return None if value is None else format(value, fmt)


def _row(c: dict[str, Any], recommended: str | None) -> tuple[object, ...]:
    acc = c.get("accuracy") or {}
    within = acc.get("within_tolerance")
    tolerance = None if within is None else ("yes" if within else "NO")
    label = c["name"] if c.get("power_mode") is None else f"{c['name']}@{c['power_mode']}"
    memory = c.get("memory_bytes")
    return (
        f"{label} *" if label == recommended else label,
        c["status"],
        _num(c.get("latency_p50_ms"), ".3f"),
        _num(c.get("latency_p99_ms"), ".3f"),
        _num(c.get("throughput_ips"), ".1f"),
        None if memory is None else f"{memory / MIB:.1f}",
        _num(c.get("build_s"), ".1f"),
        _num(acc.get("max_abs_diff"), ".2e"),
        _num(acc.get("min_cosine"), ".5f"),
        _num(acc.get("min_top1"), ".0%"),
        tolerance,
    )


HEADERS = [
    "candidate",
    "status",
    "p50 ms",
    "p99 ms",
    "inf/s",
    "mem MiB",
    "build s",
    "max |diff|",
    "cosine",
    "top-1",
    "in tol",
]


def print_tune(job: dict[str, Any]) -> None:
    """The tuning table, why rows did not run, the recommendation and what was applied."""
    tune = job["tune"]
    advice = job.get("recommendation") or {}
    recommended = advice.get("candidate")
    click.echo(
        f"{job['device_id']} {tune['model']}:{tune['version']} on {tune['runtime']}, "
        f"{tune['runs']} timed runs per candidate"
    )
    click.echo(table(HEADERS, [_row(c, recommended) for c in tune["candidates"]]))
    for c in tune["candidates"]:
        if c.get("reason"):
            click.echo(f"  {c['name']}: {c['reason']}")
        for problem in (c.get("accuracy") or {}).get("problems") or []:
            click.echo(f"  {c['name']}: {problem}")
    click.echo(f"recommended: {recommended or 'none'} ({advice.get('reason', '-')})")
    applied = job.get("applied")
    if applied is None:
        return
    if applied.get("stored"):
        click.echo(
            f"applied: {applied['candidate']} stored as {applied['scope']} of config "
            f"'{applied['config']}' {applied['values']}; "
            f"{len(applied.get('devices') or [])} device(s) re-resolved"
        )
        for note in applied.get("notes") or []:
            click.echo(f"  note: {note}")
    else:
        click.echo(f"not applied: {applied.get('error')}")


def _show_tune(job: dict[str, Any]) -> None:
    print_tune(job)
    applied = job.get("applied")
    if applied is not None and not applied.get("stored"):
        raise click.ClickException(f"--apply stored nothing: {applied.get('error')}")


def _csv(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


@click.command()
@click.argument("ref")
@click.option("--device", required=True, help="The device that builds and benchmarks.")
@click.option(
    "--candidates",
    required=True,
    help="Comma-separated, e.g. fp32,fp16,int8,fp16+dla0 (TensorRT) or "
    "ort-basic,ort-all,ort-all+threads=2 (ONNX Runtime).",
)
@click.option("--power-modes", default=None, help="nvpmodel modes, comma-separated.")
@click.option("--apply", "apply_class", default=None, help="Store the winner for this class.")
@click.option(
    "--config",
    default=None,
    help="Config --apply writes (default: the slot's config, else the model name).",
)
@click.option("--runs", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--warmups", default=5, show_default=True, type=click.IntRange(0, 10_000))
@click.option("--timeout", "timeout_s", default=1800.0, show_default=True, type=click.FloatRange(1))
@click.option("--no-wait", is_flag=True, help="Create the job and return (print its id).")
@api_options
def tune(
    ref: str,
    device: str,
    candidates: str,
    power_modes: str | None,
    apply_class: str | None,
    config: str | None,
    runs: int,
    warmups: int,
    timeout_s: float,
    no_wait: bool,
    url: str,
    as_json: bool,
) -> None:
    """Benchmark candidate delegate configs of NAME:VERSION on a device; recommend one."""
    name, version = split_ref(ref)
    if version is None:
        raise click.BadParameter(f"{ref!r}: expected NAME:VERSION", param_hint="REF")
    body = {
        "model": name,
        "version": version,
        "device": device,
        "candidates": _csv(candidates),
        "power_modes": _csv(power_modes),
        "runs": runs,
        "warmups": warmups,
        "apply_class": apply_class,
        "config": config,
    }
    job = call_api(lambda c: c.tune(body), url, JobsClient)
    if no_wait:
        emit_json(job) if as_json else click.echo(job["id"])
        return
    job = wait_for_job(job, url, timeout_s, as_json)
    finish(job, as_json, _show_tune)
    if as_json and (job.get("applied") or {}).get("stored") is False:
        raise click.ClickException(f"--apply stored nothing: {job['applied'].get('error')}")


# --- jetfleet jobs ---------------------------------------------------------------------------
@click.group()
def jobs() -> None:
    """Profiling and tuning jobs sent to devices."""


@jobs.command("ls")
@click.option("--device", default=None, help="Only this device's jobs.")
@click.option("--model", default=None, help="Only jobs of this model.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@api_options
def jobs_ls(device: str | None, model: str | None, limit: int, url: str, as_json: bool) -> None:
    """List the newest jobs."""
    params = {k: v for k, v in {"device": device, "model": model, "limit": limit}.items() if v}
    out = call_api(lambda c: c.jobs(params), url, JobsClient)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            j["id"],
            j["kind"],
            j["device_id"],
            f"{j['model']}:{j.get('version') or '-'}",
            j["status"],
            ago(j["created_at"]),
            (j.get("recommendation") or {}).get("candidate"),
        )
        for j in out
    ]
    click.echo(table(["job", "kind", "device", "model", "status", "created", "recommended"], rows))


@jobs.command("show")
@click.argument("job_id")
@api_options
def jobs_show(job_id: str, url: str, as_json: bool) -> None:
    """Show one job: its progress and, once finished, its result."""
    job = call_api(lambda c: c.job(job_id), url, JobsClient)
    if as_json:
        emit_json(job)
        return
    click.echo(f"{job['id']} {job['kind']} on {job['device_id']}: {job['status']}")
    for step in job.get("progress") or []:
        click.echo(f"  [{step['step']}/{step['steps']}] {step['detail']}")
    if job["status"] == "succeeded" and job.get("profile"):
        print_profile(job)
    elif job["status"] == "succeeded" and job.get("tune"):
        print_tune(job)
    elif job.get("error"):
        click.echo(f"  error: {job['error']}")


@jobs.command("cancel")
@click.argument("job_id")
@api_options
def jobs_cancel(job_id: str, url: str, as_json: bool) -> None:
    """Stop sending a pending job to its device."""
    job = call_api(lambda c: c.cancel(job_id), url, JobsClient)
    if as_json:
        emit_json(job)
        return
    click.echo(f"{job['id']}: {job['status']}")
