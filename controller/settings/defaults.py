"""The defaults and environment variable names of the controller's settings, in one place."""

from __future__ import annotations

import re
from typing import Literal

DATA_DIR_ENV = "JETFLEET_DATA_DIR"
DEFAULT_DATA_DIR = ".jetfleet"
DEFAULT_HTTP = ("127.0.0.1", 8080)
DEFAULT_EMBEDDED_BROKER = ("127.0.0.1", 1884)
DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3
DEFAULT_MAX_MQTT_PAYLOAD_BYTES = 1024**2
DEFAULT_MAX_MODEL_NODES = 100_000
"""5-10x the largest vision exports (ResNet/YOLO/ViT: up to ~10-20k nodes); the analysis of
100k nodes takes about 10 s of one core (bench/analysis_scaling.py)."""
DEFAULT_ANALYSIS_TIMEOUT_S = 120.0
DEFAULT_REFERENCE_TIMEOUT_S = 60.0
"""Four cases of a large detector on one CPU core take a few seconds; a minute is generous."""
HEALTH_ENV_PREFIX = "JETFLEET_HEALTH_"
RETENTION_RAW_ENV = "JETFLEET_RETENTION_RAW_HOURS"
RETENTION_ROLLUP_ENV = "JETFLEET_RETENTION_ROLLUP_DAYS"
DEFAULT_RETENTION_RAW_S = 24 * 3600.0
DEFAULT_RETENTION_ROLLUP_S = 30 * 24 * 3600.0
ROLLOUT_LEASE_TTL_ENV = "JETFLEET_ROLLOUT_LEASE_TTL_S"
DEFAULT_ROLLOUT_LEASE_TTL_S = 10.0
"""How long the rollout lease outlives its holder's last renewal (renewed every half TTL)."""
DEFAULT_ARTIFACT_CACHE_BYTES = 8 * 1024**3
"""Local copies of object-store artifacts kept for the readers that need a file (analysis,
reference outputs) and for downloads served from this replica's disk."""
S3Addressing = Literal["auto", "path", "virtual"]
S3_ADDRESSING: tuple[S3Addressing, ...] = ("auto", "path", "virtual")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
REPLICA_ID_ENV = "JETFLEET_REPLICA_ID"
INGEST_SESSION_EXPIRY_ENV = "JETFLEET_INGEST_SESSION_EXPIRY_S"
DEFAULT_INGEST_SESSION_EXPIRY_S = 3600
"""How long the broker keeps an ingest link's session (and queues its telemetry) after the link's
connection ends: a controller restarted within this collects what agents sent meanwhile."""
_REPLICA_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
