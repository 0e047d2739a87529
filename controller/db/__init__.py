"""The controller's database adapter: the only package that imports SQLAlchemy and Alembic.

Importing the package registers every table module on ``schema.Base.metadata``, so Alembic's
environment and the autogenerate check always see the whole schema.
"""

from controller.db import schema, schema_health, schema_jobs, schema_rollouts, schema_security

__all__ = ["schema", "schema_health", "schema_jobs", "schema_rollouts", "schema_security"]
