"""Telemetry: health samples from every source the device has, one per interval.

:mod:`.collectors` (host, Jetson sysfs, jtop, NVML, inference counters; each optional),
:mod:`.loop` (the sampling thread, sending through the outbox), :mod:`.metrics` (per-model
request counters written by serving).

May use: :mod:`agent.link`, :mod:`agent.hardware`, :mod:`shared`.
"""
