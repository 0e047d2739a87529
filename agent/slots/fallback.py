"""Whether a slot that TensorRT could not serve falls back to ONNX Runtime, and why (pure).

Every model serves: a version TensorRT cannot build, load, create an execution
context for, or validate against its reference outputs is served by ONNX Runtime on the same
device instead of failing the slot, and the slot says so (``runtime: onnxruntime``,
``fallback_reason`` in TensorRT's own words, a ``fallback`` event). The slot pipeline asks
:func:`fallback_reason` when the TensorRT path of a load failed
(:meth:`agent.slots.pipeline.SlotPipeline`).

Falls back (permanent for this version and config, whatever the reason is):

- a build that failed: the parser refused the model, a layer is unsupported, the build child died
  by a signal (SIGSEGV, SIGABRT), the build ran past ``build_timeout_s`` (a stuck build must not
  hold a slot for ever), TensorRT cannot be used here at all (no interpreter imports it);
- a load that failed: the plan does not deserialise, no execution context, a warm-up inference
  that fails or outputs off the reference (:class:`agent.swap.hotswap.ValidationFailed`).

Does not fall back (the slot fails and is retried, or waits, as before):

- transient errors (network, broker, a full state directory);
- memory: admission refused the engine, or a message of TensorRT or the system says memory ran
  out (``out of memory``, ``bad_alloc``, a build child SIGKILLed by the kernel's OOM killer):
  ONNX Runtime would need the memory too, and the device may have it later;
- a build cancelled because the agent is stopping; a version refused by the trust checks;
- ``fallback: none`` in the slot's delegate config, or a device whose runtime is ONNX Runtime.

The fallback runs on the best provider the device has (:func:`fallback_delegate`): the CUDA
execution provider where this ONNX Runtime has it, else the CPU, unless the config names its own
providers. Not the TensorRT execution provider, although it partitions the graph itself: it runs
TensorRT's parser and builder inside the agent's process, and a model that crashed TensorRT's
build child (SIGSEGV) would then take the whole agent down.
"""

from __future__ import annotations

from agent.engines.build_failures import REASON_CHARS as REASON_CHARS
from agent.engines.build_failures import is_device_failure, words
from agent.engines.build_runner import BuildFailed
from agent.errors import AgentError, ModelLoadError, TransientError
from agent.swap.hotswap import AdmissionRefused
from shared.delegate import DelegateConfig, OrtOptions


def fallback_reason(exc: AgentError, config: DelegateConfig, runtime: str) -> str | None:
    """Why the slot serves on ONNX Runtime instead (None: it does not fall back, ``exc``
    fails it as before). ``runtime`` is the runtime whose load failed."""
    if runtime != "tensorrt" or config.fallback != "onnxruntime":
        return None
    if isinstance(exc, (TransientError, AdmissionRefused)):
        return None
    if not isinstance(exc, (BuildFailed, ModelLoadError)) or is_device_failure(exc):
        return None
    return words(exc)


FALLBACK_PROVIDERS = ("CUDAExecutionProvider", "CPUExecutionProvider")
"""What a fallback runs on when the config names no providers of its own (the first this ONNX
Runtime build has: agent.runtimes.ort_providers.session_plan keeps only those)."""


def fallback_delegate(config: DelegateConfig) -> DelegateConfig:
    """``config`` as ONNX Runtime serves a fallback: the config's own providers if it names
    any besides the default, else :data:`FALLBACK_PROVIDERS`."""
    if config.onnxruntime.providers != OrtOptions().providers:
        return config
    ort = config.onnxruntime.model_copy(update={"providers": FALLBACK_PROVIDERS})
    return config.model_copy(update={"onnxruntime": ort})
