"""Path and query parameters, declared once with the rules the server checks them by.

Each alias states in the OpenAPI document the pattern (or limits) of the check that refuses a
bad value, taken from the constant that check uses (:mod:`shared.wire_model`,
:mod:`shared.topics`, :mod:`shared.jobs`, :mod:`shared.hardware_class`, the selector and scope
grammars of :mod:`controller.fleet`, tuning tags of :mod:`controller.artifacts.engines`), so a
client can tell a valid request before sending it.

The names, digests, scopes and selectors are *declared* here (``json_schema_extra``) and still
checked where they are used (``shared.names``, ``Catalog.check_names``, ``parse_scope``...):
those answer 400 with a message saying what is expected, which clients and the CLI show as it
is; FastAPI's own pattern check would answer a 422 listing a regular expression instead.
``tests/integration/controller/test_openapi_contract.py`` runs schemathesis against a real
controller to hold the two together. Timestamps (:data:`shared.timestamps.Timestamp`) are
enforced by FastAPI itself.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from controller.fleet.config_layers import SCOPE_PATTERN
from shared.engine_keys import TUNING_PATTERN
from shared.jobs import JOB_ID_PATTERN
from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import MODEL_NAME_PATTERN, SHA256_PATTERN, VERSION_PATTERN

SHA256_TEXT = "64 lower-case hex digits."
NAME_TEXT = "1-64 of a-z 0-9 . _ - starting with a-z or 0-9."
VERSION_TEXT = "1-64 of A-Z a-z 0-9 . + _ - starting with a letter or digit."
DEVICE_TEXT = "1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit."
SCOPE_TEXT = "default | class=<hardware class> | selector=k=v[,k2=v2] | device=<id>"
SELECTOR_DOC = "k=v[,k2=v2][,k3!=v3]; all must hold."
TUNING_TEXT = "A tuning tag (e.g. 15W, MAXN+clocks, default): printable ASCII."


def rule(pattern: str, **limits: Any) -> dict[str, Any]:
    """The ``json_schema_extra`` declaring ``pattern`` (and ``limits``) of a checked string."""
    return {"pattern": pattern, **limits}


def _path(pattern: str, description: str) -> Any:
    return Path(description=description, json_schema_extra=rule(pattern))


def _query(pattern: str, description: str, **kwargs: Any) -> Any:
    return Query(description=description, json_schema_extra=rule(pattern), **kwargs)


Sha256Path = Annotated[str, _path(SHA256_PATTERN, SHA256_TEXT)]
EngineKeyPath = Annotated[str, _path(SHA256_PATTERN, "The engine key: " + SHA256_TEXT)]
ModelNamePath = Annotated[str, _path(MODEL_NAME_PATTERN, NAME_TEXT)]
VersionPath = Annotated[str, _path(VERSION_PATTERN, VERSION_TEXT)]
ConfigNamePath = Annotated[str, _path(MODEL_NAME_PATTERN, "Named like a model: " + NAME_TEXT)]
DeviceIdPath = Annotated[str, _path(DEVICE_ID_PATTERN, DEVICE_TEXT)]
JobIdPath = Annotated[str, _path(JOB_ID_PATTERN, "The job's id.")]

Sha256Query = Annotated[str | None, _query(SHA256_PATTERN, SHA256_TEXT)]
ScopeQuery = Annotated[str | None, _query(SCOPE_PATTERN, SCOPE_TEXT)]
TuningQuery = Annotated[str, _query(TUNING_PATTERN, TUNING_TEXT)]
MaybeTuningQuery = Annotated[str | None, _query(TUNING_PATTERN, TUNING_TEXT)]
DeviceIdQuery = Annotated[str, _query(DEVICE_ID_PATTERN, DEVICE_TEXT)]
LabelFilterQuery = Annotated[
    str | None,
    _query(
        r"^(?:[^=]+=[\s\S]*)?$", "key=value: only devices with that label.", examples=["site=a"]
    ),
]
