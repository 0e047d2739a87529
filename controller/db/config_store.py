"""Named delegate configs in the database: their layers, one transaction per method."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from controller.db.schema import DelegateConfigLayer, Deployment, utcnow
from controller.db.session import SessionStore
from controller.errors import Conflict, NotFound
from controller.records import ConfigLayerRecord


class ConfigStore(SessionStore):
    """Layers of named delegate configs."""

    def layers(self, name: str | None = None) -> list[ConfigLayerRecord]:
        """Every layer (or those of config ``name``), by config name then creation order."""
        with self._tx() as session:
            query = select(DelegateConfigLayer).order_by(
                DelegateConfigLayer.name, DelegateConfigLayer.id
            )
            if name is not None:
                query = query.where(DelegateConfigLayer.name == name)
            return [_record(row) for row in session.execute(query).scalars()]

    def devices_using_config(self, name: str) -> list[str]:
        """Ids of the devices with at least one slot resolving the config ``name``."""
        with self._tx() as session:
            rows = session.execute(
                select(Deployment.device_id)
                .where(Deployment.config == name)
                .distinct()
                .order_by(Deployment.device_id)
            ).scalars()
            return list(rows)

    def put_layer(self, name: str, scope: str, values: dict[str, Any]) -> ConfigLayerRecord:
        """Create the layer, or replace its values (it keeps its place in creation order)."""
        try:
            with self._tx() as session:
                row = session.execute(
                    select(DelegateConfigLayer).where(
                        DelegateConfigLayer.name == name, DelegateConfigLayer.scope == scope
                    )
                ).scalar_one_or_none()
                now = utcnow()
                if row is None:
                    row = DelegateConfigLayer(
                        name=name, scope=scope, values=values, created_at=now, updated_at=now
                    )
                    session.add(row)
                else:
                    row.values = values
                    row.updated_at = now
                session.flush()
                return _record(row)
        except IntegrityError as exc:
            raise Conflict(f"config {name} scope {scope} was written concurrently; retry") from exc

    def delete(self, name: str, scope: str | None) -> int:
        """Delete one layer (or, without ``scope``, the whole config); NotFound when none."""
        with self._tx() as session:
            query = delete(DelegateConfigLayer).where(DelegateConfigLayer.name == name)
            if scope is not None:
                query = query.where(DelegateConfigLayer.scope == scope)
            count = int(session.execute(query).rowcount)  # type: ignore[attr-defined]
        if not count:
            what = f"config '{name}'" if scope is None else f"scope {scope} in config '{name}'"
            raise NotFound(f"no {what}: see `jetfleet configs show {name}`")
        return count


def _record(row: DelegateConfigLayer) -> ConfigLayerRecord:
    return ConfigLayerRecord(
        name=row.name,
        scope=row.scope,
        values=dict(row.values),
        order=row.id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
