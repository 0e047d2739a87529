"""Health collectors: one small, optional reader per source, sampled into a ``HealthReadings``.

Every collector answers a frozen dataclass with ``available`` and ``reason`` instead of raising,
so a missing library, service or file becomes a sentence in the sample, never a gap in it.
Sources: psutil (:mod:`.host`), Jetson sysfs/procfs (:mod:`.jetson_sysfs`), jtop's service
(:mod:`.jtop_collector`), NVML on dGPU hosts (:mod:`.nvml_collector`) and the agent's own
inference counters (:mod:`.inference`); :mod:`.health` runs them together. Import the modules
directly: this package imports nothing, so a single collector loads without the others'
dependencies (the NVML one runs on a GPU host with no pydantic).
"""
