"""Reference outputs of a pushed model, computed in a bounded child process during the push.

Running an uploaded model is running the uploader's program: a Loop with a huge trip count, or
one giant operator, keeps ONNX Runtime busy for as long as its author likes. The push used to do
that inside the request, unbounded, and ``jetfleet serve`` could not stop meanwhile. Here it runs
in a child process (:mod:`controller.analysis.bounded_child`) killed after ``--reference-timeout``
seconds: the version is then stored without references (devices check warm-up outputs only, as
for any model ONNX Runtime cannot run on random inputs), and the operator can upload their own
(``jetfleet models push --reference``). When the controller stops, the child is killed and the
push answers 503 with nothing stored.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from controller.analysis.bounded_child import Children, InputFile, memory_bound
from controller.analysis.reference_child import INPUTS_REFUSED_EXIT
from controller.analysis.reference_outputs import InputsRefused, ReferenceOutputsError
from controller.errors import ControllerError, ShuttingDown
from shared.warmup_inputs import WarmupSpec

CHILD_MODULE = "controller.analysis.reference_child"


class ReferenceRunner:
    """Computes reference NPZs in child processes, each bounded by ``timeout_s``."""

    def __init__(self, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ControllerError(f"the reference timeout must be positive, got {timeout_s}")
        self.timeout_s = timeout_s
        self._children = Children()

    def compute(
        self, model: Path, given: WarmupSpec | None = None, sample: Path | None = None
    ) -> bytes:
        """The reference NPZ of the ONNX file ``model``; ``given``: the shapes and values the
        operator gave at push, ``sample``: their sample-inputs NPZ.

        :class:`ReferenceOutputsError` when the model cannot be run for references
        (:class:`InputsRefused`: ONNX Runtime failed on the inputs), or not within the bound;
        :class:`ShuttingDown` when the controller stopped meanwhile.
        """
        with tempfile.TemporaryDirectory(prefix="jetfleet-reference-") as scratch:
            out = Path(scratch) / "reference.npz"
            args: list[str | InputFile] = [InputFile(model), str(out)]
            if given is not None or sample is not None:
                warmup = Path(scratch) / "warmup.json"
                warmup.write_text(json.dumps({"given": (given or WarmupSpec()).as_json()}))
                args.append(str(warmup))
                if sample is not None:
                    args.append(InputFile(sample))
            ended = self._children.run(
                CHILD_MODULE,
                args,
                self.timeout_s,
                workdir=Path(scratch),
                memory_bytes=memory_bound([model] + ([sample] if sample else [])),
            )
            if ended.stopped:
                raise ShuttingDown(
                    "the controller is stopping: the push was not stored; push again once it is "
                    "back"
                )
            if ended.timed_out:
                raise ReferenceOutputsError(
                    f"running the model took longer than {self.timeout_s:g} s (--reference-timeout)"
                )
            if ended.code == INPUTS_REFUSED_EXIT:
                raise InputsRefused(ended.reason("the reference process"))
            if not ended.ok:
                raise ReferenceOutputsError(ended.reason("the reference process"))
            try:
                return out.read_bytes()
            except OSError as exc:
                raise ReferenceOutputsError(f"the reference process left no NPZ ({exc})") from exc

    def stop(self) -> None:
        """Kill the running computations; their pushes answer 503."""
        self._children.stop()
