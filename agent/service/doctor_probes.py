"""The doctor's probes: what this host, its broker and its controller answer right now.

:func:`observe` runs them for one :class:`~agent.settings.AgentSettings` and fills the
:class:`~agent.service.doctor_checks.Observations` the checks judge: TCP to the broker, then TLS
and an MQTT CONNECT as this agent (:mod:`agent.link.broker_probe`), HTTP(S) to the controller's
``/healthz`` verified against ``controller_ca_file`` (:mod:`agent.link.http`), the hardware
probe, the credential directory, the free disk. No verdicts here.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from agent.errors import SettingsError
from agent.hardware.probe import HardwareFacts, probe_hardware
from agent.link.broker_probe import BrokerAnswer, probe_broker
from agent.link.http import HttpClient, Unreachable
from agent.service.doctor_checks import CREDENTIALS_DIR, HttpAnswer, Observations
from agent.settings import AgentSettings
from shared.transport import agent_client_id

PROBE_TIMEOUT_S = 3.0


def tcp_error(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when ``host:port`` accepts a TCP connection, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return str(exc) or type(exc).__name__


def http_health(
    base_url: str, ca_file: Path | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> HttpAnswer:
    """GET ``base_url/healthz`` (https verified against ``ca_file`` or the system CAs)."""
    verify: ssl.SSLContext | bool = True
    if ca_file is not None:
        try:
            verify = ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ValueError) as exc:
            reason = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
            return HttpAnswer(error=f"controller_ca_file {ca_file}: {reason}", tls_error=True)
    try:
        with HttpClient(base_url, verify=verify, timeout_s=timeout_s) as http:
            answer = http.request("GET", "/healthz")
    except Unreachable as exc:
        return HttpAnswer(error=exc.reason, tls_error=exc.tls)
    return HttpAnswer(status_code=answer.status, date=answer.headers.get("date"))


def list_credentials(env: dict[str, str]) -> tuple[list[str] | None, str | None]:
    """Credential names from ``$CREDENTIALS_DIRECTORY`` (under systemd) or the config dir."""
    directory = Path(env.get("CREDENTIALS_DIRECTORY") or CREDENTIALS_DIR)
    try:
        return sorted(p.name for p in directory.iterdir() if p.is_file()), None
    except FileNotFoundError:
        return [], None
    except OSError as exc:
        return None, f"{directory}: {exc.strerror or exc}"


def free_bytes(path: Path) -> tuple[int | None, str | None]:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free, None
    except OSError as exc:
        return None, str(exc)


def observe(
    settings: AgentSettings, hardware: Callable[[], HardwareFacts] | None = None
) -> Observations:
    """Run the real probes for ``settings`` on this host (``hardware``: the hardware probe,
    default :func:`probe_hardware` with the ``tensorrt_python`` setting)."""
    host, port = settings.broker
    controller = (
        http_health(settings.controller_url, settings.controller_ca_file)
        if settings.controller_url
        else None
    )
    credentials, cred_error = list_credentials(dict(os.environ))
    free, free_error = free_bytes(settings.state_dir)
    broker_error = tcp_error(host, port)
    broker = None
    if broker_error is None:
        try:
            auth = settings.mqtt_auth
        except SettingsError as exc:
            broker = BrokerAnswer("tls_files", str(exc), tls=settings.broker_tls)
        else:
            agent_id = agent_client_id(settings.device_id) if settings.device_id else None
            broker = probe_broker(
                host, port, settings.broker_tls, auth, client_id=agent_id if auth.username else None
            )
    return Observations(
        broker_url=settings.broker_url,
        broker_error=broker_error,
        broker=broker,
        controller_url=settings.controller_url,
        controller=controller,
        local_time=datetime.now(timezone.utc),
        credentials=credentials,
        credentials_error=cred_error,
        hardware=hardware()
        if hardware is not None
        else probe_hardware(tensorrt_python=settings.tensorrt_python),
        runtime_setting=settings.runtime,
        state_dir=settings.state_dir,
        free_bytes=free,
        free_error=free_error,
        engine_cache_bytes=settings.engine_cache_mib * 1024 * 1024,
    )
