"""The controller's errors; foreign exceptions are translated into these once, at the adapter.

```
ControllerError            a message a person can act on
├── InvalidInput           the request itself is wrong (HTTP 400)
│   └── InvalidModel       bytes that are not a valid ONNX model
├── NotFound               a device, model, version or artifact that does not exist (HTTP 404)
├── Conflict               the request contradicts what is stored (HTTP 409)
├── RangeNotSatisfiable    a byte range outside the artifact (HTTP 416)
├── DatabaseError          the database is unreachable or not migrated
└── BusError               the MQTT broker is unreachable or refused a publish
```
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of every error the controller reports; the message says what to do."""


class InvalidInput(ControllerError):
    """The request is malformed or names something in a form the controller refuses."""


class InvalidModel(InvalidInput):
    """Uploaded bytes that are not a complete, valid ONNX model."""


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
