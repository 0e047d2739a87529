"""Agent releases, the release each device is ordered to run, and what devices report of their
agent. One transaction per method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from controller.db.device_store import parse_slots, read_agent_update
from controller.db.schema import Artifact, Device
from controller.db.schema_agents import AgentReleaseRow
from controller.db.session import SessionStore, in_chunks
from controller.errors import Conflict
from controller.records import AgentOrderRecord, AgentReleaseRecord, AgentReport


class AgentReleaseStore(SessionStore):
    """The ``agent_releases`` table and the agent columns of ``devices``."""

    def add_release(
        self,
        *,
        version: str,
        arch: str,
        format: str,
        sha256: str,
        size: int,
        python: str | None,
        jetpack: Sequence[str],
        details: Mapping[str, Any],
        pushed_by: str,
    ) -> AgentReleaseRecord:
        """Store a new release (and its artifact row when new); :class:`Conflict` when the
        version, architecture and JetPack lines are stored already (concurrently)."""
        try:
            with self._tx() as session:
                if session.get(Artifact, sha256) is None:
                    session.add(Artifact(sha256=sha256, size=size))
                row = AgentReleaseRow(
                    version=version,
                    arch=arch,
                    format=format,
                    sha256=sha256,
                    size=size,
                    python=python,
                    jetpack=list(jetpack),
                    lines=lines_key(jetpack),
                    details=dict(details),
                    pushed_by=pushed_by,
                )
                session.add(row)
                session.flush()
                return _release(row)
        except IntegrityError as exc:
            raise Conflict(
                f"agent release {version} ({arch}) was stored concurrently; push it again"
            ) from exc

    def set_manifest(self, release_id: int, signed: dict[str, Any]) -> None:
        """Store the release's signed manifest (signed at push, signed again when stale)."""
        with self._tx() as session:
            session.execute(
                update(AgentReleaseRow)
                .where(AgentReleaseRow.id == release_id)
                .values(signed_manifest=signed)
            )

    def find(
        self, version: str, arch: str, jetpack: Sequence[str] = ()
    ) -> AgentReleaseRecord | None:
        """The release ``version`` for ``arch`` and the JetPack lines ``jetpack``, if pushed."""
        with self._tx() as session:
            row = session.execute(
                select(AgentReleaseRow).where(
                    AgentReleaseRow.version == version,
                    AgentReleaseRow.arch == arch,
                    AgentReleaseRow.lines == lines_key(jetpack),
                )
            ).scalar_one_or_none()
            return None if row is None else _release(row)

    def releases(self, version: str | None = None) -> list[AgentReleaseRecord]:
        """Every release (only ``version``'s when given), oldest first."""
        with self._tx() as session:
            query = select(AgentReleaseRow).order_by(AgentReleaseRow.id)
            if version is not None:
                query = query.where(AgentReleaseRow.version == version)
            return [_release(r) for r in session.execute(query).scalars()]

    def set_orders(
        self,
        device_ids: Sequence[str],
        release_ids: Mapping[str, int],
        allow_downgrade: bool,
        confirm_within_s: int | None = None,
    ) -> None:
        """Order each device its release (``release_ids``); devices missing there get none."""
        with self._tx() as session:
            for device_id in device_ids:
                release = release_ids.get(device_id)
                order = (
                    None
                    if release is None
                    else {
                        "release_id": release,
                        "allow_downgrade": allow_downgrade,
                        "confirm_within_s": confirm_within_s,
                    }
                )
                session.execute(
                    update(Device).where(Device.id == device_id).values(agent_order=order)
                )

    def orders(self, device_ids: Sequence[str]) -> dict[str, AgentOrderRecord]:
        """The release each of these devices is ordered to run (devices with none left out)."""
        result: dict[str, AgentOrderRecord] = {}
        with self._tx() as session:
            for chunk in in_chunks(list(device_ids)):
                pairs = session.execute(
                    select(Device.id, Device.agent_order).where(
                        Device.id.in_(chunk), Device.agent_order.is_not(None)
                    )
                ).all()
                ids = {int(o["release_id"]) for _, o in pairs if o}
                if not ids:
                    continue
                rows = session.execute(
                    select(AgentReleaseRow).where(AgentReleaseRow.id.in_(sorted(ids)))
                ).scalars()
                releases = {r.id: _release(r) for r in rows}
                for device_id, order in pairs:
                    release = releases.get(int(order["release_id"])) if order else None
                    if release is not None:
                        allow = bool(order.get("allow_downgrade"))
                        confirm = order.get("confirm_within_s")
                        result[device_id] = AgentOrderRecord(
                            release, allow, int(confirm) if confirm else None
                        )
        return result

    def reports(self, device_ids: Sequence[str]) -> dict[str, AgentReport]:
        """What each of these devices last reported of its agent and its slots."""
        result: dict[str, AgentReport] = {}
        with self._tx() as session:
            for chunk in in_chunks(list(device_ids)):
                rows = session.execute(
                    select(
                        Device.id,
                        Device.observed_generation,
                        Device.agent_version,
                        Device.agent_update,
                        Device.reported_slots,
                    ).where(Device.id.in_(chunk))
                ).all()
                for device_id, generation, version, update_json, slots in rows:
                    result[device_id] = AgentReport(
                        device_id,
                        generation,
                        version,
                        read_agent_update(update_json),
                        parse_slots(slots),
                    )
        return result


def lines_key(jetpack: Sequence[str]) -> str:
    """JetPack lines as part of a release's key: sorted, joined with commas (``""``: any)."""
    return ",".join(sorted(set(jetpack)))


def _release(r: AgentReleaseRow) -> AgentReleaseRecord:
    return AgentReleaseRecord(
        id=r.id,
        version=r.version,
        arch=r.arch,
        format=r.format,
        sha256=r.sha256,
        size=r.size,
        python=r.python,
        jetpack=tuple(str(j) for j in r.jetpack or ()),
        details=dict(r.details or {}),
        signed_manifest=r.signed_manifest,
        pushed_by=r.pushed_by,
        created_at=r.created_at,
    )
