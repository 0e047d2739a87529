"""Download a pushed model version's bytes from the controller (for ``models analyze N:V``)."""

from __future__ import annotations

import hashlib

from controller.client.http import ApiError, ControllerClient


def fetch_model_bytes(base_url: str, name: str, version: str, *, timeout: float = 60.0) -> bytes:
    """The ONNX bytes of ``name:version``, checked against the sha256 the controller stores.

    Raises :class:`~controller.client.http.ApiError` with one line a person can act on.
    """
    with ControllerClient(base_url, timeout=timeout) as client:
        meta = client.model_version(name, version)
        data = client.download(str(meta["download_url"]))
    expected = meta.get("sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise ApiError(
            f"downloaded {name}:{version} does not match its sha256 {expected}; try again"
        )
    return data
