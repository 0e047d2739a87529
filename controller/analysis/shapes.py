"""At which input shapes sizes and FLOPs are counted when a model's inputs have dynamic dims.

A model with input ``[-1, 3, -1, -1]`` has no FLOPs count of its own: counting unknown dims as 1
reported a 640x640 detector at 2.33 MFLOP, and a ``-1`` taken literally gave negative counts.
The analysis instead states a shape and names it ("FLOPs at images=1x3x640x640"):

1. the shape the caller gives per input (a config's shape profile ``opt``: the shape the engine
   is tuned for, so the shape the operator expects to serve), else
2. a default per dynamic dim:

   - the first dim (batch) is :data:`DEFAULT_BATCH` = 1: an edge device serves one request at a
     time unless a config batches, and a profile says so when it does;
   - the spatial dims of an image- or volume-like input (rank 4 or 5, dims 2 and up) are
     :data:`DEFAULT_SPATIAL` = 640. Models exported with dynamic height and width are mostly
     detectors, segmenters and text detectors/recognisers, and 640 is the common input size of
     those families (YOLO-style detectors train and serve at 640x640); classifiers, whose usual
     224 would be the other candidate, are nearly always exported with a fixed size and then
     need no default. A channel dim left open on such an input is :data:`DEFAULT_CHANNELS` = 3;
   - any other dim (a sequence length, a state's batch) is 1.

The report names the shapes either way, so a reader can tell an estimate at a default from one at
the operator's profile. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

DEFAULT_BATCH = 1
DEFAULT_SPATIAL = 640
DEFAULT_CHANNELS = 3
DEFAULT_OTHER = 1

ShapeSource = Literal["profile", "default", "profile+default"]


@dataclass(frozen=True)
class AssumedShapes:
    """Concrete shapes for every input whose rank is known, and where they came from."""

    shapes: Mapping[str, tuple[int, ...]]
    source: ShapeSource

    def text(self) -> str:
        """``images=1x3x640x640, mask=1x640`` (inputs in model order)."""
        return ", ".join(
            f"{name}={'x'.join(str(d) for d in dims) or 'scalar'}"
            for name, dims in self.shapes.items()
        )

    def describe(self) -> str:
        """What a report line says: the shapes and whether they are the profile's or defaults."""
        origin = {
            "profile": "the shape profile's opt",
            "default": "default shapes for dynamic dims",
            "profile+default": "the shape profile's opt and default shapes",
        }[self.source]
        return f"{self.text()} ({origin})"


def default_dim(axis: int, rank: int) -> int:
    """The default for dynamic dim ``axis`` of a rank-``rank`` input (module docstring)."""
    if axis == 0:
        return DEFAULT_BATCH
    if rank in (4, 5):
        return DEFAULT_CHANNELS if axis == 1 else DEFAULT_SPATIAL
    return DEFAULT_OTHER


def stated_shapes(
    declared: Mapping[str, tuple[int | None, ...] | None],
    given: Mapping[str, Sequence[int]],
) -> AssumedShapes | None:
    """Shapes to count at, or None when every input's shape is fully known and none is given.

    ``declared``: input name → its shape as the model declares it (None dims are dynamic; None
    for an unknown rank, which stays unknown unless ``given`` names the input). ``given``:
    shapes the caller states (a profile's ``opt``); names that are not inputs are ignored.
    """
    given_used = {
        name: tuple(int(d) for d in dims) for name, dims in given.items() if name in declared
    }
    dynamic = [
        name
        for name, shape in declared.items()
        if name not in given_used and shape is not None and any(d is None for d in shape)
    ]
    if not given_used and not dynamic:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in declared.items():
        if name in given_used:
            shapes[name] = given_used[name]
        elif shape is not None:
            shapes[name] = tuple(
                default_dim(axis, len(shape)) if d is None else d for axis, d in enumerate(shape)
            )
    source: ShapeSource = (
        "profile+default" if given_used and dynamic else "profile" if given_used else "default"
    )
    return AssumedShapes(shapes, source)
