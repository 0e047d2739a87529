"""jetson-stats (``jtop``) as an optional facts source: the only module that imports ``jtop``.

jtop is used only when the package imports AND its root service socket exists, because ``jtop()``
blocks on a missing service before it raises (docs/tensorrt.md#jtop-jetson-stats). It fills what the
command-line tools could not tell an unprivileged agent (``jetson_clocks --show`` needs root).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.facts import FactSource

JTOP_SOCKET = Path("run/jtop.sock")
JTOP_INTERVAL_S = 0.5


@dataclass(frozen=True)
class JtopReading:
    """What jtop's service reported; ``None`` where it had no answer."""

    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None
    l4t: str | None = None
    jetpack: str | None = None


def probe_jtop(root: Path) -> tuple[JtopReading | None, FactSource]:
    """Read jtop's service once; absent with the reason when the package or service is missing."""
    try:
        import jtop
    except ImportError as exc:
        return None, FactSource(
            available=False,
            reason=f"jetson-stats not installed ({exc}); install it with "
            "`sudo pip3 install -U jetson-stats` to read jetson_clocks without root",
        )
    socket = root / JTOP_SOCKET
    if not socket.exists():
        return None, FactSource(
            available=False,
            reason=f"jtop service not running ({socket} missing): "
            "sudo systemctl restart jtop.service",
        )
    try:
        with jtop.jtop(interval=JTOP_INTERVAL_S) as jetson:
            if not jetson.ok():
                return None, FactSource(available=False, reason="jtop service sent no sample")
            return _reading(jetson), FactSource(available=True)
    except (jtop.JtopException, OSError) as exc:
        return None, FactSource(available=False, reason=f"jtop service refused: {exc}")


def _reading(jetson: Any) -> JtopReading:
    nvp = jetson.nvpmodel
    clocks = jetson.jetson_clocks
    hardware = jetson.board.get("hardware", {}) if isinstance(jetson.board, dict) else {}
    return JtopReading(
        power_mode=str(nvp.name) if nvp is not None else None,
        power_mode_id=int(nvp.id) if nvp is not None else None,
        jetson_clocks=bool(clocks) if clocks is not None else None,
        l4t=str(hardware["L4T"]) if hardware.get("L4T") else None,
        jetpack=str(hardware["Jetpack"]) if hardware.get("Jetpack") else None,
    )
