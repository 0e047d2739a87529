"""Reuse the controller fixtures (real Mosquitto, SQLite/PostgreSQL, uvicorn) of ingest tests."""

from tests.integration.controller.conftest import (  # noqa: F401
    api,
    controller,
    data_dir,
    db_api,
    db_controller,
    peers,
    prefix,
)
