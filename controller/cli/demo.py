"""``jetfleet demo``: the whole loop on one machine, with simulated gateways that say so."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click
import httpx
import numpy as np

from controller.cli.render import emit_json, ms, table
from controller.client.http import ApiError
from controller.demo import sample_models
from controller.demo.fleet import (
    DEMO_GATEWAYS,
    DemoError,
    DemoFleet,
    all_desired_serving,
    infer,
    random_inputs,
    telemetry_totals,
    wait_for,
)

CLASSIFIER = ("classifier", "1.0.0")
ANOMALY = ("anomaly", "1.0.0")
SECOND_MODEL_ON = "gw-orin-nx-01"


def _step(message: str) -> None:
    click.echo(click.style("==> ", fg="cyan") + message)


class TrafficLoop:
    """Sends real KServe v2 requests to every served model until stopped; counts failures."""

    def __init__(self, targets: list[tuple[str, str, dict[str, Any]]], rate_hz: float) -> None:
        self.targets = targets
        self.period = 1.0 / rate_hz
        self.sent = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self._stop.is_set():
                for serve_url, model, body in self.targets:
                    try:
                        infer(serve_url, model, body, http)
                        self.sent += 1
                    except httpx.HTTPError:
                        self.failed += 1
                self._stop.wait(self.period)


def _summary(fleet: DemoFleet) -> list[dict[str, Any]]:
    rows = []
    with fleet.client() as client:
        for device in client.devices():
            facts = device.get("facts") or {}
            profile = f"{facts.get('profile')} (simulated)" if facts.get("simulated") else "-"
            totals = telemetry_totals(client.telemetry(device["id"], 10_000))
            for slot in device["reported"]:
                requests, errors, p50 = totals.get(slot["name"], (0, 0, None))
                rows.append(
                    {
                        "device": device["id"],
                        "profile": profile,
                        "model": f"{slot['name']}:{slot.get('active_version')}",
                        "phase": slot["phase"],
                        "requests": requests,
                        "errors": errors,
                        "p50_ms": p50,
                    }
                )
    return sorted(rows, key=lambda r: (r["device"], r["model"]))


def _links(fleet: DemoFleet) -> list[str]:
    """Where to look next: the dashboard's login link and a CLI login, with the demo's tokens."""
    url = fleet.url
    if fleet.admin_token is None:
        return [
            f"controller: {url}   dashboard: {url}/dashboard",
            f"try: JETFLEET_URL={url} jetfleet devices ls",
        ]
    viewer = fleet.viewer_token()
    return [
        f"controller: {url}   dashboard: {url}/login?next=/dashboard#token={viewer}",
        f"try: jetfleet login --url {url} --token {fleet.admin_token} && jetfleet devices ls",
    ]


def _print_summary(rows: list[dict[str, Any]], links: list[str]) -> None:
    headers = ["device", "profile", "model", "phase", "requests", "errors", "p50 ms"]
    cells = [
        (
            r["device"],
            r["profile"],
            r["model"],
            r["phase"],
            r["requests"],
            r["errors"],
            ms(r["p50_ms"]),
        )
        for r in rows
    ]
    click.echo(table(headers, cells))
    for line in links:
        click.echo(line)


def run_demo(workdir: Path, duration: float | None, as_json: bool) -> None:
    fleet = DemoFleet(workdir)
    traffic: TrafficLoop | None = None
    try:
        _step("starting the controller (temporary SQLite, embedded MQTT broker)")
        fleet.start_controller()
        _step(f"controller at {fleet.url}, broker at {fleet.broker_url}")
        with fleet.client() as client:
            for name, version in (CLASSIFIER, ANOMALY):
                onnx_bytes = sample_models.SAMPLES[name]()
                out = client.push_model_bytes(onnx_bytes, name, version)
                _step(f"pushed {name}:{version} ({out['size']} bytes, sha256 {out['sha256'][:12]})")
            specs = {n: client.model_version(n, v) for n, v in (CLASSIFIER, ANOMALY)}

        for gw in DEMO_GATEWAYS:
            fleet.start_gateway(gw)
            _step(f"started agent {gw.device_id} (simulated profile {gw.profile})")

        fleet.label_gateways(DEMO_GATEWAYS)
        _step("every gateway reported; labelled them fleet=demo,site=... (jetfleet devices label)")
        with fleet.client() as client:
            client.deploy(
                {"model": CLASSIFIER[0], "version": CLASSIFIER[1], "selector": "fleet=demo"}
            )
            _step(f"deployed {CLASSIFIER[0]}:{CLASSIFIER[1]} to selector fleet=demo")
            client.deploy({"model": ANOMALY[0], "version": ANOMALY[1], "device": SECOND_MODEL_ON})
            _step(f"deployed {ANOMALY[0]}:{ANOMALY[1]} to {SECOND_MODEL_ON} (second slot)")

        def serving() -> list[dict[str, Any]] | None:
            with fleet.client() as c:
                devices: list[dict[str, Any]] = c.devices()
            return devices if all_desired_serving(devices) else None

        devices = wait_for("every slot to be serving", serving, 120, fleet.processes)
        rng = np.random.default_rng(0)
        targets = [
            (d["serve_url"], s["name"], random_inputs(specs[s["name"]], rng))
            for d in devices
            for s in d["desired"]
        ]
        _step(f"all {len(targets)} device/model slots serving; sending inference requests")
        traffic = TrafficLoop(targets, rate_hz=5)
        traffic.start()

        def telemetry_seen() -> bool:
            rows = _summary(fleet)
            return len(rows) == len(targets) and all(r["requests"] > 0 for r in rows)

        wait_for("telemetry with request counts", telemetry_seen, 60, fleet.processes, 0.5)
        links = _links(fleet)
        if not as_json:
            _print_summary(_summary(fleet), links)
        if duration is None:
            _step("running until Ctrl-C (traffic continues; the table refreshes every 15 s)")
            while True:
                time.sleep(15)
                _print_summary(_summary(fleet), links)
        else:
            end = time.monotonic() + duration
            while time.monotonic() < end:
                time.sleep(min(1.0, max(end - time.monotonic(), 0)))
            traffic.stop()
            time.sleep(fleet.telemetry_interval_s * 1.5)
            rows = _summary(fleet)
            if as_json:
                emit_json(
                    {
                        "controller": fleet.url,
                        "rows": rows,
                        "sent": traffic.sent,
                        "failed": traffic.failed,
                    }
                )
            else:
                _print_summary(rows, links)
                click.echo(f"requests sent: {traffic.sent}, failed: {traffic.failed}")
    except KeyboardInterrupt:
        click.echo("")
        _step("stopping")
    finally:
        if traffic is not None:
            traffic.stop()
        fleet.stop()


@click.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    help="Stop after S seconds (default: run until Ctrl-C).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep databases, models and logs here instead of a temporary directory.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the final table as JSON (needs --duration)."
)
def demo(duration: float | None, workdir: Path | None, as_json: bool) -> None:
    """Run a controller and three simulated gateways locally, deploy two models, serve them."""
    temp = None if workdir else Path(tempfile.mkdtemp(prefix="jetfleet-demo-"))
    try:
        run_demo(workdir or temp or Path("."), duration, as_json)
    except (DemoError, ApiError) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
