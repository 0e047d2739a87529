"""``jetfleet configs``: named delegate configs (layers by scope) and how they resolve."""

from __future__ import annotations

import json
from typing import Any

import click

from controller.cli.operator import api_options, call_api, print_changes
from controller.cli.render import emit_json, table

PRECISIONS = ("fp32", "fp16", "int8", "best")
PREFERENCES = ("sustained_throughput", "lowest_latency")


def parse_shape(text: str) -> dict[str, Any]:
    """``input:1x3x224x224:4x3x224x224:8x3x224x224`` → a ShapeProfile as JSON."""
    parts = text.split(":")
    if len(parts) != 4 or not parts[0]:
        raise click.BadParameter(
            f"{text!r}: expected INPUT:MIN:OPT:MAX with dims like 1x3x224x224", param_hint="--shape"
        )
    try:
        dims = [[int(d) for d in p.lower().split("x")] for p in parts[1:]]
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: dimensions are integers joined by x, e.g. 1x3x224x224",
            param_hint="--shape",
        ) from exc
    return {"input": parts[0], "min": dims[0], "opt": dims[1], "max": dims[2]}


def parse_set(items: tuple[str, ...]) -> dict[str, Any]:
    """``key=json-value`` pairs; ``onnxruntime.<option>=...`` sets one ONNX Runtime option."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected KEY=JSON-VALUE", param_hint="--set")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw  # a bare word is a string: --set power_mode=15W
        head, dot, sub = key.partition(".")
        if dot:
            values.setdefault(head, {})[sub] = value
        else:
            values[key] = value
    return values


def scope_of(default: bool, hw_class: str | None, selector: str | None, device: str | None) -> str:
    """The layer scope named by exactly one of the scope options (``default`` when none)."""
    given = [
        s
        for s in (
            "default" if default else None,
            f"class={hw_class}" if hw_class else None,
            f"selector={selector}" if selector else None,
            f"device={device}" if device else None,
        )
        if s
    ]
    if len(given) > 1:
        raise click.UsageError("give at most one of --default, --class, --selector, --device")
    return given[0] if given else "default"


def _scope_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("--default", "default", is_flag=True, help="The fleet-wide layer."),
            click.option(
                "--class", "hw_class", help="Hardware class, e.g. jetson-orin-nano-8gb/jp6.2."
            ),
            click.option("--selector", help="Devices whose labels match k=v[,k2=v2]."),
            click.option("--device", help="One device by id (highest precedence)."),
        ]
    ):
        func = option(func)
    return func


@click.group()
def configs() -> None:
    """Named delegate configs: fleet default < class < selector < device layers."""


@configs.command("set")
@click.argument("name")
@_scope_options
@click.option("--precision", type=click.Choice(PRECISIONS))
@click.option("--dla-core", type=click.IntRange(min=0), help="DLA core to run on.")
@click.option("--no-gpu-fallback", is_flag=True, help="Fail layers the DLA cannot run.")
@click.option(
    "--fallback",
    type=click.Choice(["onnxruntime", "none"]),
    help="What a device does with a version TensorRT cannot serve: onnxruntime (default: serve "
    "it on ONNX Runtime, saying why) or none (fail the slot).",
)
@click.option(
    "--build-timeout",
    type=click.FloatRange(min=1, max=7 * 24 * 3600),
    help="Seconds a TensorRT build may run before it is killed and --fallback applies "
    "(default: the agent's build_timeout_s).",
)
@click.option("--workspace-mib", type=click.IntRange(min=1))
@click.option("--opt-level", type=click.IntRange(0, 5), help="Builder optimisation level.")
@click.option("--shape", "shapes", multiple=True, help="INPUT:MIN:OPT:MAX, dims 1x3x224x224.")
@click.option("--streams", type=click.IntRange(1, 16), help="Execution contexts.")
@click.option("--max-aux-streams", type=click.IntRange(min=0))
@click.option("--power-mode", help="nvpmodel mode name, e.g. 15W.")
@click.option("--apply-power-mode", is_flag=True, help="Let the agent switch to it.")
@click.option("--jetson-clocks/--no-jetson-clocks", default=None, help="Lock (or free) clocks.")
@click.option("--preference", type=click.Choice(PREFERENCES))
@click.option("--providers", help="ONNX Runtime providers in order, comma-separated.")
@click.option("--set", "extra", multiple=True, help="KEY=JSON-VALUE for any other field.")
@click.option("--replace", is_flag=True, help="Replace the layer's values instead of merging.")
@api_options
def configs_set(
    name: str,
    default: bool,
    hw_class: str | None,
    selector: str | None,
    device: str | None,
    precision: str | None,
    dla_core: int | None,
    no_gpu_fallback: bool,
    fallback: str | None,
    build_timeout: float | None,
    workspace_mib: int | None,
    opt_level: int | None,
    shapes: tuple[str, ...],
    streams: int | None,
    max_aux_streams: int | None,
    power_mode: str | None,
    apply_power_mode: bool,
    jetson_clocks: bool | None,
    preference: str | None,
    providers: str | None,
    extra: tuple[str, ...],
    replace: bool,
    url: str,
    as_json: bool,
) -> None:
    """Set values of one layer of config NAME (merged into the layer unless --replace)."""
    scope = scope_of(default, hw_class, selector, device)
    values: dict[str, Any] = parse_set(extra)
    named: dict[str, Any] = {
        "precision": precision,
        "dla_core": dla_core,
        "gpu_fallback": False if no_gpu_fallback else None,
        "fallback": fallback,
        "build_timeout_s": build_timeout,
        "workspace_mib": workspace_mib,
        "builder_optimization_level": opt_level,
        "shapes": [parse_shape(s) for s in shapes] or None,
        "streams": streams,
        "max_aux_streams": max_aux_streams,
        "power_mode": power_mode,
        "apply_power_mode": True if apply_power_mode else None,
        "jetson_clocks": jetson_clocks,
        "preference": preference,
    }
    values.update({k: v for k, v in named.items() if v is not None})
    if providers:
        ort = values.setdefault("onnxruntime", {})
        ort["providers"] = [p.strip() for p in providers.split(",") if p.strip()]
    if not values:
        raise click.UsageError("give at least one value, e.g. --precision fp16")

    def put(client: Any) -> Any:
        if not replace:
            values.update(_merged_onto(_current_layer(client, name, scope), values))
        return client.put_config(name, scope, values)

    out = call_api(put, url)
    if as_json:
        emit_json(out)
        return
    click.echo(f"config {name}: {scope} = {json.dumps(values, sort_keys=True)}")
    print_changes(out, "republished")


def _current_layer(client: Any, name: str, scope: str) -> dict[str, Any]:
    existing = next((c for c in client.configs() if c["name"] == name), None)
    layers = existing["layers"] if existing else []
    return next((dict(layer["values"]) for layer in layers if layer["scope"] == scope), {})


def _merged_onto(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    merged = {**current, **new}
    if isinstance(current.get("onnxruntime"), dict) and isinstance(new.get("onnxruntime"), dict):
        merged["onnxruntime"] = {**current["onnxruntime"], **new["onnxruntime"]}
    return merged


@configs.command("rm")
@click.argument("name")
@_scope_options
@click.option("--all", "everything", is_flag=True, help="Delete every layer of NAME.")
@api_options
def configs_rm(
    name: str,
    default: bool,
    hw_class: str | None,
    selector: str | None,
    device: str | None,
    everything: bool,
    url: str,
    as_json: bool,
) -> None:
    """Delete one layer of config NAME (or, with --all, the whole config)."""
    scope = None if everything else scope_of(default, hw_class, selector, device)
    out = call_api(lambda c: c.delete_config(name, scope), url)
    if as_json:
        emit_json(out)
        return
    click.echo(f"config {name}: {'deleted' if scope is None else f'{scope} deleted'}")
    print_changes(out, "republished")


@configs.command("ls")
@api_options
def configs_ls(url: str, as_json: bool) -> None:
    """List configs and their layer scopes."""
    out = call_api(lambda c: c.configs(), url)
    if as_json:
        emit_json(out)
        return
    rows = [(c["name"], len(c["layers"]), " ".join(x["scope"] for x in c["layers"])) for c in out]
    click.echo(table(["config", "layers", "scopes"], rows))


@configs.command("show")
@click.argument("name")
@api_options
def configs_show(name: str, url: str, as_json: bool) -> None:
    """Show the layers of config NAME in creation order."""
    out = call_api(lambda c: c.config(name), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (layer["scope"], key, json.dumps(value, sort_keys=True))
        for layer in out["layers"]
        for key, value in sorted(layer["values"].items())
    ]
    click.echo(f"config {out['name']}")
    click.echo(table(["scope", "field", "value"], rows))


@configs.command("resolve")
@click.argument("device_id")
@click.option("--model", "model", required=True, help="NAME or NAME:VERSION.")
@click.option("--config", "config", help="Config name (default: the one the slot uses).")
@api_options
def configs_resolve(
    device_id: str, model: str, config: str | None, url: str, as_json: bool
) -> None:
    """Show the effective config of a model on a device, field by field with its source."""
    out = call_api(lambda c: c.resolve_config(config, device_id, model), url)
    if as_json:
        emit_json(out)
        return
    click.echo(
        f"{out['device_id']} {out['model']}:{out['version']} config "
        f"{out['config'] or '(fleet default)'} class {out['hardware_class'] or '-'}"
    )
    rows = [
        (field, json.dumps(value), out["provenance"].get(field, "default"))
        for field, value in _flatten(out["delegate"]).items()
    ]
    click.echo(table(["field", "value", "source"], rows))
    for problem in out["problems"]:
        click.echo(f"problem: {problem}")


def _flatten(delegate: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in delegate.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[key] = value
    return flat
