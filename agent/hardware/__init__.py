"""Hardware facts of a gateway: Jetson module, JetPack/L4T, power mode, GPU, TensorRT.

Every source is optional. Each probe answers a value or, when its source is missing, a
:class:`shared.facts.FactSource` that says why, so the operator can tell "not a Jetson" from
"nvpmodel not installed" from "TensorRT not importable". Foreign libraries (TensorRT, CUDA Python,
NVML, jtop) are imported only inside their own probe module, and only when probed.

Entry point: :func:`agent.hardware.probe.probe_hardware`; the runtime decision is the pure
:func:`agent.hardware.probe.choose_runtime`, and :mod:`.runtime_kinds` describes each runtime
(builder, CUDA device, memory accounting, validity key), at the bottom of the layers so every
package may look one up instead of comparing names.
"""
