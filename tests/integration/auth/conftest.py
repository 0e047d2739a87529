"""Reuse the controller fixtures (real uvicorn, real Mosquitto, SQLite/PostgreSQL) and the
agent tests' artifact server."""

from tests.integration.agent.conftest import artifact_server  # noqa: F401
from tests.integration.controller.conftest import (  # noqa: F401
    api,
    controller,
    data_dir,
    db_api,
    db_controller,
    peers,
    prefix,
)
