"""Operator commands: models, devices, deploy, undeploy, telemetry (HTTP API clients)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from controller.cli import user_config
from controller.cli.client import DEFAULT_URL, ApiError, ControllerClient
from controller.cli.render import ago, emit_json, ms, table

F = TypeVar("F", bound=Callable[..., Any])


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


def _client(url: str) -> ControllerClient:
    return ControllerClient(url)


def call_api(action: Callable[[ControllerClient], Any], url: str) -> Any:
    """Run ``action`` with a client of ``url``; an API error becomes a one-line CLI error."""
    try:
        with _client(url) as client:
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


# --- models ----------------------------------------------------------------------------------


@click.group()
def models() -> None:
    """Model versions stored by the controller."""


@models.command("push")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Model name (lower-case, e.g. detector).")
@click.option("--version", "version", required=True, help="Version label (e.g. 1.2.0).")
@click.option(
    "--reference",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Reference outputs (NPZ: input:<name>, output:<name>, first axis = case) to validate "
    "engines against, instead of the ones computed with ONNX Runtime FP32.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Return once the model is stored, without waiting for its static analysis (it goes on "
    "in the controller: see `jetfleet models show NAME:VERSION`).",
)
@api_options
def models_push(
    path: Path,
    name: str,
    version: str,
    reference: Path | None,
    no_wait: bool,
    url: str,
    as_json: bool,
) -> None:
    """Upload an ONNX model file as NAME:VERSION, then wait for its static analysis."""
    out = call_api(lambda c: c.push_model(path, name, version), url)
    if reference is not None:
        try:
            call_api(lambda c: c.push_reference(reference, name, version), url)
        except click.ClickException as exc:
            raise click.ClickException(
                f"{name}:{version} is stored, but its reference outputs were refused: {exc.message}"
            ) from exc
    if not as_json:
        click.echo(
            f"pushed {out['name']}:{out['version']} sha256={out['sha256']} size={out['size']}"
        )
    if not no_wait and out.get("analysis_state") == "pending":
        out = call_api(_analysed(name, version, progress=not as_json), url)
    if as_json:
        emit_json(out)
        return
    for line in analysis_lines(out):
        click.echo(line)


ANALYSIS_WAIT_S = 600.0
"""How long ``models push`` waits for the analysis (the controller bounds each run, 120 s by
default, but versions pushed just before wait their turn)."""


def _analysed(name: str, version: str, progress: bool) -> Callable[[ControllerClient], Any]:
    """Poll ``name:version`` until its analysis is no longer pending (or ANALYSIS_WAIT_S)."""

    def wait(client: ControllerClient) -> Any:
        if progress:
            click.echo(
                f"analysing {name}:{version} on the controller (--no-wait does not wait)...",
                err=True,
            )
        deadline = time.monotonic() + ANALYSIS_WAIT_S
        while True:
            out = client.model_version(name, version)
            if out.get("analysis_state") != "pending" or time.monotonic() > deadline:
                return out
            time.sleep(0.5)

    return wait


def analysis_lines(version: dict[str, Any]) -> list[str]:
    """Where the version's analysis stands, or its verdict per TensorRT version."""
    state = version.get("analysis_state", "done")
    if state == "pending":
        return ["  analysis pending (the controller runs it after the push)"]
    if state == "failed":
        return [f"  analysis failed: {version.get('analysis_error')}"]
    return [f"  trt {trt:<5}{s['line']}" for trt, s in version.get("delegation", {}).items()]


@models.command("ls")
@api_options
def models_ls(url: str, as_json: bool) -> None:
    """List models and their versions."""
    out = call_api(lambda c: c.models(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (v["name"], v["version"], v["sha256"][:12], v["size"], v["created_at"][:19])
        for m in out
        for v in m["versions"]
    ]
    click.echo(table(["model", "version", "sha256", "bytes", "created"], rows))


@models.command("show")
@click.argument("ref")
@api_options
def models_show(ref: str, url: str, as_json: bool) -> None:
    """Show NAME:VERSION (or every version of NAME)."""
    name, version = split_ref(ref)
    if version is None:
        versions = call_api(lambda c: c.model(name), url)["versions"]
    else:
        versions = [call_api(lambda c: c.model_version(name, version), url)]
    if as_json:
        emit_json(versions if version is None else versions[0])
        return
    for v in versions:
        click.echo(f"{v['name']}:{v['version']}")
        click.echo(f"  sha256   {v['sha256']}")
        click.echo(f"  size     {v['size']} bytes")
        click.echo(f"  created  {v['created_at']}")
        click.echo(f"  download {v['download_url']}")
        for kind in ("inputs", "outputs"):
            for t in v[kind]:
                click.echo(f"  {kind[:-1]:<8} {t['name']} {t['datatype']} {t['shape']}")
        for line in analysis_lines(v):
            click.echo(line)
        for found in call_api(_profiles_of(v["name"], v["version"]), url):
            p = found["profile"]
            top = ", ".join(f"{o['op_type']} {o['share']:.0%} {o['device']}" for o in p["ops"][:5])
            click.echo(f"  profile {found['device_id']}: {p['per_run_ms']:.3f} ms/run; {top}")


def _profiles_of(name: str, version: str) -> Callable[[ControllerClient], Any]:
    return lambda c: c.version_profiles(name, version)


# --- artifacts -------------------------------------------------------------------------------


@click.group()
def artifacts() -> None:
    """Content-addressed blobs a config can name (INT8 calibration caches)."""


@artifacts.command("push")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@api_options
def artifacts_push(path: Path, url: str, as_json: bool) -> None:
    """Upload a file; prints the sha256 to use, e.g. --set calibration_cache_sha256=<sha256>."""
    out = call_api(lambda c: c.push_artifact(path), url)
    if as_json:
        emit_json(out)
        return
    click.echo(f"sha256={out['sha256']} size={out['size']}")


# --- devices ---------------------------------------------------------------------------------


def _slot_summary(device: dict[str, Any]) -> str:
    parts = []
    for s in device["reported"]:
        version = s.get("active_version") or s.get("desired_version") or "?"
        parts.append(f"{s['name']}:{version}({s['phase']})")
    return " ".join(parts) or "-"


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
            _profile(d),
            ",".join(f"{k}={v}" for k, v in sorted(d["labels"].items())) or None,
            f"{d['observed_generation']}/{d['desired_generation']}",
            _slot_summary(d),
            ago(d["last_seen"]),
        )
        for d in out
    ]
    headers = ["device", "status", "profile", "labels", "gen", "slots", "seen"]
    click.echo(table(headers, rows))


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
    click.echo(f"  generation observed {d['observed_generation']} of {d['desired_generation']}")
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
                r.get("runtime"),
                key[:12] if isinstance(key, str) else None,
                _tuning(r),
                _SOURCES.get(r.get("engine_source") or ""),
                r.get("last_error"),
            )
        )
    return rows


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
