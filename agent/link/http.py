"""The agent's one HTTP adapter: clients to the controller, and what each answer means.

Four parts of the agent speak HTTP: the artifact downloader, the engine store client, enrolment
and the doctor's health probe. Each used to build its own httpx client and read status codes its
own way (408/429 retried by one, every 4xx final for another), so a controller answering 429
under load failed a slot for good on one path and was retried on the other. Here, once:

- :class:`HttpClient` builds the connection pool: base URL, the agent's bearer token (sent only
  to the base URL's origin, never to another host an absolute URL names), TLS verification
  (:func:`controller_tls`), timeouts, redirects.
- :func:`classify` reads a status: ``transient`` (408, 425, 429 and every 5xx: the same request
  may succeed later), ``permanent`` (any other 4xx: it will not), ``ok`` below 400.
- A request that got no answer at all (refused or reset connection, DNS, timeout, TLS) raises
  :class:`Unreachable`, a :class:`~agent.errors.TransientError`; ``tls`` says a certificate
  check failed, for the doctor's verdict.

Callers see :class:`Answer` and :class:`Streamed`, never httpx types: this is the only agent
module that imports httpx (an import-linter contract in pyproject.toml), and it imports it with
the first request, not at agent start (``agent.settings`` imports enrolment; idle RSS).

Concurrency: one :class:`HttpClient` may serve several threads (the resolver's lease keeper
renews while the loop thread builds); httpx's client is thread-safe and the pool is made once,
under a lock.
"""

from __future__ import annotations

import json as jsonlib
import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from agent.errors import SettingsError, TransientError

if TYPE_CHECKING:
    import httpx

Verdict = Literal["ok", "transient", "permanent"]

TRANSIENT_STATUSES = frozenset({408, 425, 429})
"""4xx statuses that say "not now" rather than "no": timeout, too early, too many requests."""


def classify(status: int) -> Verdict:
    """``ok`` below 400; ``transient`` for 408, 425, 429 and 5xx; ``permanent`` for other 4xx."""
    if status < 400:
        return "ok"
    if status >= 500 or status in TRANSIENT_STATUSES:
        return "transient"
    return "permanent"


class Unreachable(TransientError):
    """No HTTP answer: the connection was refused or reset, DNS failed, a timeout, TLS.

    ``reason`` is the library's words, ``kind`` its exception name; ``tls`` is True when a
    certificate check failed somewhere in the chain (the fix is a CA file, not a restart).
    """

    def __init__(self, reason: str, kind: str, tls: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.tls = tls


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


@dataclass(frozen=True)
class Answer:
    """A complete HTTP answer; ``headers`` has lower-case names."""

    status: int
    content: bytes
    headers: Mapping[str, str]
    reason: str
    sent_token: bool
    """Whether the agent's token went with the request (its origin was the base URL's)."""

    @property
    def verdict(self) -> Verdict:
        return classify(self.status)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return jsonlib.loads(self.content)


class Streamed:
    """An answer whose body is read in chunks (:meth:`HttpClient.stream`)."""

    def __init__(self, response: httpx.Response, sent_token: bool) -> None:
        self._response = response
        self.status = response.status_code
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in response.headers.items()}
        self.sent_token = sent_token

    @property
    def verdict(self) -> Verdict:
        return classify(self.status)

    def chunks(self, size: int) -> Iterator[bytes]:
        """The body, ``size`` bytes at a time (a cut connection raises Unreachable)."""
        yield from self._response.iter_bytes(size)


def _unreachable(exc: BaseException) -> Unreachable:
    return Unreachable(str(exc) or type(exc).__name__, type(exc).__name__, _caused_by_tls(exc))


def _caused_by_tls(exc: BaseException) -> bool:
    """True when a certificate check failed somewhere in ``exc``'s chain."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class HttpClient:
    """A connection pool for one base URL (the controller); reuse it, :meth:`close` it.

    ``url`` arguments are paths under ``base_url`` or absolute URLs. ``token`` (the agent's API
    token) is sent as ``Authorization: Bearer`` only to ``base_url``'s origin.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        verify: bool | ssl.SSLContext = True,
        timeout_s: float = 30.0,
        follow_redirects: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self._token = token
        self._verify = verify
        self._timeout_s = timeout_s
        self._follow_redirects = follow_redirects
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool (a later request makes a new one)."""
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def url(self, path_or_url: str) -> str:
        """``path_or_url`` as is when absolute, else under ``base_url`` (ValueError: none)."""
        if urlsplit(path_or_url).scheme:
            return path_or_url
        if self.base_url is None:
            raise ValueError(f"{path_or_url!r} is relative and this client has no base URL")
        return f"{self.base_url}/{path_or_url.lstrip('/')}"

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        content: bytes | str | Iterable[bytes] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send one request and read the whole answer; Unreachable when none came."""
        import httpx

        target = self.url(url)
        sent, all_headers = self._headers(target, headers)
        try:
            response = self._client().request(
                method,
                target,
                params=params,
                content=content,
                json=json,
                headers=all_headers,
            )
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from exc
        return Answer(
            status=response.status_code,
            content=response.content,
            headers={k.lower(): v for k, v in response.headers.items()},
            reason=response.reason_phrase,
            sent_token=sent,
        )

    @contextmanager
    def stream(
        self, method: str, url: str, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[Streamed]:
        """``with client.stream("GET", url) as got: for chunk in got.chunks(n): ...``.

        A connection that fails before or while the body arrives raises Unreachable here.
        """
        import httpx

        target = self.url(url)
        sent, all_headers = self._headers(target, headers)
        try:
            with self._client().stream(method, target, headers=all_headers) as response:
                yield Streamed(response, sent)
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from exc

    def _headers(
        self, target: str, headers: Mapping[str, str] | None
    ) -> tuple[bool, dict[str, str]]:
        merged = dict(headers or {})
        here = origin(target)
        sent = self._token is not None and here is not None and here == origin(self.base_url)
        if sent:
            merged["Authorization"] = f"Bearer {self._token}"
        return sent, merged

    def _client(self) -> httpx.Client:
        """The connection pool, made on first use."""
        with self._lock:
            if self._http is None:
                import httpx

                self._http = httpx.Client(
                    timeout=self._timeout_s,
                    verify=self._verify,
                    follow_redirects=self._follow_redirects,
                )
            return self._http
