"""Telemetry ingest end to end, against the broker's own C clients, and the idle agent's footprint.

Table 1, on one private Mosquitto started for the run (unbounded queues, so nothing is dropped):
- **ceiling**: ``mosquitto_pub -l`` (one process per simulated device, QoS 1) → ``mosquitto_sub``
  counting every message: the most this broker moves on this machine.
- **controller**: the same publishers → ``jetfleet`` controller (paho, validation, batched
  writer) → PostgreSQL (COPY) [and SQLite with ``--sqlite``]: seconds from the first publish until
  the last sample is persisted, checked by counting the rows. Once with ingest in the controller
  process and once per ``--ingest-workers`` count (default ``0,2``: in-process and two worker
  processes on a shared subscription).
Table 2: RSS and CPU of ``jetfleet-agent run`` (telemetry at 1 Hz, no models) over ``--idle-s``.

Usage: ``python bench/ingest.py [--devices 100] [--per-device 500] [--pg URL] [--sqlite]
[--ingest-workers 0,2] [--idle-s 30] [--out bench/results]``. Each run replaces
``ingest.md`` (written by :mod:`bench.ingest_report`): the controller paths as fractions of the
ceiling measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest_cpu import CpuMeter
from bench.ingest_report import Measured, report
from bench.provenance import Provenance
from controller.demo.ports import free_port
from controller.ingest.gc_tuning import tune_garbage_collector
from controller.server import Controller
from controller.settings import Settings
from shared.codec import encode
from shared.telemetry import ModelStats, Telemetry

DEFAULT_PG = os.environ.get(
    "JETFLEET_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def start_broker(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        "max_queued_messages 0\nmax_queued_bytes 0\nmax_inflight_messages 0\n"
    )
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    proc = subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("mosquitto did not start: apt-get install mosquitto mosquitto-clients")


def payload_files(
    workdir: Path, prefix: str, devices: int, per_device: int, tag: str
) -> list[tuple[str, Path]]:
    """One file of JSON lines per device (each line one Telemetry), and its topic."""
    start = datetime.now(timezone.utc) - timedelta(seconds=per_device)
    out = []
    for d in range(devices):
        device_id = f"bench-{d:04d}"
        lines = []
        for n in range(per_device):
            msg = Telemetry(
                device_id=device_id,
                sample_id=f"{tag}-{n}",
                ts=start + timedelta(seconds=n),
                interval_s=1.0,
                cpu_percent=12.5,
                memory_used_bytes=3 << 30,
                memory_total_bytes=8 << 30,
                memory_available_bytes=5 << 30,
                gpu_load_percent=40.0,
                temperature_max_c=55.0,
                power_mw=7500.0,
                models=(
                    ModelStats(
                        name="detector",
                        requests=30,
                        errors=0,
                        latency_p50_ms=4.0,
                        latency_p99_ms=9.0,
                    ),
                ),
            )
            lines.append(encode(msg).decode())
        path = workdir / f"{tag}-{device_id}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        out.append((f"{prefix}/{device_id}/telemetry", path))
    return out


def publish_all(port: int, files: list[tuple[str, Path]]) -> list[subprocess.Popen[bytes]]:
    procs = []
    for topic, path in files:
        with path.open("rb") as fh:
            procs.append(
                subprocess.Popen(
                    ["mosquitto_pub", "-p", str(port), "-q", "1", "-t", topic, "-l"], stdin=fh
                )
            )
    return procs


def ceiling(
    port: int, prefix: str, files: list[tuple[str, Path]], total: int, meter: CpuMeter
) -> tuple[float, dict[str, float]]:
    sub = subprocess.Popen(
        [
            "mosquitto_sub",
            "-p",
            str(port),
            "-q",
            "1",
            "-t",
            f"{prefix}/+/telemetry",
            "-C",
            str(total),
        ],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # let the subscription land before the first publish
    meter.start()
    began = time.monotonic()
    pubs = publish_all(port, files)
    sub.wait(600)
    elapsed = time.monotonic() - began
    for p in pubs:
        p.wait(60)
    return elapsed, meter.stop()


def single_publisher_qos0(port: int, prefix: str, workdir: Path, total: int, sample: Path) -> float:
    """The setup the issue's "C clients move about 100,000 messages/s" describes: one
    ``mosquitto_pub -l`` at QoS 0 on one topic → ``mosquitto_sub``. No PUBACKs, one process:
    not what a fleet of QoS 1 devices does, shown for scale."""
    topic = f"{prefix}/solo/telemetry"
    path = workdir / "solo.jsonl"
    line = sample.read_text().split("\n")[0]
    path.write_text((line + "\n") * total)
    sub = subprocess.Popen(
        ["mosquitto_sub", "-p", str(port), "-q", "0", "-t", topic, "-C", str(total)],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    began = time.monotonic()
    with path.open("rb") as fh:
        pub = subprocess.Popen(
            ["mosquitto_pub", "-p", str(port), "-q", "0", "-t", topic, "-l"], stdin=fh
        )
        sub.wait(600)
    elapsed = time.monotonic() - began
    pub.wait(60)
    return elapsed


def fresh_pg(base_url: str) -> str:
    import psycopg

    name = f"jetfleet_bench_{uuid.uuid4().hex[:8]}"
    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return base_url.rsplit("/", 1)[0] + "/" + name


def drop_pg(base_url: str, url: str) -> None:
    import psycopg

    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def through_controller(
    db_url: str,
    port: int,
    prefix: str,
    files: list[tuple[str, Path]],
    total: int,
    workdir: Path,
    ingest_workers: int,
    meter: CpuMeter,
) -> tuple[float, int, dict[str, float], dict[str, float]]:
    settings = Settings(
        db_url=db_url,
        broker_url=f"mqtt://127.0.0.1:{port}",
        data_dir=workdir / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
        ingest_workers=ingest_workers,
    )
    controller = Controller(settings)
    controller.start()
    tune_garbage_collector()  # as `jetfleet serve` does once started
    try:
        services = controller.services
        assert services is not None
        assert services.batcher is not None
        assert services.telemetry is not None
        batcher = services.batcher
        telemetry = services.telemetry
        time.sleep(1.0)  # start-up work (imports, first queries) is not ingest
        meter.start()
        began = time.monotonic()
        pubs = publish_all(port, files)
        deadline = began + 600
        peak_queue = 0
        # Done means rows in the database, not counters (worker processes report theirs up to
        # a quarter second late); counting rows costs PostgreSQL CPU, so only near the end.
        while time.monotonic() < deadline:
            stats = batcher.stats()
            peak_queue = max(peak_queue, stats.queued)
            if stats.samples_persisted >= 0.9 * total and telemetry.counts()["samples"] >= total:
                break
            time.sleep(0.05)
        elapsed = time.monotonic() - began
        for p in pubs:
            p.wait(60)
        cpu = meter.stop()
        stored = services.telemetry.counts()["samples"]
        stats = batcher.stats()
        extra = {"batches": stats.batches, "peak_queue": peak_queue, "blocked_s": stats.blocked_s}
        return elapsed, stored, extra, cpu
    finally:
        controller.stop()


def idle_agent(port: int, seconds: float, workdir: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "JETFLEET_DEVICE_ID": "bench-idle",
        "JETFLEET_BROKER_URL": f"mqtt://127.0.0.1:{port}",
        "JETFLEET_STATE_DIR": str(workdir / "agent"),
        "JETFLEET_SERVE_ADDRESS": "127.0.0.1:0",
        "JETFLEET_TELEMETRY_INTERVAL_S": "1",
        "JETFLEET_LOG_LEVEL": "warning",
    }
    exe = str(Path(sys.executable).parent / "jetfleet-agent")
    proc = subprocess.Popen(
        [exe, "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        ps = psutil.Process(proc.pid)
        time.sleep(10)  # start-up (imports, facts probe) is not "idle"
        if proc.poll() is not None:
            raise SystemExit(f"the agent exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        cpu0 = ps.cpu_times()
        t0 = time.monotonic()
        rss_peak = 0
        while time.monotonic() - t0 < seconds:
            rss_peak = max(rss_peak, ps.memory_info().rss)
            time.sleep(1)
        cpu1 = ps.cpu_times()
        wall = time.monotonic() - t0
        used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        return {
            "rss_mb": ps.memory_info().rss / 1e6,
            "rss_peak_mb": rss_peak / 1e6,
            "uss_mb": ps.memory_full_info().uss / 1e6,
            "cpu_percent": 100 * used / wall,
            "seconds": wall,
        }
    finally:
        proc.terminate()
        proc.wait(20)
        if proc.stderr is not None:
            proc.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--per-device", type=int, default=500)
    parser.add_argument(
        "--pg", default=DEFAULT_PG, help="PostgreSQL server URL (a database is created and dropped)"
    )
    parser.add_argument("--sqlite", action="store_true", help="also run the controller on SQLite")
    parser.add_argument(
        "--ingest-workers",
        default="0,2",
        help="comma-separated worker process counts to run the controller path with",
    )
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    provenance = Provenance()
    total = args.devices * args.per_device
    worker_counts = [int(n) for n in str(args.ingest_workers).split(",") if n.strip()]
    rows: list[Measured] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jf-bench-ingest-") as tmp:
        workdir = Path(tmp)
        broker, port = start_broker(workdir)
        meter = CpuMeter(broker.pid)
        try:
            prefix = f"bench/{uuid.uuid4().hex[:6]}"
            files = payload_files(workdir, prefix, args.devices, args.per_device, "c")
            seconds, cpu = ceiling(port, prefix, files, total, meter)
            rows.append(Measured("mosquitto_pub -l → mosquitto_sub (ceiling)", seconds, total, cpu))
            solo = single_publisher_qos0(port, prefix, workdir, total, files[0][1])
            notes.append(
                "For scale, not a fleet: one `mosquitto_pub -l` at QoS 0 on one topic → "
                f"`mosquitto_sub`: {total} messages in {solo:.2f} s, {total / solo:,.0f}/s."
            )
            targets = [("PostgreSQL (COPY)", "pg")] + (
                [("SQLite (executemany)", "sqlite")] if args.sqlite else []
            )
            for (label, kind), workers in [(t, w) for t in targets for w in worker_counts]:
                prefix = f"bench/{uuid.uuid4().hex[:6]}"
                tag = f"{kind}{workers}"
                files = payload_files(workdir, prefix, args.devices, args.per_device, tag)
                url = fresh_pg(args.pg) if kind == "pg" else f"sqlite:///{workdir}/{tag}.db"
                try:
                    seconds, stored, extra, cpu = through_controller(
                        url, port, prefix, files, total, workdir, workers, meter
                    )
                finally:
                    if kind == "pg":
                        drop_pg(args.pg, url)
                how = (
                    f"{workers} ingest worker{'s' if workers > 1 else ''}"
                    if workers
                    else "in-process ingest"
                )
                path = f"mosquitto_pub -l → controller ({how}) → {label}"
                rows.append(Measured(path, seconds, stored, cpu, f"{kind}_w{workers}"))
                notes.append(
                    f"{label}, {how}: {extra['batches']} batches, peak queue "
                    f"{extra['peak_queue']}, backpressure waits {extra['blocked_s']:.2f} s, "
                    f"rows stored {stored}/{total}"
                )
            agent = idle_agent(port, args.idle_s, workdir)
        finally:
            broker.terminate()
            broker.wait(10)
    report(args, provenance, rows, notes, agent)


if __name__ == "__main__":
    main()
