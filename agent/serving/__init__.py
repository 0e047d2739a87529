"""Serving: KServe v2 REST on the gateway, and the two-slot core that swaps are atomic against.

:mod:`.app` (the Starlette routes), :mod:`.http_server` (the uvicorn thread serving them),
:mod:`.core` (active/standby slots per model name), :mod:`.kserve` (JSON tensors ↔ numpy, pure),
:mod:`.infer_body` (infer request bodies, their number arrays read by simdjson),
:mod:`.batching` (optional dynamic batching), :mod:`.shared_memory` (tensors through
``/dev/shm``), :mod:`.prometheus` (``/metrics``).

May use: :mod:`agent.runtimes` and everything below it.
"""
