"""The TensorRT host: the only product code that imports ``tensorrt`` or moves tensors through
CUDA; the facts probe (``agent/hardware/cuda_probe.py``, CUDA Python) only asks which
device there is.

It runs as a child process of the agent under the interpreter that can ``import tensorrt``
(JetPack's own Python: 3.8 on JetPack 5.1, 3.10 on 6.x, 3.12 on 7), so every module here is
Python 3.8 syntax and depends on the standard library, numpy, ``tensorrt`` and libcudart only
(checked by tests/packaging/test_trt_host_py38.py). Nothing here imports ``agent.*`` outside
this package. The agent's TensorRT slots, builds and profiles all go through it
(:mod:`agent.runtimes.trt_hosts`, :mod:`agent.engines.trt_interpreter`).

- :mod:`.versions`: the detected TensorRT release → :class:`~.versions.Capabilities`, one named
  capability per API difference between 8.5 and the newest release (no AttributeError probing).
- :mod:`.cudart`: a small ctypes binding of libcudart (malloc, copies, streams, errors).
- :mod:`.dtypes`: TensorRT data types ↔ numpy, with a clear error for types not served.
- :mod:`.build`: ONNX bytes → serialized plan (:class:`~.build.BuildOptions`).
- :mod:`.engine`: deserialize, describe I/O, one context on user-managed activation memory, infer.
- :mod:`.refit`: new weights from ONNX into a refittable engine (8.x: ``Refitter`` +
  ``set_named_weights`` from the initializers read by :mod:`.onnx_weights`; >= 10.0:
  ``OnnxParserRefitter``).
- :mod:`.profiler`: per-layer times through ``IProfiler``.
- :mod:`.plan_header`: the plan's TensorRT version where the header layout is documented.
- :mod:`.protocol`: the agent ↔ host frames (fixed prefix with a major/minor version, JSON
  header, raw payload); :mod:`.shm`: tensors through /dev/shm regions named per host, so the
  side that survives a kill -9 deletes them; :mod:`.server` (``python -m agent.trt_host``): the
  host's loop over a ``Backend``; :mod:`.backend_trt`: TensorRT (plans on the shared activation
  arena of :mod:`.arena`, builds, refit, layer profiles); :mod:`.backend_ort`: the CPU backend
  (CI, x86 without TensorRT); :mod:`.build_child`: one build in a child of its own. The agent's
  side is :mod:`agent.runtimes.host` and :mod:`agent.runtimes.trt_hosts`.

``tensorrt`` (the module), the capabilities and the CUDA binding are passed in as parameters, so
the API-conformance suite (tests/tensorrt_api) can run every release's path against a stand-in
generated from NVIDIA's binding sources.
"""
