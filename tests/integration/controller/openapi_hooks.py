"""Schemathesis hooks for the OpenAPI contract test (loaded by the schemathesis CLI itself).

``POST /api/v1/agent/releases`` takes a .deb or a .tar.gz as its raw body; schemathesis sends
raw bytes only for the media types it knows, so these two are sent as it sends
``application/octet-stream``.
"""

from __future__ import annotations

import schemathesis
from schemathesis.transport.requests import binary_serializer

schemathesis.serializer("application/vnd.debian.binary-package", "application/gzip")(
    binary_serializer
)
