"""The doctor's verdicts: pure checks of what the probes saw, each with the fix for the operator.

Every check reads only :class:`Observations` (filled by :mod:`agent.service.doctor_probes` on a
real host, or by a test), so each verdict is testable without the hardware, the broker or the
controller. :func:`run_checks` gives them in print order; :func:`evaluate` turns them into the
exit code: non-zero when one of them blocks serving.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Literal

from agent.hardware.probe import CUDA_SOURCES, HardwareFacts
from agent.hardware.runtime_kinds import RUNTIMES, TENSORRT
from agent.hardware.trt_python import TrtPython
from agent.link.broker_probe import BrokerAnswer
from agent.service.trt_packages import install_advice
from agent.trt_host import versions

Status = Literal["ok", "warn", "fail"]

CREDENTIALS_DIR = Path("/etc/jetfleet/credentials")
"""Where operators put secrets; systemd hands them to the service via LoadCredential."""

MIN_FREE_BYTES = 512 * 1024 * 1024
"""Below this a model download or engine build in the state directory fails outright."""

MAX_SKEW_S = 5.0
"""Clock skew beyond which telemetry timestamps and expiring credentials go wrong."""


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: ``fail`` blocks serving, ``warn`` degrades it, ``ok`` is fine."""

    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class HttpAnswer:
    """What the controller answered: its status and ``Date`` header, or why there was none."""

    status_code: int | None = None
    date: str | None = None
    error: str | None = None
    tls_error: bool = False
    """The error is about TLS: the CA file, or the certificate check of the controller."""


@dataclass(frozen=True)
class Observations:
    """Everything the probes saw; the checks read only this."""

    broker_url: str
    broker_error: str | None
    controller_url: str | None
    controller: HttpAnswer | None
    local_time: datetime
    credentials: Sequence[str] | None
    credentials_error: str | None
    hardware: HardwareFacts
    runtime_setting: str
    state_dir: Path
    free_bytes: int | None
    engine_cache_bytes: int
    free_error: str | None = None
    broker: BrokerAnswer | None = None
    """TLS and MQTT CONNECT as this agent, once TCP got through; None when not probed."""


_BROKER_FIXES = {
    "tls_files": "put the PEM file there or fix broker_ca_file / broker_cert_file / "
    "broker_key_file in /etc/jetfleet/agent.toml",
    "tls_verify": "set broker_ca_file in /etc/jetfleet/agent.toml to the CA that signed the "
    "broker's certificate (and use a broker_url host the certificate names)",
    "tls_handshake": "the broker may want a client certificate (broker_cert_file and "
    "broker_key_file), or this port does not speak TLS: check broker_url",
    "tls_session": "the broker wants a client certificate it trusts: set broker_cert_file and "
    "broker_key_file (or check that broker_url names an MQTT listener)",
    "refused": "check broker_username/broker_password (re-enrol the gateway to get new ones)",
    "not_mqtt": "this port is not an MQTT listener of that kind: if the broker expects TLS "
    "there, use mqtts:// in broker_url",
    "unreachable": "start the broker or fix broker_url in /etc/jetfleet/agent.toml",
}


def check_broker(obs: Observations) -> CheckResult:
    """The MQTT broker accepts this agent (TCP, TLS, credentials): else no desired state arrives."""
    if obs.broker_error is not None:
        return CheckResult(
            "broker",
            "fail",
            f"{obs.broker_url} unreachable: {obs.broker_error}",
            "start the broker or fix broker_url in /etc/jetfleet/agent.toml (and the firewall)",
        )
    answer = obs.broker
    if answer is None:
        return CheckResult("broker", "ok", f"{obs.broker_url} reachable")
    if answer.problem is not None:
        kind = "TLS to " if answer.problem.startswith("tls_") else ""
        return CheckResult(
            "broker",
            "fail",
            f"{kind}{obs.broker_url} failed: {answer.detail}",
            _BROKER_FIXES[answer.problem],
        )
    over = " over TLS" if answer.tls else ""
    return CheckResult("broker", "ok", f"{obs.broker_url} accepts this agent{over}")


def check_controller(obs: Observations) -> CheckResult:
    """The controller answers ``/healthz``: artifacts are downloaded from it."""
    if obs.controller_url is None:
        return CheckResult(
            "controller",
            "warn",
            "controller_url not set: relative artifact URLs cannot be resolved",
            "set controller_url = http://HOST:8080 in /etc/jetfleet/agent.toml",
        )
    answer = obs.controller or HttpAnswer(error="not probed")
    if answer.tls_error:
        return CheckResult(
            "controller",
            "fail",
            f"TLS to {obs.controller_url} failed: {answer.error}",
            "set controller_ca_file in /etc/jetfleet/agent.toml to the CA that signed the "
            "controller's certificate (and use a controller_url host the certificate names)",
        )
    if answer.error is not None or answer.status_code is None:
        return CheckResult(
            "controller",
            "fail",
            f"{obs.controller_url} unreachable: {answer.error}",
            "start jetfleet-controller or fix controller_url in /etc/jetfleet/agent.toml",
        )
    if answer.status_code != 200:
        return CheckResult(
            "controller",
            "fail",
            f"{obs.controller_url}/healthz answered HTTP {answer.status_code}",
            "see `journalctl -u jetfleet-controller` on the controller host",
        )
    return CheckResult("controller", "ok", f"{obs.controller_url} healthy")


def check_credentials(obs: Observations) -> CheckResult:
    """Credentials exist; none yet means this gateway is not enrolled (a warning)."""
    if obs.credentials_error is not None:
        return CheckResult(
            "credentials",
            "warn",
            f"cannot read credentials: {obs.credentials_error}",
            "run `sudo jetfleet-agent doctor` (the credential directory is root-only)",
        )
    if not obs.credentials:
        return CheckResult(
            "credentials",
            "warn",
            "not enrolled: no credentials found",
            f"put this gateway's credentials in {CREDENTIALS_DIR}/ (mode 0600, owner root)",
        )
    return CheckResult("credentials", "ok", f"{len(obs.credentials)} present")


def _trt_python_detail(found: TrtPython | None) -> str:
    """`` under /usr/bin/python3.8 (Python 3.8.10)`` when the interpreter search said so."""
    where = found.interpreter or found.candidate if found is not None else None
    if found is None or where is None:
        return ""
    python = f" (Python {found.python_version})" if found.python_version else ""
    return f" under {where}{python}"


def _supported_range() -> str:
    (old_major, old_minor), (new_major, new_minor) = versions.OLDEST, versions.NEWEST
    return f"{old_major}.{old_minor} to {new_major}.{new_minor}"


def check_tensorrt(obs: Observations) -> CheckResult:
    """TensorRT imports under some interpreter, in a supported release; required only when
    ``runtime = tensorrt``. The detail names the interpreter, Python and TensorRT versions; the
    fix is the exact package for this JetPack line (:mod:`agent.service.trt_packages`)."""
    hw = obs.hardware
    found = hw.tensorrt_python
    version = hw.tensorrt_version
    if version is not None:
        supported = f", supported ({_supported_range()})" if found is not None else ""
        return CheckResult(
            "tensorrt", "ok", f"TensorRT {version}{_trt_python_detail(found)}{supported}"
        )
    source = hw.sources.get(TENSORRT.name)
    reason = (source.reason if source else None) or "TensorRT not importable"
    if found is not None and found.reason:
        reason = f"TensorRT not importable: {found.reason}"
    if found is not None and found.tensorrt_version:
        reason = (
            f"TensorRT {found.tensorrt_version}{_trt_python_detail(found)} is not supported "
            f"(this agent runs {_supported_range()})"
        )
    jetpack = hw.jetson.jetpack if hw.jetson is not None else None
    seen = found.candidate if found is not None and found.tensorrt_version else None
    cuda = (hw.gpu.cuda_version if hw.gpu else None) or (
        found.cuda_driver_version if found else None
    )
    own = seen is None or seen == sys.executable
    fix = install_advice(jetpack, seen or sys.executable, cuda, own=own)
    setting = RUNTIMES.get(obs.runtime_setting)  # None: auto
    if setting is TENSORRT:
        return CheckResult("tensorrt", "fail", reason, fix)
    if setting is not None:
        return CheckResult("tensorrt", "ok", f"not needed: runtime = {setting.name}")
    return CheckResult("tensorrt", "warn", f"{reason}; serving with ONNX Runtime (CPU)", fix)


def _cuda_versions(found: TrtPython | None) -> str:
    """`` (CUDA runtime 11.4, driver 11.4 under /usr/bin/python3.8)`` from the host's libcudart."""
    if found is None or not (found.cuda_runtime_version or found.cuda_driver_version):
        return ""
    where = found.interpreter or found.candidate
    return (
        f" (CUDA runtime {found.cuda_runtime_version or '-'}, driver "
        f"{found.cuda_driver_version or '-'} under {where})"
    )


def check_cuda(obs: Observations) -> CheckResult:
    """A CUDA device answers; required when the ``runtime`` setting names one that needs it."""
    hw = obs.hardware
    if hw.cuda_device:
        name = (hw.gpu.name if hw.gpu else None) or "a CUDA device"
        return CheckResult("cuda", "ok", f"{name} answers{_cuda_versions(hw.tensorrt_python)}")
    reasons = "; ".join(
        f"{name}: {hw.sources[name].reason}"
        for name in CUDA_SOURCES
        if name in hw.sources and hw.sources[name].reason
    )
    detail = f"no CUDA device answered ({reasons or 'no CUDA source'})"
    fix = "add the jetfleet user to groups video and render; check `nvidia-smi` / JetPack"
    setting = RUNTIMES.get(obs.runtime_setting)  # None: auto
    if setting is not None and setting.needs_cuda_device:
        return CheckResult("cuda", "fail", detail, fix)
    if setting is not None:
        return CheckResult("cuda", "ok", f"not needed: runtime = {setting.name}")
    return CheckResult("cuda", "warn", detail, fix)


def _jetson_source_check(obs: Observations, name: str, fix: str) -> CheckResult:
    source = obs.hardware.sources.get(name)
    if obs.hardware.jetson is None:
        return CheckResult(name, "ok", "not a Jetson: not needed")
    if source is not None and source.available:
        return CheckResult(name, "ok", "answers")
    reason = (source.reason if source else None) or "not probed"
    return CheckResult(name, "warn", reason, fix)


def check_jtop(obs: Observations) -> CheckResult:
    """jtop's service answers on a Jetson (it reads jetson_clocks without root)."""
    return _jetson_source_check(
        obs, "jtop", "sudo pip3 install -U jetson-stats && sudo systemctl restart jtop.service"
    )


def check_nvpmodel(obs: Observations) -> CheckResult:
    """The agent may run ``nvpmodel -q`` on a Jetson (it reports the power mode)."""
    return _jetson_source_check(
        obs, "nvpmodel", "install nvidia-l4t-nvpmodel; allow jetfleet to run /usr/sbin/nvpmodel"
    )


def check_disk(obs: Observations) -> CheckResult:
    """Free space where downloads and engines go: fail below 512 MiB, warn below the cache size."""
    if obs.free_bytes is None:
        return CheckResult(
            "disk",
            "fail",
            f"cannot measure {obs.state_dir}: {obs.free_error}",
            f"create it: sudo install -d -o jetfleet -g jetfleet -m 0750 {obs.state_dir}",
        )
    free_mib = obs.free_bytes // (1024 * 1024)
    detail = f"{free_mib} MiB free in {obs.state_dir}"
    fix = f"free space on the file system of {obs.state_dir} or lower engine_cache_mib"
    if obs.free_bytes < MIN_FREE_BYTES:
        return CheckResult("disk", "fail", detail, fix)
    if obs.free_bytes < obs.engine_cache_bytes:
        return CheckResult("disk", "warn", f"{detail}, less than engine_cache_mib", fix)
    return CheckResult("disk", "ok", detail)


def clock_skew_s(local: datetime, date_header: str) -> float:
    """Seconds this clock runs ahead of the server's (``Date`` has one-second resolution)."""
    return (local - parsedate_to_datetime(date_header)).total_seconds()


def check_clock(obs: Observations) -> CheckResult:
    """This clock agrees with the controller's ``Date`` header within a few seconds."""
    answer = obs.controller
    if answer is None or answer.date is None:
        return CheckResult("clock", "warn", "no Date from the controller to compare with")
    try:
        skew = clock_skew_s(obs.local_time, answer.date)
    except (TypeError, ValueError):
        return CheckResult("clock", "warn", f"unreadable Date header {answer.date!r}")
    detail = f"{skew:+.0f} s against the controller"
    if abs(skew) > MAX_SKEW_S:
        return CheckResult("clock", "warn", detail, "sudo timedatectl set-ntp true")
    return CheckResult("clock", "ok", detail)


CHECKS: tuple[Callable[[Observations], CheckResult], ...] = (
    check_broker,
    check_controller,
    check_credentials,
    check_tensorrt,
    check_cuda,
    check_jtop,
    check_nvpmodel,
    check_disk,
    check_clock,
)


def run_checks(obs: Observations) -> list[CheckResult]:
    """Every check's verdict, in the order they are printed."""
    return [check(obs) for check in CHECKS]


def evaluate(results: Sequence[CheckResult]) -> int:
    """Exit code: 1 when any check fails (serving is blocked), else 0 (warnings included)."""
    return 1 if any(r.status == "fail" for r in results) else 0
