"""The controller's database adapter: the only package that imports SQLAlchemy and Alembic.

Tables: :mod:`.schema` and ``schema_*`` (one module per area); :mod:`.session` (engines,
transactions, errors → :mod:`controller.errors`); :mod:`.migrate` (Alembic). Stores, one
transaction per method, returning :mod:`controller.records`: :mod:`.repository` (the one object
most services use, made of :mod:`.catalog_store`, :mod:`.device_store`, :mod:`.report_store`
and the dashboards' :mod:`.rollout_board`), :mod:`.telemetry_store` (batched writes, rollups,
retention; reads in :mod:`.telemetry_reads`, row format in :mod:`.telemetry_rows`),
:mod:`.rollout_store` (with :mod:`.rollout_rows`), :mod:`.engine_store` and :mod:`.lease_rows`,
:mod:`.config_store`, :mod:`.job_store`, :mod:`.token_store`, :mod:`.identity_store`,
:mod:`.signing_store`, :mod:`.rate_store` (enrolment rate limits shared by replicas),
:mod:`.agent_store` (agent releases, each device's order and agent report).

Layer: the bottom of the controller. It may use ``controller.records``, ``controller.errors``,
``controller.settings``, ``shared`` and its own libraries (SQLAlchemy, Alembic, psycopg,
pydantic), nothing above. The two pure decisions it runs inside its transactions, under the row
lock they need, are records' own (:mod:`controller.records.engines`): build leases
(``lease_rows`` → :func:`~controller.records.decide_lease`) and engine replacement
(``engine_store`` → :func:`~controller.records.may_replace`).

Importing the package registers every table module on ``schema.Base.metadata``, so Alembic's
environment and the autogenerate check always see the whole schema.
"""

from controller.db import (
    schema,
    schema_agents,
    schema_health,
    schema_jobs,
    schema_rollouts,
    schema_security,
)

__all__ = [
    "schema",
    "schema_agents",
    "schema_health",
    "schema_jobs",
    "schema_rollouts",
    "schema_security",
]
