"""Model versions: upload (stream → hash → validate → store → record), list and show."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller.analysis.archive_limits import ArchiveError
from controller.analysis.external_data import inline_archive, is_archive
from controller.analysis.onnx_inspect import inspect_model
from controller.analysis.reference_outputs import (
    InputsRefused,
    ReferenceOutputsError,
    keep_reference,
    reference_ref,
    store_reference,
)
from controller.analysis.report import AnalysisReport
from controller.artifacts.store import ArtifactStore, PendingArtifact
from controller.db.repository import Repository
from controller.errors import Conflict, InvalidInput, InvalidModel, InvalidReference, NotFound
from controller.fleet.desired import artifact_url
from controller.records import PlannedSlot, VersionRecord, VersionView
from shared.messages import ArtifactRef
from shared.reference_layout import read_layout
from shared.warmup_inputs import WarmupSpec
from shared.wire_model import MODEL_NAME_PATTERN, VERSION_PATTERN

logger = logging.getLogger(__name__)
_NAME = re.compile(MODEL_NAME_PATTERN)
_VERSION = re.compile(VERSION_PATTERN)


class Catalog:
    """The controller's model versions and their artifacts.

    ``queue_analysis`` takes a version just stored with its analysis pending and analyses it
    after the push answered (:class:`controller.analysis.runner.AnalysisRunner`).
    ``compute_reference`` gives the reference NPZ of an ONNX file, bounded in time
    (:class:`controller.analysis.reference_runner.ReferenceRunner`; called with the path, and
    with ``given=`` and ``sample=`` when the operator gave warm-up inputs), or raises
    ReferenceOutputsError.
    """

    def __init__(
        self,
        repo: Repository,
        store: ArtifactStore,
        public_url: str,
        *,
        queue_analysis: Callable[[VersionRecord], None],
        compute_reference: Callable[..., bytes],
        max_model_nodes: int | None = None,
    ) -> None:
        self._repo = repo
        self._store = store
        self._public_url = public_url
        self._queue_analysis = queue_analysis
        self._compute_reference = compute_reference
        self.max_model_nodes = max_model_nodes

    def check_names(self, name: str, version: str) -> None:
        """Refuse a model name or version that does not fit the wire contract."""
        if not _NAME.fullmatch(name):
            raise InvalidInput(
                f"invalid model name {name!r}: use 1-64 of a-z 0-9 . _ - starting with a-z or 0-9"
            )
        if not _VERSION.fullmatch(version):
            raise InvalidInput(
                f"invalid version {version!r}: use 1-64 of A-Z a-z 0-9 . + _ - "
                "starting with a letter or digit"
            )

    def begin_upload(self) -> PendingArtifact:
        """A temporary file in the store to stream the upload into."""
        return self._store.begin()

    def finish_upload(
        self,
        name: str,
        version: str,
        pending: PendingArtifact,
        given: WarmupSpec | None = None,
    ) -> tuple[VersionView, bool]:
        """Validate and store a streamed upload; (version, True when newly created).

        Same name, version and bytes as stored → the stored version (idempotent). Different
        bytes → :class:`Conflict`. Invalid ONNX → :class:`InvalidModel`; more nodes than
        ``max_model_nodes`` → :class:`TooManyNodes`. Only a valid, new version leaves anything
        behind. The static analysis is not run here: the version is stored with its analysis
        pending and queued (``queue_analysis``), so the push answers at once. Reference
        outputs are computed before the version is stored, in a bounded child process, with
        the shapes and values the operator ``given`` (stored with the version); past the bound,
        or when ONNX Runtime fails on those inputs, the version is stored without them and its
        ``reference_error`` says why. The same bytes pushed again with other ``given`` inputs
        compute the references again.
        """
        committed = False
        try:
            sha = self._inline_archive(pending)
            existing = self._repo.find_version(name, version)
            if existing is not None and existing.sha256 == sha:
                return self._recompute(existing, pending.path, given), False
            signature = inspect_model(pending.path, self.max_model_nodes)
            if existing is not None:
                raise Conflict(
                    f"model version {name}:{version} already exists with different bytes "
                    f"(sha256 {existing.sha256[:12]}…, upload {sha[:12]}…): "
                    "push it under a new version"
                )
            reference, warmup = self._references(name, version, pending.path, given)
            stored = pending.commit()
            committed = True
            if reference is not None:
                keep_reference(self._store, stored.sha256, reference)
            record = self._repo.add_version(
                name,
                version,
                stored.sha256,
                stored.size,
                [s.as_json() for s in signature.inputs],
                [s.as_json() for s in signature.outputs],
                has_qdq=signature.has_qdq,
                analysis_state="pending",
                warmup=warmup,
            )
            self._queue_analysis(record)
            return self._out(record), True
        finally:
            if not committed:
                pending.abort()

    def _inline_archive(self, pending: PendingArtifact) -> str:
        """The upload's sha256, after turning an archive of a .onnx and its external data into
        one self-contained model (:mod:`controller.analysis.external_data`; InvalidModel)."""
        sha = pending.finish()
        with open(pending.path, "rb") as upload:
            head = upload.read(512)
        if not is_archive(head):
            return sha
        try:
            model = inline_archive(pending.path, self._store.max_upload_bytes)
        except ArchiveError as exc:
            raise InvalidModel(f"archive refused: {exc}") from exc
        return pending.replace(model)

    def _references(
        self, name: str, version: str, model: Path, given: WarmupSpec | None
    ) -> tuple[bytes | None, dict[str, Any]]:
        """The reference NPZ of ``model`` (None when it cannot be computed) and the warm-up
        record stored with the version."""
        given = given or WarmupSpec()
        sample = self._sample_path(given)
        warmup: dict[str, Any] = {"given": given.as_json()}
        try:
            if given.empty:
                return self._compute_reference(model), warmup
            reference = self._compute_reference(model, given=given, sample=sample)
            if sample is not None:  # the operator's input arrays: shapes a default profile takes
                warmup["reference_shapes"] = input_shapes(reference)
            return reference, warmup
        except ReferenceOutputsError as exc:
            unknown = isinstance(exc, InputsRefused)
            logger.warning(
                "%s:%s has no reference outputs (%s); %s",
                name,
                version,
                exc,
                "deploys are refused until its warm-up inputs are given"
                if unknown
                else "devices will check warm-up outputs for NaN/Inf only",
            )
            return None, warmup | {"reference_error": str(exc), "unknown": unknown}

    def _sample_path(self, given: WarmupSpec) -> Path | None:
        if given.inputs_sha256 is None:
            return None
        try:
            return self._store.local_path(given.inputs_sha256)  # InvalidInput unless a sha256
        except NotFound as exc:
            raise InvalidInput(
                f"no artifact {given.inputs_sha256} for the sample inputs: upload the NPZ first "
                "(POST /api/v1/artifacts; `jetfleet models push --inputs` does)"
            ) from exc

    def _recompute(
        self, existing: VersionRecord, model: Path, given: WarmupSpec | None
    ) -> VersionView:
        """The same bytes pushed again: with other warm-up inputs than stored, compute the
        references again with them (an operator's answer to a push that had none)."""
        if given is None or given.empty or given.as_json() == existing.warmup_given:
            return self._out(existing)
        reference, warmup = self._references(existing.model, existing.version, model, given)
        if reference is not None:
            keep_reference(self._store, existing.sha256, reference)
        self._repo.set_warmup(existing.id, warmup)
        return self.version(existing.model, existing.version)

    def models(self) -> dict[str, list[VersionView]]:
        """Every model with its versions, oldest first."""
        return {n: [self._out(v) for v in vs] for n, vs in self._repo.models().items()}

    def model(self, name: str) -> list[VersionView]:
        """The versions of one model, oldest first, or :class:`NotFound`."""
        found = self._repo.models(name)
        if name not in found:
            raise NotFound(f"unknown model '{name}'")
        return [self._out(v) for v in found[name]]

    def version(self, name: str, version: str) -> VersionView:
        """One model version, or :class:`NotFound`."""
        return self._out(self.require_version(name, version))

    def require_version(self, name: str, version: str) -> VersionRecord:
        """The stored record of ``name:version``, or :class:`NotFound`."""
        record = self._repo.find_version(name, version)
        if record is None:
            raise NotFound(f"unknown model version '{name}:{version}'")
        return record

    def analysis(self, name: str, version: str, trt_version: str) -> AnalysisReport:
        """The stored static analysis of ``name:version`` for one TensorRT version;
        :class:`Conflict` while it is pending, :class:`NotFound` when it failed."""
        record = self.require_version(name, version)
        if record.analysis_state == "pending":
            raise Conflict(
                f"the analysis of {name}:{version} is still pending (it runs after the push): "
                f"retry shortly, or watch `jetfleet models show {name}:{version}`"
            )
        if record.analysis_state == "failed":
            raise NotFound(f"no analysis of {name}:{version}: it failed: {record.analysis_error}")
        report = record.analysis.get(trt_version)
        if report is None:
            known = ", ".join(sorted(record.analysis)) or "none (pushed before analysis existed)"
            raise NotFound(
                f"no analysis of {name}:{version} for TensorRT {trt_version}; stored: {known}"
            )
        return AnalysisReport.model_validate(report)

    def set_reference(self, name: str, version: str, npz_bytes: bytes) -> ArtifactRef:
        """Replace the computed reference outputs of ``name:version`` with the operator's NPZ.

        Checked against the model first (its tensors' names, shapes and dtypes, and a size cap,
        from the NPZ's headers; :class:`InvalidReference`, HTTP 422, when it does not fit);
        desired documents published from now on carry it, so devices validate new engines
        against it.
        """
        record = self.require_version(name, version)
        onnx_bytes = self._store.local_path(record.sha256).read_bytes()
        try:
            store_reference(self._store, record.sha256, onnx_bytes, npz_bytes)
        except ReferenceOutputsError as exc:
            raise InvalidReference(str(exc)) from exc
        warmup = {"given": record.warmup_given, "reference_shapes": input_shapes(npz_bytes)}
        self._repo.set_warmup(record.id, warmup)  # no longer unknown, no reference error
        ref = self.reference(record.sha256)
        assert ref is not None
        return ref

    def references_of(
        self, slots: Sequence[PlannedSlot]
    ) -> tuple[dict[str, ArtifactRef], set[int]]:
        """The reference NPZ of each model ``slots`` serve (by sha256), and the ids of their
        versions whose reference inputs may calibrate INT8 on a device: the operator gave them
        (``reference_shapes``: ``--inputs`` or an uploaded reference; random ones calibrate
        poorly) and the model has no Q/DQ nodes (TensorRT takes its scales from those)."""
        shas = sorted({s.sha256 for s in slots})
        refs = {sha: ref for sha in shas if (ref := self.reference(sha))}
        versions = self._repo.versions_by_id(sorted({s.model_version_id for s in slots}))
        return refs, {i for i, v in versions.items() if v.reference_shapes and not v.has_qdq}

    def reference(self, sha256: str) -> ArtifactRef | None:
        """The reference outputs (NPZ artifact) agents validate model ``sha256`` against."""
        return reference_ref(self._store, self._public_url, sha256)

    def _out(self, record: VersionRecord) -> VersionView:
        return VersionView(record, artifact_url(self._public_url, record.sha256))


def input_shapes(reference: bytes) -> dict[str, list[int]]:
    """The per-case shape of each input array of a reference NPZ (after its case axis)."""
    arrays = read_layout(reference).arrays
    return {
        k.removeprefix("input:"): list(a.shape[1:])
        for k, a in arrays.items()
        if k.startswith("input:")
    }
