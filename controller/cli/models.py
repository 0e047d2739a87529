"""``jetfleet models push|ls|show`` and ``jetfleet artifacts push``: what the controller stores
(HTTP API clients)."""

from __future__ import annotations

import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from controller.cli.operator import api_options, call_api, split_ref
from controller.cli.render import emit_json, table
from controller.client.http import ControllerClient

# --- models ----------------------------------------------------------------------------------


@click.group()
def models() -> None:
    """Model versions stored by the controller."""


NO_REFERENCES_EXIT = 3
"""``models push`` exit status: the version is stored, but its reference outputs could not be
computed (see :func:`reference_warning`)."""


@models.command(
    "push",
    epilog=f"""Exit status: 0 pushed with reference outputs; 1 refused;
{NO_REFERENCES_EXIT} pushed, but reference outputs could not be computed (ONNX Runtime failed on
the inputs tried, or ran past the controller's --reference-timeout): a warning names the
options to give (--shape, --value, --inputs, --reference); deploys of such a version are
refused while ONNX Runtime fails on its inputs.""",
)
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True, help="Model name (lower-case, e.g. detector).")
@click.option("--version", "version", required=True, help="Version label (e.g. 1.2.0).")
@click.option(
    "--reference",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Reference outputs (NPZ: input:<name>, output:<name>, first axis = case) to validate "
    "engines against, instead of the ones computed with ONNX Runtime FP32.",
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="NAME=DIMS",
    help="Shape of an input for warm-up, reference outputs and validation, e.g. "
    "--shape input=1x512 (repeatable; default: dynamic dimensions 1).",
)
@click.option(
    "--value",
    "values",
    multiple=True,
    metavar="NAME=NUMBER",
    help="Fill an input with this number instead of random ones, e.g. --value sr=16000 "
    "(repeatable).",
)
@click.option(
    "--inputs",
    "sample",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Sample inputs (NPZ: one array per input, named after it; a leading axis for several "
    "cases) to compute reference outputs on instead of random ones.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Return once the model is stored, without waiting for its static analysis (it goes on "
    "in the controller: see `jetfleet models show NAME:VERSION`).",
)
@api_options
def models_push(
    path: Path,
    name: str,
    version: str,
    reference: Path | None,
    shapes: tuple[str, ...],
    values: tuple[str, ...],
    sample: Path | None,
    no_wait: bool,
    url: str,
    as_json: bool,
) -> None:
    """Upload an ONNX model as NAME:VERSION, then wait for its static analysis.

    PATH is a .onnx file, or, for a model whose weights are in files beside it (external data),
    the folder holding the .onnx and those files or an archive of it (.tar, .tar.gz, .zip): the
    controller inlines the data into one model."""
    inputs_sha256 = None
    if sample is not None:
        inputs_sha256 = call_api(lambda c: c.push_artifact(sample), url)["sha256"]
    with packed(path) as upload:
        out = call_api(
            lambda c: c.push_model(upload, name, version, shapes, values, inputs_sha256), url
        )
    if reference is not None:
        try:
            call_api(lambda c: c.push_reference(reference, name, version), url)
        except click.ClickException as exc:
            raise click.ClickException(
                f"{name}:{version} is stored, but its reference outputs were refused: {exc.message}"
            ) from exc
        out = call_api(lambda c: c.model_version(name, version), url)
    if not as_json:
        click.echo(
            f"pushed {out['name']}:{out['version']} sha256={out['sha256']} size={out['size']}"
        )
    warning = reference_warning(out)
    if warning is not None and not as_json:
        click.echo(f"warning: {warning}", err=True)
    if not no_wait and out.get("analysis_state") == "pending":
        out = call_api(_analysed(name, version, progress=not as_json), url)
    if as_json:
        emit_json(out | {"warning": warning})
    else:
        for line in analysis_lines(out):
            click.echo(line)
    if warning is not None:
        sys.exit(NO_REFERENCES_EXIT)


@contextmanager
def packed(path: Path) -> Iterator[Path]:
    """``path`` itself, or a folder packed as a temporary .tar.gz (links refused: the controller
    would refuse them too)."""
    if not path.is_dir():
        yield path
        return
    links = [p for p in path.rglob("*") if p.is_symlink()]
    if links:
        raise click.ClickException(
            f"{links[0]} is a symbolic link: copy the file it points at into {path} and push again"
        )
    with tempfile.TemporaryDirectory(prefix="jetfleet-push-") as tmp:
        archive = Path(tmp) / f"{path.name or 'model'}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(path, arcname=path.name or "model")
        yield archive


def reference_warning(version: dict[str, Any]) -> str | None:
    """What the operator must know when a pushed version has no reference outputs (None: it
    has them), naming the options that give inputs the model accepts."""
    error = version.get("reference_error")
    if not error:
        return None
    ref = f"{version['name']}:{version['version']}"
    if version.get("warmup_unknown"):
        return (
            f"{ref} has no reference outputs: {error}. Devices would fail the same way at "
            "warm-up, so deploys of it are refused. Push the same file again with inputs the "
            "model accepts: --shape NAME=DIMS (e.g. --shape input=1x512), --value NAME=NUMBER "
            "(e.g. --value sr=16000) or --inputs sample.npz; or give --reference file.npz"
        )
    return (
        f"{ref} has no reference outputs: {error}. Devices will check warm-up outputs for "
        "NaN/Inf only; give --reference file.npz (or a longer --reference-timeout on the "
        "controller) to validate engines against outputs"
    )


ANALYSIS_WAIT_S = 600.0
"""How long ``models push`` waits for the analysis (the controller bounds each run, 120 s by
default, but versions pushed just before wait their turn)."""


def _analysed(name: str, version: str, progress: bool) -> Callable[[ControllerClient], Any]:
    """Poll ``name:version`` until its analysis is no longer pending (or ANALYSIS_WAIT_S)."""

    def wait(client: ControllerClient) -> Any:
        if progress:
            click.echo(
                f"analysing {name}:{version} on the controller (--no-wait does not wait)...",
                err=True,
            )
        deadline = time.monotonic() + ANALYSIS_WAIT_S
        while True:
            out = client.model_version(name, version)
            if out.get("analysis_state") != "pending" or time.monotonic() > deadline:
                return out
            time.sleep(0.5)

    return wait


def analysis_lines(version: dict[str, Any]) -> list[str]:
    """Where the version's analysis stands, or its verdict per TensorRT version."""
    state = version.get("analysis_state", "done")
    if state == "pending":
        return ["  analysis pending (the controller runs it after the push)"]
    if state == "failed":
        return [f"  analysis failed: {version.get('analysis_error')}"]
    lines = []
    for trt, summary in version.get("delegation", {}).items():
        lines.append(f"  trt {trt:<5}{summary['line']}")
        if summary.get("tensorrt") == "builds":
            lines.append(f"  {'':<9}tensorrt: builds")
        elif summary.get("tensorrt") == "falls_back":
            why = summary.get("tensorrt_reason") or "see models analyze"
            lines.append(f"  {'':<9}tensorrt: falls back to ONNX Runtime: {why}")
    return lines


@models.command("ls")
@api_options
def models_ls(url: str, as_json: bool) -> None:
    """List models and their versions."""
    out = call_api(lambda c: c.models(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        (v["name"], v["version"], v["sha256"][:12], v["size"], v["created_at"][:19])
        for m in out
        for v in m["versions"]
    ]
    click.echo(table(["model", "version", "sha256", "bytes", "created"], rows))


@models.command("show")
@click.argument("ref")
@api_options
def models_show(ref: str, url: str, as_json: bool) -> None:
    """Show NAME:VERSION (or every version of NAME)."""
    name, version = split_ref(ref)
    if version is None:
        versions = call_api(lambda c: c.model(name), url)["versions"]
    else:
        versions = [call_api(lambda c: c.model_version(name, version), url)]
    if as_json:
        emit_json(versions if version is None else versions[0])
        return
    for v in versions:
        click.echo(f"{v['name']}:{v['version']}")
        click.echo(f"  sha256   {v['sha256']}")
        click.echo(f"  size     {v['size']} bytes")
        click.echo(f"  created  {v['created_at']}")
        click.echo(f"  download {v['download_url']}")
        for kind in ("inputs", "outputs"):
            for t in v[kind]:
                click.echo(f"  {kind[:-1]:<8} {t['name']} {t['datatype']} {t['shape']}")
        for line in analysis_lines(v):
            click.echo(line)
        for found in call_api(_profiles_of(v["name"], v["version"]), url):
            p = found["profile"]
            top = ", ".join(f"{o['op_type']} {o['share']:.0%} {o['device']}" for o in p["ops"][:5])
            click.echo(f"  profile {found['device_id']}: {p['per_run_ms']:.3f} ms/run; {top}")


def _profiles_of(name: str, version: str) -> Callable[[ControllerClient], Any]:
    return lambda c: c.version_profiles(name, version)


# --- artifacts -------------------------------------------------------------------------------


@click.group()
def artifacts() -> None:
    """Content-addressed blobs a config can name (INT8 calibration caches)."""


@artifacts.command("push")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@api_options
def artifacts_push(path: Path, url: str, as_json: bool) -> None:
    """Upload a file; prints the sha256 to use, e.g. --set calibration_cache_sha256=<sha256>."""
    out = call_api(lambda c: c.push_artifact(path), url)
    if as_json:
        emit_json(out)
        return
    click.echo(f"sha256={out['sha256']} size={out['size']}")
