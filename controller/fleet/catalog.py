"""Model versions: upload (stream → hash → validate → store → record), list and show."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from controller.analysis.onnx_inspect import inspect_model
from controller.analysis.reference_outputs import (
    ReferenceOutputsError,
    keep_reference,
    reference_ref,
    store_reference,
)
from controller.analysis.report import AnalysisReport
from controller.artifacts.store import ArtifactStore, PendingArtifact
from controller.db.repository import Repository
from controller.errors import Conflict, InvalidInput, InvalidReference, NotFound
from controller.fleet.desired import artifact_url
from controller.records import VersionRecord, VersionView
from shared.messages import MODEL_NAME_PATTERN, VERSION_PATTERN, ArtifactRef

logger = logging.getLogger(__name__)
_NAME = re.compile(MODEL_NAME_PATTERN)
_VERSION = re.compile(VERSION_PATTERN)


class Catalog:
    """The controller's model versions and their artifacts.

    ``queue_analysis`` takes a version just stored with its analysis pending and analyses it
    after the push answered (:class:`controller.analysis.runner.AnalysisRunner`).
    ``compute_reference`` gives the reference NPZ of an ONNX file, bounded in time
    (:class:`controller.analysis.reference_runner.ReferenceRunner`), or raises
    ReferenceOutputsError.
    """

    def __init__(
        self,
        repo: Repository,
        store: ArtifactStore,
        public_url: str,
        *,
        queue_analysis: Callable[[VersionRecord], None],
        compute_reference: Callable[[Path], bytes],
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
        self, name: str, version: str, pending: PendingArtifact
    ) -> tuple[VersionView, bool]:
        """Validate and store a streamed upload; (version, True when newly created).

        Same name, version and bytes as stored → the stored version (idempotent). Different
        bytes → :class:`Conflict`. Invalid ONNX → :class:`InvalidModel`; more nodes than
        ``max_model_nodes`` → :class:`TooManyNodes`. Only a valid, new version leaves anything
        behind. The static analysis is not run here: the version is stored with its analysis
        pending and queued (``queue_analysis``), so the push answers at once. Reference
        outputs are computed before the version is stored, in a bounded child process; past
        the bound the version is stored without them.
        """
        committed = False
        try:
            sha = pending.finish()
            existing = self._repo.find_version(name, version)
            if existing is not None and existing.sha256 == sha:
                return self._out(existing), False
            signature = inspect_model(pending.path, self.max_model_nodes)
            if existing is not None:
                raise Conflict(
                    f"model version {name}:{version} already exists with different bytes "
                    f"(sha256 {existing.sha256[:12]}…, upload {sha[:12]}…): "
                    "push it under a new version"
                )
            try:
                reference: bytes | None = self._compute_reference(pending.path)
            except ReferenceOutputsError as exc:
                reference = None
                logger.warning(
                    "%s:%s has no reference outputs (%s); devices will check warm-up outputs "
                    "for NaN/Inf only",
                    name,
                    version,
                    exc,
                )
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
            )
            self._queue_analysis(record)
            return self._out(record), True
        finally:
            if not committed:
                pending.abort()

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
        onnx_bytes = self._store.path_of(record.sha256).read_bytes()
        try:
            store_reference(self._store, record.sha256, onnx_bytes, npz_bytes)
        except ReferenceOutputsError as exc:
            raise InvalidReference(str(exc)) from exc
        ref = self.reference(record.sha256)
        assert ref is not None
        return ref

    def reference(self, sha256: str) -> ArtifactRef | None:
        """The reference outputs (NPZ artifact) agents validate model ``sha256`` against."""
        return reference_ref(self._store, self._public_url, sha256)

    def _out(self, record: VersionRecord) -> VersionView:
        return VersionView(record, artifact_url(self._public_url, record.sha256))
