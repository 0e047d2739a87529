"""Fetch model artifacts over HTTP: streamed, resumable, verified, moved into place atomically.

Layout under the state directory: ``downloads/<sha>.part`` while bytes arrive (kept across
restarts so the next attempt resumes with ``Range: bytes=<n>-``), ``models/<sha>.onnx`` once the
size and sha256 match. Bytes that do not match are deleted: nothing half-written stays behind.
HTTP goes through :mod:`agent.link.http`: the agent's API token goes only to the controller's own
origin (``controller_url``), never to another host an artifact URL might name, and an answer the
server may give differently later (408, 425, 429, 5xx, no answer) is a :class:`DownloadError`
(retried, resuming the partial file) while any other 4xx is :class:`ArtifactUnavailable`.
A redirect (a controller started with ``--artifact-redirect`` answers 307 to a presigned
object-store URL) is followed with the same ``Range``, without the token; the bytes are
verified the same way.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from agent.durable_files import fsync_dir, sha256_file
from agent.errors import ArtifactUnavailable, DownloadError, IntegrityError
from agent.link.http import HttpClient, Unreachable
from shared.messages import ArtifactRef
from shared.names import check_sha256

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
        timeout_s: float = 30.0,
        token: str | None = None,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        """``token``: the agent's API token, sent to ``base_url``'s origin only; ``verify``:
        :func:`agent.link.http.controller_tls` (True: the system's CA store)."""

        self._state_dir = state_dir
        self._base_url = base_url
        self._http = HttpClient(
            base_url, token=token, verify=verify, timeout_s=timeout_s, follow_redirects=True
        )

    def close(self) -> None:
        """Release the connection pool."""
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
        offset = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        try:
            with self._http.stream("GET", url, headers=headers) as got:
                if got.status == 416 and offset:
                    part.unlink()
                    raise DownloadError(f"server refused to resume {url}; retrying from the start")
                if got.verdict != "ok":
                    error = DownloadError if got.verdict == "transient" else ArtifactUnavailable
                    raise error(
                        f"GET {url} answered HTTP {got.status}"
                        + _auth_hint(got.status, got.sent_token)
                    )
                mode = "ab" if offset and got.status == 206 else "wb"
                written = offset if mode == "ab" else 0
                with part.open(mode) as f:
                    for chunk in got.chunks(CHUNK):
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
        except Unreachable as exc:
            raise DownloadError(f"download of {url} failed: {exc.reason}; will resume") from exc

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
