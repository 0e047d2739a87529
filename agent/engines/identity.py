"""The engine key of one model slot on this device: validity from facts, content from config.

Validity is derived from the facts by :mod:`shared.engine_validity` (the controller checks a
device's uploads with the same functions) through the runtime's descriptor
(:mod:`agent.hardware.runtime_kinds`); the delegate config adds the ORT providers and the
TensorRT DLA core.

**Tuning tag.** Power mode (name and id), jetson_clocks, JetPack and L4T: never validity.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.hardware.runtime_kinds import UnknownRuntime, runtime_kind
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey, engine_key
from shared.engine_validity import IdentityError as IdentityError
from shared.facts import DeviceFacts


@dataclass(frozen=True)
class EngineIdentity:
    """Everything that names one engine: validity, content, tuning and the resulting key."""

    validity: ValidityKey
    content: ContentKey
    tuning: TuningTag

    @property
    def key(self) -> str:
        """``engine_key(validity, content)``."""
        return engine_key(self.validity, self.content)

    @property
    def runtime(self) -> str:
        return self.validity.runtime


def tuning_tag(facts: DeviceFacts) -> TuningTag:
    """The conditions an engine built now would be tuned under."""
    jetson = facts.jetson
    if jetson is None:
        return TuningTag()
    return TuningTag(
        power_mode=jetson.power_mode,
        power_mode_id=jetson.power_mode_id,
        jetson_clocks=jetson.jetson_clocks,
        jetpack=jetson.jetpack,
        l4t=jetson.l4t,
    )


def identify(
    runtime: str,
    facts: DeviceFacts,
    onnx_sha256: str,
    config: DelegateConfig,
    calibration_sha256: str | None = None,
) -> EngineIdentity:
    """The identity of building ``config`` from the ONNX ``onnx_sha256`` with ``runtime`` here;
    IdentityError when the facts lack what the key needs or the runtime is unknown.
    ``calibration_sha256``: the reference NPZ the build calibrates INT8 from on the device
    (:mod:`agent.engines.sample_calibration`); None for every other build (the config's
    calibration cache, if any, is in the key either way)."""
    try:
        kind = runtime_kind(runtime)
    except UnknownRuntime as exc:
        raise IdentityError(str(exc)) from exc
    return EngineIdentity(
        validity=kind.validity(facts, config),
        content=ContentKey.of(onnx_sha256, config, calibration_sha256),
        tuning=tuning_tag(facts),
    )


def tuning_matches(engine: TuningTag, device: TuningTag) -> bool:
    """Whether an engine tuned under ``engine`` runs under the conditions it was tuned for.

    Power mode (name, and id when both know it) and jetson_clocks count; JetPack/L4T cannot
    differ within one validity key (they fix the TensorRT version).
    """
    if engine.power_mode != device.power_mode:
        return False
    ids = (engine.power_mode_id, device.power_mode_id)
    if None not in ids and ids[0] != ids[1]:
        return False
    return engine.jetson_clocks == device.jetson_clocks
