"""The controller's database as the API, fleet, ingest and dashboards use it: one object.

:class:`Repository` puts the stores of one area each together (model versions, devices and
their slots, what devices report, the rollout read model); each method is one transaction that
speaks in :mod:`controller.records`. SQLAlchemy errors are translated into
:mod:`controller.errors` in :mod:`controller.db.session`; callers never see an ORM object or a
SQLAlchemy exception.
"""

from __future__ import annotations

from sqlalchemy import text

from controller.db.catalog_store import CatalogStore
from controller.db.device_store import DeviceStore
from controller.db.report_store import ReportStore
from controller.db.rollout_board import RolloutBoard


class Repository(CatalogStore, DeviceStore, ReportStore, RolloutBoard):
    """The controller's database, one transaction per method."""

    def ping(self) -> None:
        """Raise :class:`DatabaseError` unless the database answers."""
        with self._tx() as session:
            session.execute(text("SELECT 1"))
