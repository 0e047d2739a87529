"""What ties a settings field to its ``jetfleet serve`` option and environment variable, the
pydantic-settings source that reads those variables, and one-line errors naming either.

A field of :class:`~controller.settings.serve.ServeOptions` or
:class:`~controller.settings.environment.EnvironmentSettings` carries an :class:`Opt` in its
``Annotated`` metadata; controller/cli/serve_options.py makes the click options from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from controller.errors import InvalidInput


@dataclass(frozen=True)
class Opt:
    """A field's command-line option and environment variable (either may be absent)."""

    flag: str | None = None
    """``--http``; None: set by the environment variable only."""
    env: str | None = None
    """``JETFLEET_DATA_DIR``; None: set by the option only."""
    metavar: str | None = None
    shown_default: bool | str = False
    """``--help`` shows the default: True as it is, a text (``2G``) instead of it."""
    readable_file: bool = False
    """An existing readable file (checked when the option is parsed)."""
    directory: bool = False
    """A directory path (a file there is refused when the option is parsed)."""
    size: bool = False
    """A size in bytes written ``2G``, ``512MiB`` or ``1048576``."""


class OptionConflict(InvalidInput):
    """Options that cannot go together (a usage error: exit status 2)."""


class BadOption(InvalidInput):
    """A bad value of one option (a usage error naming it: exit status 2)."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.message = message
        self.option = option


INVALID = "invalid"
CONFLICT = "conflict"
BAD_OPTION = "bad_option"


def refuse(kind: str, message: str) -> PydanticCustomError:
    """A validator's error that :func:`one_line` turns back into ``kind``'s exception with this
    exact message (``{`` and ``}`` are escaped: the message is no template)."""
    escaped = message.replace("{", "{{").replace("}", "}}")
    return PydanticCustomError(kind, escaped)


def opt_of(field: FieldInfo) -> Opt:
    """The :class:`Opt` of a field (an empty one when it has none)."""
    return next((m for m in field.metadata if isinstance(m, Opt)), Opt())


class OptEnvSource(PydanticBaseSettingsSource):
    """Only the environment variables the fields' :class:`Opt` name, from ``env``: a field
    without one has none (``JETFLEET_BROKER_URL`` is the agent's, not the controller's)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.env = env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        name = opt_of(field).env
        return (self.env.get(name) if name else None), field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, field in self.settings_cls.model_fields.items():
            value, _, _ = self.get_field_value(field, name)
            if value:  # unset or empty: the default
                values[name] = value
        return values


def one_line(
    exc: ValidationError, model: type[BaseSettings], from_env: frozenset[str]
) -> InvalidInput:
    """The first error of ``exc`` as the exception the CLI shows as one line: a validator's own
    message as it was raised, else pydantic's, naming the option or the variable it came from."""
    error = exc.errors(include_url=False)[0]
    loc = error["loc"]
    field = str(loc[0]) if loc else ""
    message = str(error["msg"])
    if error["type"] == CONFLICT:
        return OptionConflict(message)
    info = model.model_fields.get(field)
    opt = opt_of(info) if info is not None else Opt()
    by_env = field in from_env and opt.env is not None and opt.flag is not None
    if error["type"] == INVALID:  # the message names the option, or the variable of no option
        return InvalidInput(f"{opt.env}: {message}" if by_env else message)
    option = opt.flag or opt.env or field
    return BadOption(message, f"{option} (from {opt.env})" if by_env else option)
