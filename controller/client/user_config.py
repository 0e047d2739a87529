"""Where the CLI finds the controller and its token: options, environment, the user's config file.

``jetfleet login`` writes ``$XDG_CONFIG_HOME/jetfleet/config.toml`` (default ``~/.config``,
mode 0600) with ``url``, ``token`` and optionally ``ca_file``. For every API command:

- URL: ``--url`` > ``JETFLEET_URL`` > the saved ``url`` > ``http://127.0.0.1:8080``
- token: ``--token`` > ``JETFLEET_TOKEN`` > the saved ``token`` (only for the saved ``url``)
- CA bundle: ``--ca-file`` > ``JETFLEET_CA_FILE`` > the saved ``ca_file`` (saved ``url`` only)

The saved token is never sent to another controller than the one it was saved for.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import click

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "JETFLEET_URL"
TOKEN_ENV = "JETFLEET_TOKEN"  # noqa: S105 - a variable name
CA_ENV = "JETFLEET_CA_FILE"
META_TOKEN = "jetfleet.token"  # noqa: S105 - a key name
META_CA = "jetfleet.ca_file"


class ConfigFileError(click.ClickException):
    """The user's config file cannot be read or written; the message names it."""


@dataclass(frozen=True)
class UserConfig:
    """What ``jetfleet login`` saved."""

    url: str | None = None
    token: str | None = None
    ca_file: str | None = None


@dataclass(frozen=True)
class Credentials:
    """What one API client sends: a bearer token and the CA bundle to verify HTTPS with."""

    token: str | None = None
    ca_file: str | None = None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/jetfleet/config.toml`` (``~/.config`` when unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jetfleet" / "config.toml"


def load(path: Path | None = None) -> UserConfig:
    """The saved config; empty when there is no file."""
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return UserConfig()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(
            f"cannot read {path}: {exc}; fix it or run `jetfleet login` again"
        ) from exc
    values = {k: data.get(k) for k in ("url", "token", "ca_file")}
    wrong = [k for k, v in values.items() if v is not None and not isinstance(v, str)]
    if wrong:
        raise ConfigFileError(f"{path}: {', '.join(wrong)} must be strings; run `jetfleet login`")
    return UserConfig(**values)


def save(config: UserConfig, path: Path | None = None) -> Path:
    """Write the config atomically, readable by the user only (0600, folder 0700)."""
    path = path or config_path()
    lines = ["# written by `jetfleet login`; holds an API token: keep it private"]
    for key in ("url", "token", "ca_file"):
        value = getattr(config, key)
        if value is not None:
            lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, ("\n".join(lines) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def same_controller(a: str | None, b: str | None) -> bool:
    """True when two base URLs name the same controller (scheme, host, port and path)."""
    if not a or not b:
        return False

    def key(url: str) -> tuple[str, str, int | None, str]:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        try:
            port = parts.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = None
        return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")

    return key(a) == key(b)


def resolve(
    url: str,
    *,
    token: str | None,
    ca_file: str | None,
    env: Mapping[str, str],
    saved: UserConfig,
) -> Credentials:
    """Pure precedence rules (module docstring): options, then environment, then the file."""
    same = same_controller(url, saved.url)
    return Credentials(
        token=token or env.get(TOKEN_ENV) or (saved.token if same else None),
        ca_file=ca_file or env.get(CA_ENV) or (saved.ca_file if same else None),
    )


def ambient(url: str) -> Credentials:
    """The credentials for ``url`` in this CLI invocation (``--token``/``--ca-file`` of the
    running command, the environment, the config file)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    return resolve(
        url,
        token=meta.get(META_TOKEN),
        ca_file=meta.get(META_CA),
        env=os.environ,
        saved=load(),
    )


def saved_url() -> str:
    """The URL ``jetfleet login`` saved, else the default (``--url``'s default)."""
    try:
        return load().url or DEFAULT_URL
    except ConfigFileError:
        return DEFAULT_URL
