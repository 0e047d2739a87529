"""A desired document a newer controller sends must still be accepted by the oldest agent the
fleet can update (``shared.agent_releases.FIRST_UPDATABLE_VERSION``).

Wire models refuse unknown fields (``shared/wire_model.py``), so an agent refuses a whole desired
document, every slot of it, when it carries a field the agent predates. The controller is
upgraded first (it is what rolls out new agents), so a field added after that release must be
left out of the JSON while it holds its default (``exclude_if``, as ``DesiredState.jobs`` and
``ModelSlot.reference_calibrates`` do): then only the operators who use the new knob need new
agents. ``KNOWN_TO_OLDEST_AGENT`` is what the models sent in a desired document serialised at
their defaults in that release; this test fails when a change sends more, or stops sending a
field those agents require.
"""

from __future__ import annotations

import typing

from pydantic import BaseModel

from shared.agent_releases import FIRST_UPDATABLE_VERSION
from shared.messages import DesiredState

KNOWN_TO_OLDEST_AGENT: dict[str, frozenset[str]] = {
    "shared.messages.DesiredState": frozenset(
        {"schema", "device_id", "generation", "issued_at", "slots", "fleet_keys"}
    ),
    "shared.messages.ModelSlot": frozenset(
        {"name", "version", "artifact", "delegate", "serving", "reference", "rollback"}
    ),
    "shared.manifests.ArtifactRef": frozenset({"url", "sha256", "size", "signed"}),
    "shared.manifests.SignedManifest": frozenset({"manifest", "signature"}),
    "shared.manifests.Manifest": frozenset(
        {"schema", "kind", "name", "version", "serial", "sha256", "size", "created", "expires"}
        | {"key_id"}
    ),
    "shared.delegate.DelegateConfig": frozenset(
        {"runtime", "precision", "strongly_typed", "dla_core", "gpu_fallback", "fallback"}
        | {"build_timeout_s", "workspace_mib", "tf32", "refittable", "disabled_tactic_sources"}
        | {"builder_optimization_level", "shapes", "max_aux_streams", "streams", "timing_cache"}
        | {"calibration_cache_sha256", "power_mode", "apply_power_mode", "jetson_clocks"}
        | {"preference", "max_batch_size", "max_queue_delay_ms", "onnxruntime"}
    ),
    "shared.delegate.ShapeProfile": frozenset({"input", "min", "opt", "max"}),
    "shared.delegate.OrtOptions": frozenset(
        {"providers", "graph_optimization_level", "trt_min_subgraph_size", "trt_max_partitions"}
    ),
    "shared.messages.ServingSettings": frozenset(
        {"max_queue", "intra_op_threads", "max_batch_size", "max_queue_delay_ms"}
    ),
    "shared.manifests.RollbackAuthorization": frozenset(
        {"schema", "device_id", "model", "version", "serial", "generation", "expires"}
        | {"key_id", "signature"}
    ),
    "shared.manifests.KeyEndorsement": frozenset(
        {"schema", "key_id", "public_key", "created", "endorsed_by", "signature"}
    ),
    "shared.jobs.ProfileJob": frozenset({"kind", "job_id", "model", "runs", "warmups"}),
    "shared.jobs.TuneJob": frozenset(
        {"kind", "job_id", "model", "version", "artifact", "reference", "base", "candidates"}
        | {"power_modes", "runs", "warmups"}
    ),
    "shared.agent_releases.AgentReleaseOrder": frozenset(
        {"version", "arch", "artifact", "confirm_within_s"}
    ),
    "shared.agent_releases.AgentReleaseArtifact": frozenset(
        {"url", "sha256", "size", "format", "signed"}
    ),
    "shared.manifests.DocumentSignature": frozenset({"key_id", "signature"}),
}


def _models(annotation: object, found: dict[str, type[BaseModel]]) -> None:
    """Every pydantic model reachable from ``annotation`` through field types."""
    if typing.get_origin(annotation) is not None:
        for argument in typing.get_args(annotation):
            _models(argument, found)
        return
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return
    name = f"{annotation.__module__}.{annotation.__qualname__}"
    if name in found:
        return
    found[name] = annotation
    for field in annotation.model_fields.values():
        _models(field.annotation, found)


def _sent_at_default(model: type[BaseModel]) -> frozenset[str]:
    """The JSON keys ``model`` always writes: required fields, and optional ones not left out
    while they hold their default."""
    sent = set()
    for name, field in model.model_fields.items():
        key = field.serialization_alias or field.alias or name
        if field.exclude is True:
            continue
        if field.is_required():
            sent.add(key)
            continue
        default = field.get_default(call_default_factory=True)
        if field.exclude_if is not None and field.exclude_if(default):
            continue
        sent.add(key)
    return frozenset(sent)


def _desired_models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    _models(DesiredState, found)
    return found


def test_no_desired_document_field_is_sent_at_its_default_that_the_oldest_agent_predates() -> None:
    problems = []
    for name, model in _desired_models().items():
        known = KNOWN_TO_OLDEST_AGENT.get(name)
        if known is None:
            problems.append(
                f"{name} is new in desired documents: agents {FIRST_UPDATABLE_VERSION} refuse "
                "it; make the field that carries it optional and left out while unset"
            )
            continue
        for key in sorted(_sent_at_default(model) - known):
            problems.append(
                f"{name}.{key} is sent at its default, and agents {FIRST_UPDATABLE_VERSION} "
                "refuse unknown fields: leave it out while it holds its default (exclude_if)"
            )
    assert not problems, "\n".join(problems)


def test_every_field_the_oldest_agent_reads_is_still_a_field() -> None:
    """Renaming or removing one leaves those agents on their own default, or refusing the
    document where the field was required."""
    models = _desired_models()
    gone = [
        f"{name}.{key}"
        for name, known in KNOWN_TO_OLDEST_AGENT.items()
        for key in sorted(known)
        if name not in models
        or key
        not in {f.serialization_alias or f.alias or n for n, f in models[name].model_fields.items()}
    ]
    assert not gone, (
        f"agents {FIRST_UPDATABLE_VERSION} read these and they are gone: {', '.join(gone)}"
    )
