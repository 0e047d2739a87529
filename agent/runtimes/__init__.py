"""Runtimes: what serving and swapping need from a loaded model, whatever runs it.

:mod:`.base` is the seam (``LoadedModel``); :mod:`.loading` (runtime name → its loader, each
runtime imported with its first load); :mod:`.ort` (the only serving-side ONNX Runtime user)
with :mod:`.ort_providers` (delegate config → execution providers, pure); :mod:`.trt_hosts`
(TensorRT: models in TensorRT host processes, one shared or one per model); :mod:`.host`,
:mod:`.host_process`, :mod:`.host_model`: the agent's side of the TensorRT host process
(:mod:`agent.trt_host`), each hosted model a ``LoadedModel``.

May use: :mod:`agent.engines`, :mod:`agent.trust`, :mod:`agent.telemetry`, :mod:`agent.link`,
:mod:`agent.hardware`, :mod:`shared`.
"""
