"""Which TensorRT build failures are the model's, and the fleet's memory of them.

A build that fails for reasons of the model (its parser refuses it, a layer is unsupported, the
build child dies by a signal, it runs past the build timeout) fails the same way on every twin,
and a TensorRT build can take minutes to hours on a Jetson. So the device that saw it reports it
to the engine store (``PUT /api/v1/engines/{key}/failure``) and its twins, finding it before they
would build, serve the version on ONNX Runtime at once (:mod:`agent.slots.fallback`). The engine
key names the TensorRT release, the device and the build config: a JetPack upgrade or another
config is another key, tried afresh.

Not the model's, so neither remembered nor (in :mod:`agent.slots.fallback`) a fallback: memory or
space running out, a build SIGKILLed (the kernel's OOM killer), a build cancelled because the agent
stops; and, only not remembered, a build refused before it started (no interpreter here imports
``tensorrt``, a config this device cannot build): that is this device's, not its twins'.
:func:`is_device_failure` and :func:`remembered` decide (pure); :func:`known_failure` and
:func:`report_failure` talk to the store and never fail the caller.
"""

from __future__ import annotations

import logging

from agent.engines.build_runner import BuildFailed
from agent.engines.identity import EngineIdentity
from agent.engines.store_client import StoreClient, StoreRejected, StoreUnavailable
from agent.errors import AgentError
from shared.engines import BuildFailure, BuildFailureOut

log = logging.getLogger(__name__)

MEMORY_WORDS = (
    "out of memory",
    "outofmemory",
    "bad_alloc",
    "cannot allocate memory",
    "no space left on device",
    "exited -9",
    "killed by sigkill",
)
"""Words of a failure that was about memory or space, not the model (lower case). A build
SIGKILLed is the kernel's OOM killer's (or a person's) doing: ``build_runner.exit_summary``."""
NOT_THE_MODEL = ("cancelled", "agent is stopping")
REFUSED_HERE = "TensorRT build refused"
"""The summary of a build refused before it started (``agent.engines.build_runner.run_build``)."""
REASON_CHARS = 400
"""Longest reason a slot reports or the store keeps (TensorRT's messages run to kilobytes)."""


def words(exc: AgentError) -> str:
    """The failure in TensorRT's words: the error and a build's last error lines, cut to
    :data:`REASON_CHARS`."""
    text = str(exc)
    if isinstance(exc, BuildFailed):
        extra = [line for line in exc.lines[-3:] if line not in text]
        text = "; ".join([text, *extra]) if extra else text
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def is_device_failure(exc: AgentError) -> bool:
    """Whether ``exc`` is about this device's memory, space or stopping, not the model."""
    lowered = words(exc).lower()
    return any(word in lowered for word in MEMORY_WORDS + NOT_THE_MODEL)


def remembered(exc: BuildFailed) -> bool:
    """Whether a failed TensorRT build is the model's for every twin (reported to the store)."""
    return not is_device_failure(exc) and exc.summary != REFUSED_HERE


def known_failure(store: StoreClient, key: str) -> BuildFailureOut | None:
    """The store's remembered failure of ``key`` (None when none, or the store cannot say)."""
    try:
        return store.build_failure(key)
    except (StoreUnavailable, StoreRejected) as exc:
        log.warning("could not ask the engine store about failed builds of %s: %s", key[:12], exc)
        return None


def report_failure(
    store: StoreClient, device_id: str, identity: EngineIdentity, exc: BuildFailed
) -> None:
    """Tell the store that TensorRT could not build ``identity``'s engine (logged if it can't)."""
    report = BuildFailure(
        device_id=device_id,
        validity=identity.validity,
        content=identity.content,
        reason=words(exc),
    )
    try:
        store.report_build_failure(identity.key, report)
    except (StoreUnavailable, StoreRejected) as exc_store:
        log.warning("could not report the failed build of %s: %s", identity.key[:12], exc_store)
