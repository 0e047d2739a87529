"""Hardware class of a device: the name configs are layered by and engines are shared across.

Derived from facts only (pure): a Jetson's module, a dGPU's name, or the CPU architecture,
plus the JetPack release on a Jetson (a JetPack upgrade changes TensorRT, so a new class).
"""

from __future__ import annotations

import re

from shared.facts import DeviceFacts

_SLUG = re.compile(r"[^a-z0-9]+")

HARDWARE_CLASS_PATTERN = r"^[a-z0-9][a-z0-9._/-]{0,127}$"
"""What a hardware class name may be (``jetson-orin-nano-8gb/jp6.2``, ``cpu-x86_64``)."""


def slug(text: str) -> str:
    """Lower-case, dash-separated: ``'Jetson Orin Nano 8GB'`` → ``'jetson-orin-nano-8gb'``."""
    return _SLUG.sub("-", text.lower()).strip("-")


def hardware_class(facts: DeviceFacts) -> str:
    """``jetson-orin-nano-8gb/jp6.2``, ``nvidia-rtx-a2000``, or ``cpu-x86_64``."""
    jetson = facts.jetson
    if jetson is not None and (jetson.module or jetson.part_number):
        name = slug(jetson.module or jetson.part_number or "")
        return f"{name}/jp{jetson.jetpack}" if jetson.jetpack else name
    if facts.gpu is not None and facts.gpu.name:
        return slug(facts.gpu.name.replace("(simulated)", ""))
    return f"cpu-{facts.arch}"
