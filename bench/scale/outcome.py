"""A scale run's configuration and its outcome: the printed tables and the ``scale:`` line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.scale.measure import RolloutTimes, TelemetryCount
from bench.scale.report import (
    Failover,
    FinalState,
    failover_text,
    final_text,
    scale_line,
    telemetry_text,
    waves_table,
)

MODEL = "det"
VERSIONS = ("1.0.0", "2.0.0", "3.0.0")
LABELS = {"fleet": "scale"}


@dataclass
class Config:
    devices: int
    replicas: int = 3
    server_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    """A PostgreSQL server URL; the run creates its own database there and drops it after."""
    procs: int = 0
    """Gateway processes; 0: one per 2,500 gateways, at least 2."""
    lease_ttl_s: float = 10.0
    telemetry_interval_s: float = 30.0
    steady_s: float = 0.0
    """0: 30 s up to 1,000 devices, else 60 s."""
    connect_per_s: float = 200.0
    """New gateway connections per second, all processes together."""
    waves: str = "1,10%,50%,100%"
    kill_wave: int = 3
    """1-based wave of the second rollout whose start triggers the kill of the leader."""
    restart_after_s: float = 5.0
    settle_s: float = 10.0
    ingest_workers: int = 0
    keep_db: bool = False
    work: Path | None = None
    log: Callable[[str], None] = print


@dataclass
class Outcome:
    config: Config
    procs: int
    rollouts: list[tuple[str, RolloutTimes]]
    failover: Failover | None
    final: FinalState
    telemetry: TelemetryCount
    cpu: str
    notes: list[str] = field(default_factory=list)

    @property
    def converged_s(self) -> float | None:
        return self.rollouts[0][1].converged_s if self.rollouts else None

    @property
    def failover_s(self) -> float | None:
        return self.failover.first_publish_s if self.failover else None

    @property
    def completed(self) -> bool:
        return all(r.state == "succeeded" for _, r in self.rollouts)

    def line(self) -> str:
        c = self.config
        return scale_line(c.devices, c.replicas, self.converged_s, self.failover_s, self.telemetry)

    def text(self) -> str:
        c = self.config
        head = (
            f"{c.devices} simulated gateways in {self.procs} processes, {c.replicas} replicas "
            f"(r1..r{c.replicas}) on PostgreSQL, own Mosquitto with dynamic security; "
            f"waves {c.waves}; lease TTL {c.lease_ttl_s:g} s; telemetry every "
            f"{c.telemetry_interval_s:g} s per gateway; ingest workers per replica "
            f"{c.ingest_workers}"
        )
        parts = [
            head,
            "",
            waves_table(self.rollouts),
            "",
            failover_text(self.failover),
            final_text(self.final, VERSIONS[-1]),
            telemetry_text(self.telemetry),
            "",
            self.cpu,
        ]
        if self.notes:
            parts += ["", *[f"note: {n}" for n in self.notes]]
        return "\n".join([*parts, "", self.line()])
