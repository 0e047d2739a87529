"""Model versions in the database: store, find and list them, and keep their analysis state.

One transaction per method; SQLAlchemy errors become :mod:`controller.errors` (through
:class:`~controller.db.session.SessionStore`). Part of
:class:`~controller.db.repository.Repository`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.exc import IntegrityError

from controller.db.schema import Artifact, Model, ModelVersion
from controller.db.session import SessionStore
from controller.errors import Conflict, NotFound
from controller.records import AnalysisState, VersionRecord


class CatalogStore(SessionStore):
    """The ``models``, ``model_versions`` and (for versions) ``artifacts`` tables."""

    def find_version(self, model: str, version: str) -> VersionRecord | None:
        """The version ``model:version``, if stored."""
        with self._tx() as session:
            row = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(ModelVersion.model == model, ModelVersion.version == version)
            ).first()
            return None if row is None else _version(row[0], row[1])

    def add_version(
        self,
        model: str,
        version: str,
        sha256: str,
        size: int,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        has_qdq: bool = False,
        analysis: dict[str, Any] | None = None,
        analysis_state: AnalysisState = "done",
        warmup: dict[str, Any] | None = None,
    ) -> VersionRecord:
        """Store a new version (and its model and artifact rows when new); ``analysis_state``
        pending stores it before its analysis (:meth:`set_analysis` stores that later)."""
        try:
            with self._tx() as session:
                if session.get(Model, model) is None:
                    session.add(Model(name=model))
                artifact = session.get(Artifact, sha256)
                if artifact is None:
                    artifact = Artifact(sha256=sha256, size=size)
                    session.add(artifact)
                row = ModelVersion(
                    model=model,
                    version=version,
                    sha256=sha256,
                    inputs=inputs,
                    outputs=outputs,
                    has_qdq=has_qdq,
                    analysis=_encode_analysis(analysis_state, analysis or {}, None),
                    warmup=warmup,
                )
                session.add(row)
                session.flush()
                return _version(row, artifact)
        except IntegrityError as exc:
            raise Conflict(
                f"model version {model}:{version} was stored concurrently; retry the upload"
            ) from exc

    def set_analysis(
        self,
        version_id: int,
        state: AnalysisState,
        reports: dict[str, Any] | None = None,
        error: str | None = None,
        out_of_time_s: float | None = None,
    ) -> None:
        """Store the outcome of a version's analysis: its reports (done) or why it failed;
        ``out_of_time_s``: it failed by running past that bound (see :meth:`analyses_to_run`)."""
        with self._tx() as session:
            row = session.get(ModelVersion, version_id)
            if row is None:
                raise NotFound(f"no model version with id {version_id}")
            row.analysis = _encode_analysis(state, reports or {}, error, out_of_time_s)

    def set_warmup(self, version_id: int, warmup: dict[str, Any]) -> None:
        """Replace the warm-up inputs of a version (``warmup`` as :meth:`add_version` takes it)."""
        with self._tx() as session:
            row = session.get(ModelVersion, version_id)
            if row is None:
                raise NotFound(f"no model version with id {version_id}")
            row.warmup = warmup

    def analyses_to_run(self, timeout_s: float) -> list[VersionRecord]:
        """The versions whose analysis is pending, or failed by running past a bound shorter
        than ``timeout_s`` (it may finish now), oldest first."""
        analysis = ModelVersion.analysis
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(
                    or_(
                        analysis[_STATE].as_string() == "pending",
                        and_(
                            analysis[_STATE].as_string() == "failed",
                            analysis[_OUT_OF_TIME].as_float() < timeout_s,
                        ),
                    )
                )
                .order_by(ModelVersion.id)
            ).all()
            return [_version(mv, art) for mv, art in rows]

    def versions_by_id(self, ids: Sequence[int]) -> dict[int, VersionRecord]:
        """The stored versions with these ids."""
        if not ids:
            return {}
        with self._tx() as session:
            rows = session.execute(
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .where(ModelVersion.id.in_(list(ids)))
            ).all()
            return {mv.id: _version(mv, art) for mv, art in rows}

    def models(self, name: str | None = None) -> dict[str, list[VersionRecord]]:
        """Every model (or just ``name``) with its versions, oldest first."""
        with self._tx() as session:
            names_query = select(Model.name).order_by(Model.name)
            if name is not None:
                names_query = names_query.where(Model.name == name)
            result: dict[str, list[VersionRecord]] = {
                n: [] for n in session.execute(names_query).scalars()
            }
            query = (
                select(ModelVersion, Artifact)
                .join(Artifact, Artifact.sha256 == ModelVersion.sha256)
                .order_by(ModelVersion.created_at, ModelVersion.id)
            )
            if name is not None:
                query = query.where(ModelVersion.model == name)
            for mv, art in session.execute(query).all():
                result.setdefault(mv.model, []).append(_version(mv, art))
            return result


_STATE, _ERROR, _OUT_OF_TIME = "state", "error", "out_of_time_s"
"""Keys of the ``analysis`` column besides the TensorRT versions: present only while the
analysis is pending or after it failed (a done analysis is its reports alone, as it always was,
so versions stored before the analysis ran in the background need no migration)."""


def _encode_analysis(
    state: AnalysisState,
    reports: dict[str, Any],
    error: str | None,
    out_of_time_s: float | None = None,
) -> dict[str, Any]:
    if state == "done":
        return dict(reports)
    encoded: dict[str, Any] = {_STATE: state}
    if error is not None:
        encoded[_ERROR] = error
    if out_of_time_s is not None:
        encoded[_OUT_OF_TIME] = out_of_time_s
    return encoded


def _decode_analysis(
    stored: dict[str, Any] | None,
) -> tuple[AnalysisState, dict[str, Any], str | None]:
    raw = dict(stored or {})
    state = raw.pop(_STATE, "done")
    error = raw.pop(_ERROR, None)
    raw.pop(_OUT_OF_TIME, None)
    if state not in ("pending", "failed"):
        return "done", raw, None
    return state, {}, None if error is None else str(error)


def _version(mv: ModelVersion, art: Artifact) -> VersionRecord:
    state, reports, error = _decode_analysis(mv.analysis)
    warmup = mv.warmup or {}
    return VersionRecord(
        id=mv.id,
        model=mv.model,
        version=mv.version,
        sha256=mv.sha256,
        size=art.size,
        inputs=list(mv.inputs),
        outputs=list(mv.outputs),
        created_at=mv.created_at,
        has_qdq=bool(mv.has_qdq),
        analysis=reports,
        analysis_state=state,
        analysis_error=error,
        warmup_given=dict(warmup.get("given") or {}),
        reference_shapes=dict(warmup.get("reference_shapes") or {}),
        reference_error=warmup.get("reference_error"),
        warmup_unknown=bool(warmup.get("unknown", False)),
    )
