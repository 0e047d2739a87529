"""Default shape profiles: a dynamic input whose config has no profile for it
gets one from the shapes its model version was pushed with.

TensorRT builds a model with a dynamic dimension only with an optimisation profile for that input
(``shared.delegate.check_config`` refuses a config without one). The push already stored the
shape the model is used with: the operator's ``--shape input=1x3x224x224``, else the input arrays
of the reference NPZ when the operator gave them (``--inputs`` sample inputs, or an uploaded
reference); a reference the controller made up from 1 in every dynamic dimension states nothing.
That shape becomes the input's profile as min = opt = max; where the operator gave both and they
differ, opt is the given shape and min/max span both (the agent validates the engine on the
reference's inputs, so the engine must take them). A config's own profile wins per input;
an ONNX Runtime config gets none (it needs none, and a profile would change its engine key). A
stored shape whose rank or fixed dimensions disagree with the model's would not build: it is not
used, and :attr:`DefaultProfiles.unusable` says why (``check_config`` adds that to its refusal).
:func:`default_profiles` makes the decision; :meth:`DefaultProfiles.apply` puts it in the
effective config. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.delegate import DelegateConfig, Dim, ShapeProfile, is_dynamic

GIVEN = "--shape"
"""Source of a default taken from the shape the operator gave at push."""
REFERENCE = "reference inputs"
"""Source of a default taken from the operator's reference/sample inputs NPZ."""


@dataclass(frozen=True)
class DefaultProfiles:
    """The default profiles of one model version under one config.

    ``sources``: input → where its default came from (:data:`GIVEN` or :data:`REFERENCE`);
    ``unusable``: input → why the shape stored for it cannot be its default."""

    profiles: tuple[ShapeProfile, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    unusable: Mapping[str, str] = field(default_factory=dict)

    def apply(self, config: DelegateConfig) -> DelegateConfig:
        """``config`` with these profiles after its own, their inputs in ``default_shapes``."""
        if not self.profiles:
            return config
        return config.model_copy(
            update={
                "shapes": (*config.shapes, *self.profiles),
                "default_shapes": tuple(p.input for p in self.profiles),
            }
        )

    def provenance(self, config_source: str | None) -> str:
        """Where the effective ``shapes`` came from: ``config_source`` (the layer that set the
        config's own profiles; None when it has none) and the version's warm-up shapes."""
        several = len(self.profiles) > 1 or config_source is not None
        parts = [config_source] if config_source is not None else []
        for source in dict.fromkeys(self.sources.values()):
            names = [p.input for p in self.profiles if self.sources[p.input] == source]
            part = f"default from the version's warm-up shapes ({source})"
            parts.append(f"{part} for {', '.join(names)}" if several else part)
        return "; ".join(parts)


def default_profiles(
    inputs: Mapping[str, Sequence[Dim]],
    config: DelegateConfig,
    *,
    given: Mapping[str, Sequence[int]],
    reference: Mapping[str, Sequence[int]] | None = None,
) -> DefaultProfiles:
    """Default profiles for the dynamic ``inputs`` (name → dims) that ``config`` has none for.

    ``given``: the shapes the operator gave at push (``WarmupSpec.shapes``); ``reference``: the
    per-case shapes of the operator's reference/sample input arrays. The given shape is opt;
    min and max span it and the reference's; a shape that does not fit the input's dims is
    skipped, and why is kept when none fits."""
    if config.runtime == "onnxruntime":
        return DefaultProfiles()
    reference = reference or {}
    covered = {p.input for p in config.shapes}
    profiles: list[ShapeProfile] = []
    sources: dict[str, str] = {}
    unusable: dict[str, str] = {}
    for name, dims in inputs.items():
        if name in covered or not any(is_dynamic(d) for d in dims):
            continue
        misfits: list[str] = []
        fits: list[tuple[str, tuple[int, ...]]] = []
        for source, stored in ((GIVEN, given.get(name)), (REFERENCE, reference.get(name))):
            if stored is None:
                continue
            shape = tuple(int(d) for d in stored)
            misfit = _misfit(dims, shape)
            if misfit is None:
                fits.append((source, shape))
            else:
                misfits.append(f"{_stated(source, name, shape)} {misfit}")
        if fits:
            (source, opt), shapes = fits[0], [shape for _, shape in fits]
            low = tuple(min(sizes) for sizes in zip(*shapes, strict=True))
            high = tuple(max(sizes) for sizes in zip(*shapes, strict=True))
            profiles.append(ShapeProfile(input=name, min=low, opt=opt, max=high))
            sources[name] = source
        elif misfits:
            unusable[name] = "; ".join(misfits) + ", so it is no default profile"
    return DefaultProfiles(tuple(profiles), sources, unusable)


def _misfit(dims: Sequence[Dim], shape: tuple[int, ...]) -> str | None:
    """Why ``shape`` cannot be a profile of an input with ``dims`` (None: it can)."""
    if len(shape) != len(dims):
        return f"has rank {len(shape)}, the input has rank {len(dims)}"
    for axis, (dim, size) in enumerate(zip(dims, shape, strict=True)):
        if size < 1:
            return f"has size {size} at axis {axis}"
        if not is_dynamic(dim) and dim != size:
            return f"has {size} at axis {axis}, fixed at {dim} in the model"
    return None


def _stated(source: str, name: str, shape: tuple[int, ...]) -> str:
    text = "x".join(map(str, shape)) or "(scalar)"
    if source == GIVEN:
        return f"the shape given at push (--shape {name}={text})"
    return f"the reference inputs' shape {text}"
