"""The controller's errors; foreign exceptions are translated into these once, at the adapter.

```
ControllerError            a message a person can act on
├── InvalidInput           the request itself is wrong (HTTP 400)
│   ├── InvalidModel       bytes that are not a valid ONNX model
│   │   └── TooManyNodes   a model over the controller's node limit (HTTP 422)
│   └── InvalidReference   a reference-outputs NPZ that does not fit its model (HTTP 422)
├── Forbidden              the caller may not do this, whatever its role says (HTTP 403)
├── NotFound               a device, model, version or artifact that does not exist (HTTP 404)
├── Conflict               the request contradicts what is stored (HTTP 409)
├── RangeNotSatisfiable    a byte range outside the artifact (HTTP 416)
├── DatabaseError          the database is unreachable or not migrated
├── BusError               the MQTT broker is unreachable or refused a publish
├── StorageError           the object store (S3) is unreachable or refused a request
├── QuotaExceeded          a device passed its upload quota (HTTP 429, with when room frees up)
└── ShuttingDown           the controller is stopping and dropped work in progress (HTTP 503)
```
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of every error the controller reports; the message says what to do."""


class InvalidInput(ControllerError):
    """The request is malformed or names something in a form the controller refuses."""


class InvalidModel(InvalidInput):
    """Uploaded bytes that are not a complete, valid ONNX model."""


class TooManyNodes(InvalidModel):
    """A model with more nodes than ``--max-model-nodes`` allows (422): refused before analysis."""

    def __init__(self, nodes: int, limit: int) -> None:
        super().__init__(
            f"the model has {nodes} nodes, more than this controller's limit of {limit} "
            "(--max-model-nodes): nothing was stored; start `jetfleet serve` with a larger "
            "--max-model-nodes if the model is right"
        )
        self.nodes = nodes
        self.limit = limit


class InvalidReference(InvalidInput):
    """A well-formed upload of reference outputs whose content does not fit the model (422)."""


class Forbidden(ControllerError):
    """The caller's role allows the request, but not for what it names (e.g. a device uploading
    an engine for another device's hardware)."""


class NotFound(ControllerError):
    """The named device, model, version or artifact does not exist."""


class Conflict(ControllerError):
    """The request contradicts stored state (e.g. same version, different bytes)."""


class RangeNotSatisfiable(ControllerError):
    """A requested byte range lies outside the artifact."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


class DatabaseError(ControllerError):
    """The database is unreachable, or its schema is not the one this controller needs."""


class BusError(ControllerError):
    """The MQTT broker is unreachable, or did not acknowledge a publish in time."""


class StorageError(ControllerError):
    """The object store holding artifacts is unreachable, refused the controller's credentials,
    or answered what it should not (HTTP 503 while serving; one line at start)."""


class QuotaExceeded(ControllerError):
    """A device passed its upload quota (429; ``retry_after_s``: when room frees up)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ShuttingDown(ControllerError):
    """The controller is stopping and dropped work in progress (503: send the request again)."""
