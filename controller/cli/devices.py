"""``jetfleet devices ls|show`` and ``jetfleet telemetry``: what the fleet reports (HTTP API
clients; the enrolment commands of the ``devices`` group are in
:mod:`controller.cli.devices_security`)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from controller.cli.operator import api_options, call_api
from controller.cli.render import ago, emit_json, ms, table

# --- devices ---------------------------------------------------------------------------------


def _slot_summary(device: dict[str, Any]) -> str:
    parts = []
    for s in device["reported"]:
        version = s.get("active_version") or s.get("desired_version") or "?"
        fell_back = ", onnxruntime fallback" if s.get("fallback_reason") else ""
        parts.append(f"{s['name']}:{version}({s['phase']}{fell_back})")
    return " ".join(parts) or "-"


def _runtime(reported: dict[str, Any]) -> str | None:
    """``tensorrt``, ``onnxruntime``, or ``onnxruntime (fallback: <TensorRT's words>)``."""
    runtime, reason = reported.get("runtime"), reported.get("fallback_reason")
    if not reason:
        return runtime if isinstance(runtime, str) else None
    return f"{runtime} (fallback: {str(reason)[:80]})"


def _profile(device: dict[str, Any]) -> str | None:
    facts = device.get("facts") or {}
    if facts.get("simulated"):
        return f"{facts.get('profile')} (simulated)"
    jetson = facts.get("jetson") or {}
    gpu = facts.get("gpu") or {}
    return jetson.get("module") or gpu.get("name") or facts.get("arch")


@click.group()
def devices() -> None:
    """Gateways known to the controller."""


@devices.command("ls")
@api_options
def devices_ls(url: str, as_json: bool) -> None:
    """List devices with presence, generations and slots."""
    out = call_api(lambda c: c.devices(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (
            d["id"],
            "online" if d["online"] else "offline",
            _profile(d) if not d.get("class_changed") else f"{_profile(d)} (CLASS CHANGED)",
            ",".join(f"{k}={v}" for k, v in sorted(d["labels"].items())) or None,
            f"{d['observed_generation']}/{d['desired_generation']}",
            d.get("agent_version"),
            agent_phase(d),
            _slot_summary(d),
            ago(d["last_seen"]),
        )
        for d in out
    ]
    headers = ["device", "status", "profile", "labels", "gen", "agent", "update", "slots", "seen"]
    click.echo(table(headers, rows))
    changed = [d["id"] for d in out if d.get("class_changed")]
    if changed:
        click.echo(
            f"{len(changed)} device(s) report another hardware class than they were first seen "
            "with; their engine uploads are refused until you accept it: "
            f"jetfleet devices accept-class {' '.join(changed[:5])}",
            err=True,
        )


def agent_phase(d: dict[str, Any]) -> str | None:
    """``confirmed 0.3.0``: the phase of the device's latest agent update and its release."""
    update = d.get("agent_update")
    return f"{update['phase']} {update['version']}" if update else None


@devices.command("accept-class")
@click.argument("device_ids", nargs=-1, required=True)
@api_options
def devices_accept_class(device_ids: tuple[str, ...], url: str, as_json: bool) -> None:
    """Pin devices to the hardware class they report now (after a JetPack upgrade or a module
    swap): they may upload engines for it, and for no other."""

    def accept(device_id: str) -> Any:
        return call_api(lambda c: c.accept_class(device_id), url)

    out = [accept(d) for d in device_ids]
    if as_json:
        emit_json(out)
        return
    for d in out:
        click.echo(f"{d['id']}: pinned to class {d['pinned_class']}")


@devices.command("show")
@click.argument("device_id")
@api_options
def devices_show(device_id: str, url: str, as_json: bool) -> None:
    """Show one device: facts, desired and reported slots."""
    d = call_api(lambda c: c.device(device_id), url)
    if as_json:
        emit_json(d)
        return
    facts = d.get("facts") or {}
    click.echo(f"{d['id']}  {'online' if d['online'] else 'offline'}  seen {ago(d['last_seen'])}")
    click.echo(f"  profile   {_profile(d)}")
    click.echo(f"  labels    {d['labels']}")
    click.echo(f"  os/arch   {facts.get('os')} {facts.get('arch')}")
    click.echo(f"  serve     {d.get('serve_url')}")
    click.echo(f"  class     {d.get('hardware_class') or '-'}")
    if d.get("class_changed"):
        click.echo(
            f"  CLASS CHANGED: first seen as {d.get('pinned_class')}; engine uploads refused "
            f"until `jetfleet devices accept-class {d['id']}`"
        )
    click.echo(f"  generation observed {d['observed_generation']} of {d['desired_generation']}")
    click.echo(f"  agent     {d.get('agent_version') or '-'}  update {agent_phase(d) or '-'}")
    update = d.get("agent_update") or {}
    if update.get("error"):
        click.echo(f"  update error: {update['error']}")
    click.echo(table(SLOT_HEADERS, slot_rows(d)))
    absent = {k: v for k, v in (facts.get("sources") or {}).items() if not v.get("available")}
    for source, v in sorted(absent.items()):
        click.echo(f"  {source}: absent ({v.get('reason')})")


SLOT_HEADERS = [
    "model",
    "desired",
    "active",
    "phase",
    "config",
    "runtime",
    "engine",
    "tuning",
    "source",
    "error",
]
_SOURCES = {"built": "built here", "pulled": "pulled", "cached": "cached"}


def _tuning(reported: dict[str, Any]) -> str | None:
    tag = reported.get("tuning_tag")
    if reported.get("tuning_matches") is False:
        return f"{tag or '?'} (mismatch)"
    return tag if isinstance(tag, str) else None


def slot_rows(device: dict[str, Any]) -> list[tuple[object, ...]]:
    """One row per desired slot (then per reported-only slot) of ``devices show``."""
    reported = {s["name"]: s for s in device["reported"]}
    desired = {s["name"]: s for s in device["desired"]}
    rows: list[tuple[object, ...]] = []
    for name in [*desired, *(n for n in reported if n not in desired)]:
        want = desired.get(name, {})
        r = reported.get(name, {})
        key = r.get("engine_key")
        rows.append(
            (
                name,
                want.get("version"),
                r.get("active_version"),
                r.get("phase"),
                want.get("config") or ("(default)" if want else None),
                _runtime(r),
                key[:12] if isinstance(key, str) else None,
                _tuning(r),
                _SOURCES.get(r.get("engine_source") or ""),
                r.get("last_error"),
            )
        )
    return rows


# --- telemetry -------------------------------------------------------------------------------


_TELEMETRY_HEADERS = ["time", "cpu", "mem", "model", "requests", "errors", "p50 ms", "p99 ms"]


@click.command()
@click.argument("device_id")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--follow", "-f", is_flag=True, help="Keep printing new samples until Ctrl-C.")
@click.option(
    "--interval", default=2.0, show_default=True, type=click.FloatRange(0.1), help="Poll seconds."
)
@api_options
def telemetry(
    device_id: str, limit: int, follow: bool, interval: float, url: str, as_json: bool
) -> None:
    """Show a device's latest telemetry samples (newest first; --follow: oldest first, live)."""
    if follow:
        _follow(device_id, limit, interval, url, as_json)
        return
    out = call_api(lambda c: c.telemetry(device_id, limit), url)
    if as_json:
        emit_json(out)
        return
    rows = [row for sample in out for row in _telemetry_rows(sample)]
    click.echo(table(_TELEMETRY_HEADERS, rows))


def _telemetry_rows(sample: dict[str, Any]) -> list[tuple[object, ...]]:
    mem = sample["memory_used_bytes"] / max(sample["memory_total_bytes"], 1) * 100
    base = (sample["ts"][:19], f"{sample['cpu_percent']:.0f}%", f"{mem:.0f}%")
    if not sample["models"]:
        return [(*base, None, None, None, None, None)]
    return [
        (
            *base,
            m["name"],
            m["requests"],
            m["errors"],
            ms(m["latency_p50_ms"]),
            ms(m["latency_p99_ms"]),
        )
        for m in sample["models"]
    ]


def _follow(device_id: str, limit: int, interval: float, url: str, as_json: bool) -> None:
    """Poll the newest samples and print those not printed yet, until Ctrl-C."""
    seen: set[str] = set()
    header = True
    try:
        while True:
            out = call_api(lambda c: c.telemetry(device_id, limit), url)
            fresh = [s for s in reversed(out) if s["sample_id"] not in seen]
            seen.update(s["sample_id"] for s in fresh)
            for sample in fresh:
                if as_json:
                    click.echo(json.dumps(sample, sort_keys=True, default=str))
                    continue
                lines = table(_TELEMETRY_HEADERS, _telemetry_rows(sample)).splitlines()
                click.echo("\n".join(lines if header else lines[1:]))
                header = False
            time.sleep(interval)
    except KeyboardInterrupt:
        return
