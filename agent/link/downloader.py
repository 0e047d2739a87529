"""Fetch model artifacts over HTTP: streamed, resumable, verified, moved into place atomically.

Layout under the state directory: ``downloads/<sha>.part`` while bytes arrive (kept across
restarts so the next attempt resumes with ``Range: bytes=<n>-``), ``models/<sha>.onnx`` once the
size and sha256 match. Bytes that do not match are deleted: nothing half-written stays behind.
This and agent.engines.store_client (the engine store) are the modules that import httpx.
The agent's API token goes only to the controller's own origin (``controller_url``), never to
another host an artifact URL might name.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from agent.durable_files import fsync_dir, sha256_file
from agent.errors import ArtifactUnavailable, DownloadError, IntegrityError, SettingsError
from shared.messages import ArtifactRef
from shared.names import check_sha256

if TYPE_CHECKING:  # httpx loads with the first download, not at agent start (issue 6)
    import httpx

log = logging.getLogger(__name__)

CHUNK = 1 << 16


def model_path(state_dir: Path, sha256: str) -> Path:
    """Where the verified model with ``sha256`` lives (InvalidName unless 64 hex digits)."""
    return state_dir / "models" / f"{check_sha256(sha256)}.onnx"


def part_path(state_dir: Path, sha256: str) -> Path:
    """Where the partial download of ``sha256`` lives (InvalidName unless 64 hex digits)."""
    return state_dir / "downloads" / f"{check_sha256(sha256)}.part"


def resolve_url(url: str, base_url: str | None) -> str:
    """``url`` as is when absolute; joined to ``base_url`` (the controller) when relative."""
    if urlsplit(url).scheme:
        return url
    if base_url is None:
        raise ArtifactUnavailable(
            f"artifact URL {url!r} is relative and no controller URL is set: "
            "set JETFLEET_CONTROLLER_URL"
        )
    return urljoin(base_url.rstrip("/") + "/", url.lstrip("/"))


def controller_tls(ca_file: Path | None) -> ssl.SSLContext | bool:
    """What the agent's HTTP clients verify the controller with: the CA bundle ``ca_file``
    (a controller with a private CA), or the system's CA store when None."""
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise SettingsError("controller_ca_file", f"cannot load {ca_file}: {exc}") from exc


def origin(url: str | None) -> tuple[str, str] | None:
    """(scheme, host:port) of an absolute URL; None for None or a relative one."""
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), f"{(parts.hostname or '').lower()}:{port}"


def is_present(state_dir: Path, ref: ArtifactRef) -> bool:
    """True when the verified model file exists (size checked; the hash was checked on arrival)."""
    path = model_path(state_dir, ref.sha256)
    return path.is_file() and path.stat().st_size == ref.size


class Downloader:
    """Downloads artifacts into one state directory; reuse one instance (it pools connections)."""

    def __init__(
        self,
        state_dir: Path,
        base_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        token: str | None = None,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        """``token``: the agent's API token, sent to ``base_url``'s origin only; ``verify``:
        :func:`controller_tls` (True: the system's CA store)."""

        self._state_dir = state_dir
        self._base_url = base_url
        self._token = token
        self._client_args: dict[str, object] = {
            "transport": transport,
            "timeout": timeout_s,
            "follow_redirects": True,
            "verify": verify,
        }
        self._http: httpx.Client | None = None

    @property
    def _client(self) -> httpx.Client:
        """The connection pool, made on first use."""
        if self._http is None:
            import httpx

            self._http = httpx.Client(**self._client_args)  # type: ignore[arg-type]
        return self._http

    def close(self) -> None:
        """Release the connection pool."""
        if self._http is not None:
            self._http.close()

    def fetch(self, ref: ArtifactRef, on_progress: Callable[[], object] | None = None) -> Path:
        """The verified model file for ``ref``, downloading (or resuming) only what is missing.

        ``on_progress`` runs after every chunk written (the loop's heartbeat).
        """
        final = model_path(self._state_dir, ref.sha256)
        if is_present(self._state_dir, ref):
            if sha256_file(final) == (ref.size, ref.sha256):
                return final
            log.warning("model file %s is corrupt; downloading it again", final)
            final.unlink()
        part = part_path(self._state_dir, ref.sha256)
        part.parent.mkdir(parents=True, exist_ok=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        if part.exists() and part.stat().st_size > ref.size:
            part.unlink()
        if not part.exists() or part.stat().st_size < ref.size:
            url = resolve_url(ref.url, self._base_url)
            self._stream(url, part, ref.size, on_progress)
            got = part.stat().st_size
            if got < ref.size:
                raise DownloadError(f"{url} ended after {got} of {ref.size} bytes; will resume")
        self._verify(part, ref)
        os.replace(part, final)
        fsync_dir(final.parent)
        return final

    def _stream(
        self,
        url: str,
        part: Path,
        expected_size: int,
        on_progress: Callable[[], object] | None = None,
    ) -> None:
        import httpx

        offset = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        authorized = self._token is not None and origin(url) == origin(self._base_url)
        if authorized:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            with self._client.stream("GET", url, headers=headers) as response:
                if response.status_code == 416 and offset:
                    part.unlink()
                    raise DownloadError(f"server refused to resume {url}; retrying from the start")
                if response.status_code >= 400:
                    error = ArtifactUnavailable if response.status_code < 500 else DownloadError
                    if response.status_code in (408, 429):
                        error = DownloadError
                    raise error(
                        f"GET {url} answered HTTP {response.status_code}"
                        + _auth_hint(response.status_code, authorized)
                    )
                mode = "ab" if offset and response.status_code == 206 else "wb"
                written = offset if mode == "ab" else 0
                with part.open(mode) as f:
                    for chunk in response.iter_bytes(CHUNK):
                        written += len(chunk)
                        if written > expected_size:
                            break
                        f.write(chunk)
                        if on_progress is not None:
                            on_progress()
                    f.flush()
                    os.fsync(f.fileno())
                if written > expected_size:
                    part.unlink()
                    raise IntegrityError(
                        f"size mismatch: expected {expected_size} bytes, the server sent more"
                    )
        except httpx.HTTPError as exc:
            raise DownloadError(f"download of {url} failed: {exc}; will resume") from exc

    def _verify(self, part: Path, ref: ArtifactRef) -> None:
        size, actual = sha256_file(part)
        if size != ref.size:
            part.unlink()
            raise IntegrityError(f"size mismatch: expected {ref.size} bytes, got {size}")
        if actual != ref.sha256:
            part.unlink()
            raise IntegrityError(f"sha256 mismatch: expected {ref.sha256}, got {actual}")


def _auth_hint(status: int, sent_token: bool) -> str:
    if status not in (401, 403):
        return ""
    if sent_token:
        return ": the controller refused the agent's API token (enrol again or set api_token)"
    return (
        ": the agent sent no API token (set api_token; it is sent only to controller_url's "
        "origin, which must be the one artifact URLs use)"
    )
