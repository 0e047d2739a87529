"""Static delegate analysis: how much of an ONNX model the TensorRT ONNX parser can take.

``analyze(onnx_bytes, trt_version)`` returns an :class:`AnalysisReport`: per-node support with the
reason (nodes of If/Loop/Scan subgraphs and of model-local functions included), GPU partitions
that keep the graph acyclic, CPU↔GPU crossings with their bytes, support rates by nodes and by
FLOPs, a verdict with advice, and the prediction: does the agent's TensorRT build take the whole
model, or does the slot fall back to ONNX Runtime, and why. Only ``graph`` imports onnx and only
``tensorrt_check`` imports TensorRT; the rest is pure. Also what a pushed model is
(``onnx_inspect``), its reference outputs (``reference_outputs``), the bounded child processes
both run in after a push (``runner``, ``reference_runner``, ``bounded_child``), and a model with
external data inlined from an archive at upload (``external_data``; the archive is read by
``archive_limits``, ``archive_tar``, ``archive_zip`` and ``archive_reading``).

Layer: below fleet (the catalog runs it at push time); may use artifacts (where the bytes are),
db, the leaves and ``shared``.
"""

from __future__ import annotations

from controller.analysis.report import AnalysisReport, analyze, resolve_trt_version

__all__ = ["AnalysisReport", "analyze", "resolve_trt_version"]
