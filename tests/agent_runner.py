"""The real agent daemon on a thread, as the integration tests run it in-process."""

from __future__ import annotations

import threading

from agent.daemon import AgentDaemon
from agent.hardware.facts import probe_facts
from agent.hardware.runtime_kinds import ONNXRUNTIME
from agent.settings import AgentSettings
from shared.facts import DeviceFacts


class RunningAgent:
    """Starts at construction; ``stop`` stops it and re-raises whatever made ``run`` fail.
    ``facts`` and ``runtime``: this machine's and ONNX Runtime unless given."""

    def __init__(
        self,
        settings: AgentSettings,
        facts: DeviceFacts | None = None,
        runtime: str = ONNXRUNTIME.name,
    ) -> None:
        self.daemon = AgentDaemon(settings, facts or probe_facts(), runtime=runtime)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.daemon.request_stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), "agent did not stop"
        assert self.error is None, f"agent failed: {self.error!r}"
