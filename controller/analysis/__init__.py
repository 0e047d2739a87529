"""Static delegate analysis: how much of an ONNX model the TensorRT ONNX parser can take.

``analyze(onnx_bytes, trt_version)`` returns an :class:`AnalysisReport`: per-node support with the
reason, GPU partitions that keep the graph acyclic, CPU↔GPU crossings with their bytes, support
rates by nodes and by FLOPs, and a verdict with advice. Only ``graph`` imports onnx and only
``tensorrt_check`` imports TensorRT; the rest is pure. Also what a pushed model is
(``onnx_inspect``), its reference outputs (``reference_outputs``) and the bounded child processes
both run in after a push (``runner``, ``reference_runner``, ``bounded_child``).

Layer: below fleet (the catalog runs it at push time); may use artifacts (where the bytes are),
db, the leaves and ``shared``.
"""

from __future__ import annotations

from controller.analysis.report import AnalysisReport, analyze, resolve_trt_version

__all__ = ["AnalysisReport", "analyze", "resolve_trt_version"]
