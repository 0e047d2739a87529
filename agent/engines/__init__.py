"""Engines on the device: identity (keys), the local cache, builders, and resolution.

A model slot's ONNX file becomes an *engine* for this device: an ONNX Runtime optimised model or a
TensorRT plan. :mod:`identity` names it (docs/architecture.md#engine-identity), :mod:`cache` keeps
it, :mod:`resolver` finds it (local cache → controller store → build under a fleet lease → upload),
:mod:`build_runner` builds it in a child process. Only :mod:`builder_ort` imports ONNX Runtime and
TensorRT builds run under the TensorRT interpreter as ``agent.trt_host.build_child``
(:mod:`trt_interpreter`, :mod:`trt_config`): nothing here imports TensorRT.
"""
