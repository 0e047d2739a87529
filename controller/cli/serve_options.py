"""``jetfleet serve``'s click options, made from the fields of
:class:`~controller.settings.ServeOptions` (option name, help, default, type and bounds), and the
one-line click errors of the settings' own.

Every option defaults to "not given": only what the command line gives reaches the settings
tree, which takes the rest from the option's environment variable or its default.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click
from annotated_types import Ge, Le
from click.core import ParameterSource
from pydantic.fields import FieldInfo

from controller.errors import ControllerError
from controller.settings import BadOption, OptionConflict, ServeOptions, parse_size
from controller.settings.source import opt_of

F = TypeVar("F", bound=Callable[..., Any])
_READABLE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


class Size(click.ParamType[int]):
    """A size option (``--max-upload 2G``): bytes, parsed by :func:`parse_size`."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def serve_options(command: F) -> F:
    """``command`` with one click option per field of :class:`ServeOptions`, in field order."""
    for name, field in reversed(list(ServeOptions.model_fields.items())):
        command = _option(name, field)(command)
    return command


def given_options(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options the command line gave (not the placeholders shown as defaults)."""
    return {
        name: value
        for name, value in values.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }


def as_click_error(exc: ControllerError) -> click.ClickException:
    """The settings' error as click shows it: one line, exit status 2 for a usage error."""
    if isinstance(exc, OptionConflict):
        return click.UsageError(str(exc))
    if isinstance(exc, BadOption):
        return click.BadParameter(exc.message, param_hint=exc.option)
    return click.ClickException(str(exc))


def _option(name: str, field: FieldInfo) -> Callable[[F], F]:
    opt = opt_of(field)
    if opt.flag is None:
        raise TypeError(f"ServeOptions.{name} has no option")
    kw: dict[str, Any] = {"help": field.description, "metavar": opt.metavar}
    inner = _without_none(field.annotation)
    if inner is bool:
        kw["is_flag"] = True
    elif typing.get_origin(inner) is tuple:
        kw["multiple"] = True
    else:
        kw["type"] = _click_type(inner, field, opt.size, opt.readable_file, opt.directory)
    if opt.shown_default is not False:
        shown = field.default if opt.shown_default is True else opt.shown_default
        kw.update(default=shown, show_default=True)
    return click.option(opt.flag, name, **kw)


def _click_type(
    inner: Any, field: FieldInfo, size: bool, readable: bool, directory: bool
) -> click.ParamType[Any] | None:
    if size:
        return Size()
    if readable:
        return _READABLE
    if directory:
        return click.Path(file_okay=False, path_type=Path)
    if typing.get_origin(inner) is Literal:
        return click.Choice([str(c) for c in typing.get_args(inner)])
    low = next((m.ge for m in field.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in field.metadata if isinstance(m, Le)), None)
    if inner is int:
        return click.IntRange(low, high) if low is not None or high is not None else click.INT  # type: ignore[arg-type]
    if inner is float:
        return click.FloatRange(low, high)  # type: ignore[arg-type]
    return None


def _without_none(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation
