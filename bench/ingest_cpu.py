"""CPU seconds per part of a telemetry ingest run (``bench/ingest.py``): the controller, the
broker, PostgreSQL and the publishers."""

from __future__ import annotations

import resource

import psutil


class CpuMeter:
    """CPU seconds (user + system) spent by each part of a run, between ``start`` and ``stop``.

    Parts: the controller (this process and its children, i.e. ingest workers), the broker,
    PostgreSQL (every ``postgres`` process) and the publishers (children this process waited
    for: the ``mosquitto_pub`` processes, and ``mosquitto_sub`` in the ceiling run). CPU per
    message is what a noisy shared machine cannot distort much, unlike messages per second.
    """

    def __init__(self, broker_pid: int) -> None:
        self._broker = broker_pid
        self._before: dict[str, float] = {}
        self._seen: dict[int, float] = {}

    def _controller_pids(self) -> list[psutil.Process]:
        me = psutil.Process()
        return [me] + [c for c in me.children(recursive=True) if "mosquitto" not in c.name()]

    def _read(self) -> dict[str, float]:
        def cpu(procs: list[psutil.Process]) -> float:
            total = 0.0
            for proc in procs:
                try:
                    t = proc.cpu_times()
                except psutil.Error:
                    continue
                total += t.user + t.system
            return total

        pg = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "controller": cpu(self._controller_pids()),
            "broker": cpu([psutil.Process(self._broker)]),
            "postgres": cpu(pg),
            "publishers": waited.ru_utime + waited.ru_stime,
        }

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float]:
        after = self._read()
        return {part: max(0.0, after[part] - self._before[part]) for part in after}
