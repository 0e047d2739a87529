"""``jetfleet-agent self-check``: can this release run here? The update's gate before a switch.

Run by the updater with the new release's own entry (so under the new release's Python and
code, with the running agent's environment and ``--config``), it answers in one JSON object:
the release starts its interpreter and imports the whole agent, parses the agent's settings,
and probes the TensorRT host interpreter the way ``jetfleet-agent doctor`` does
(:func:`agent.hardware.trt_python.find_tensorrt_python`); a device configured with
``runtime = tensorrt`` whose TensorRT no interpreter imports fails the check. Exit 0: it may
be switched to; 1: it must not. ``--release DIR`` runs that check of the release in ``DIR``
from the running agent (the operator's view of what the updater runs).

:func:`check_release` is the updater's side: it runs a release's entry with ``self-check`` and
reads the answer.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from agent.errors import SettingsError
from agent.hardware.trt_python import find_tensorrt_python
from agent.settings import load_settings

CHECK_TIMEOUT_S: Final = 300.0
"""Importing the agent and probing every TensorRT candidate takes seconds; a Jetson's CUDA
initialisation in the probe, tens of seconds."""

MODULES: Final = ("agent.daemon", "agent.cli")


@dataclass(frozen=True)
class CheckAnswer:
    """The release's answer: its version, and what stops it (empty: it may run)."""

    version: str | None
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()


def self_check(config: Path | None) -> dict[str, Any]:
    """Run the checks in this process; the JSON answer."""
    problems: list[str] = []
    notes: list[str] = [f"python {sys.version.split()[0]} at {sys.executable}"]
    for module in MODULES:  # the whole agent imports (by name: the daemon is a layer above)
        importlib.import_module(module)
    try:
        settings = load_settings(config, with_identity=False)
    except SettingsError as exc:
        problems.append(f"the agent's settings do not parse: {exc}")
    else:
        found = find_tensorrt_python(settings.tensorrt_python)
        if found.interpreter is not None:
            notes.append(f"TensorRT {found.tensorrt_version} under {found.interpreter}")
        elif settings.runtime == "tensorrt":
            problems.append(
                f"runtime = tensorrt but no interpreter imports TensorRT: {found.reason}"
            )
        else:
            notes.append(f"no TensorRT host interpreter ({found.reason}); ONNX Runtime serves")
    try:
        version = importlib.metadata.version("jetfleet")  # what agent.daemon reports
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return {"version": version, "problems": problems, "notes": notes}


def check_release(entry: Path, args: list[str], timeout_s: float = CHECK_TIMEOUT_S) -> CheckAnswer:
    """Run ``entry self-check --json ARGS`` (the release's own program) and read its answer.

    ``args``: the running agent's options (``--config PATH``). A release that does not start,
    times out or answers something else has that as its one problem.
    """
    try:
        done = subprocess.run(
            [str(entry), "self-check", "--json", *args],
            capture_output=True,
            timeout=timeout_s,
            env=dict(os.environ),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CheckAnswer(None, (f"its self-check ran past {timeout_s:.0f} s",))
    except OSError as exc:
        return CheckAnswer(None, (f"its entry {entry} does not start: {exc.strerror or exc}",))
    try:
        answer = json.loads(done.stdout.decode(errors="replace").strip().splitlines()[-1])
        version = answer["version"]
        problems = tuple(str(p) for p in answer["problems"])
        notes = tuple(str(n) for n in answer.get("notes", ()))
    except (IndexError, ValueError, KeyError, TypeError):
        tail = (done.stderr or done.stdout).decode(errors="replace").strip()[-300:]
        return CheckAnswer(None, (f"its self-check exited {done.returncode}: {tail}",))
    if done.returncode != 0 and not problems:
        problems = (f"its self-check exited {done.returncode}",)
    return CheckAnswer(str(version), problems, notes)


@click.command("self-check")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML settings file; JETFLEET_* environment variables win over it.",
)
@click.option(
    "--release",
    "release",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Check the release in this directory (runs its entry) instead of this program.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON line.")
def self_check_command(config: Path | None, release: Path | None, as_json: bool) -> None:
    """Check that this agent release can run here (the updater's gate before switching)."""
    if release is not None:
        try:
            entry = json.loads((release / "release.json").read_bytes())["entry"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            click.echo(f"error: {release} is not a release (release.json: {exc})", err=True)
            sys.exit(2)
        if not isinstance(entry, str) or ".." in entry.split("/") or entry.startswith("/"):
            click.echo(f"error: {release}/release.json names no entry inside it", err=True)
            sys.exit(2)
        args = ["--config", str(config)] if config is not None else []
        got = check_release(release / entry, args)
        answer: dict[str, Any] = {
            "version": got.version,
            "problems": list(got.problems),
            "notes": list(got.notes),
        }
    else:
        answer = self_check(config)
    if as_json:
        click.echo(json.dumps(answer))
    else:
        click.echo(f"release {answer['version']}")
        for note in answer["notes"]:
            click.echo(f"ok   {note}")
        for problem in answer["problems"]:
            click.echo(f"FAIL {problem}")
    sys.exit(1 if answer["problems"] else 0)
