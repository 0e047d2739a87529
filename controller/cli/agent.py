"""``jetfleet agent``: push and list agent releases, and roll one out to the fleet in waves.

A rollout of an agent release is a rollout like a model's (``jetfleet rollouts ls|show|pause|
resume|abort`` show and steer it, with its kind): ``agent rollout start`` creates one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from controller.cli.operator import api_options, call_api
from controller.cli.render import ago, emit_json, table
from controller.cli.rollout_options import rollout_options, spec_body
from controller.client.http import CHUNK

PROGRESS_EVERY = 8 * CHUNK
"""Bytes between two progress lines of an upload."""


@click.group()
def agent() -> None:
    """The fleet's own agent: releases and rollouts of them."""


@agent.group()
def releases() -> None:
    """Agent releases (.deb packages or release trees), signed with the fleet key."""


def _chunks(path: Path, show: bool) -> Iterator[bytes]:
    """The file's bytes, a progress line on stderr every few MiB and at the end."""
    total = path.stat().st_size
    sent = shown = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            sent += len(chunk)
            if show and (sent - shown >= PROGRESS_EVERY or sent == total):
                shown = sent
                percent = 100 * sent // max(total, 1)
                click.echo(f"uploading {path.name}: {sent}/{total} bytes ({percent}%)", err=True)
            yield chunk


@releases.command("push")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@api_options
def releases_push(path: Path, url: str, as_json: bool) -> None:
    """Push an agent release: the jetfleet-agent .deb, or its release tree as a .tar.gz with
    release.json at its top. Version and architecture are read from the file."""
    out = call_api(lambda c: c.push_agent_release(_chunks(path, show=not as_json)), url)
    if as_json:
        emit_json(out)
        return
    signed = f"signed by {out['key_id']}" if out["signed"] else "not signed"
    click.echo(
        f"pushed agent release {out['version']} ({out['arch']}, {out['format']}) "
        f"sha256={out['sha256']} size={out['size']}, {signed}"
    )


@releases.command("ls")
@api_options
def releases_ls(url: str, as_json: bool) -> None:
    """List agent releases, oldest push first."""
    out = call_api(lambda c: c.agent_releases(), url)
    if as_json:
        emit_json(out)
        return
    rows = [
        [
            r["version"],
            r["arch"],
            r["format"],
            r["python"],
            ",".join(r["jetpack"]) or None,
            r["size"],
            r["sha256"][:12],
            r["pushed_by"],
            ago(r["created_at"]),
        ]
        for r in out
    ]
    headers = ["version", "arch", "format", "python", "jetpack", "size", "sha256", "by", "pushed"]
    click.echo(table(headers, rows))


@agent.group()
def rollout() -> None:
    """Roll an agent release out in waves (steer it with `jetfleet rollouts`)."""


@rollout.command("start")
@click.argument("version")
@rollout_options
@click.option(
    "--allow-downgrade", is_flag=True, help="Allow a release older than a device's agent."
)
@api_options
def rollout_start(
    version: str, allow_downgrade: bool, url: str, as_json: bool, **options: Any
) -> None:
    """Start a rollout of agent release VERSION: each targeted device gets the build for its
    architecture and JetPack line; devices that cannot take it are skipped with the reason.
    The first device that fails stops it (unless --max-failures says otherwise)."""
    body = {
        "kind": "agent",
        "version": version,
        "allow_downgrade": allow_downgrade,
        **spec_body(options),
    }
    out = call_api(lambda c: c.start_agent_rollout(body), url)
    if as_json:
        emit_json(out)
        return
    waves = out["waves"]
    skipped = [t for t in out.get("targets") or [] if t["status"] == "skipped"]
    click.echo(
        f"started rollout {out['id']}: agent release {version} to "
        f"{sum(w['devices'] for w in waves) - len(skipped)} device(s) in "
        f"{len(waves)} wave(s), {len(skipped)} skipped"
    )
    for target in skipped:
        click.echo(f"skipped {target['device_id']}: {target['reason']}", err=True)
    click.echo(f"follow it: jetfleet rollouts watch {out['id']}")
