"""The OpenAPI document is a contract: schemathesis against a real controller finds no failure.

A real controller (uvicorn on a free port, SQLite, the real Mosquitto) with an admin token is
tested by the ``schemathesis`` CLI over HTTP, every check on, with a fixed seed and a bounded
number of cases per operation: requests the schema calls valid are accepted, requests it calls
invalid are refused, every answer (status, media type, headers, body, ``Allow`` on 405) is the
one declared.

Excluded, and why:

- ``DELETE /api/v1/tokens/{token_id}`` (token revocation): schemathesis links it to the tokens
  it lists and would revoke the admin token the run itself uses; every later request would get
  401. Token revocation is tested in ``tests/integration/auth``.

Allowed refusals of schema-valid requests (``positive_data_acceptance``), and why: these
operations refuse what depends on the bytes or on several fields together, which a JSON Schema
cannot state, with the 400/422 their docs name: an artifact whose bytes do not have the
``sha256`` the query claims, a body that is not an ONNX model / reference NPZ / agent release,
an engine manifest or build failure whose key is not the digest of its validity and content,
a deployment whose delegate config contradicts itself (shape ranks) or names both a delegate
and a config, config layer values that are not DelegateConfig fields of the right types, a model
rollout without its model; and an enrolment token used once already (410, as documented: the
stateful phase enrols with a token it created, then again). Parameters and fields stay checked
everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.server import Controller
from tests.integration.controller.conftest import admin_token, sqlite_settings, start_controller

SEED = 20260
MAX_EXAMPLES = 25
HOOKS = Path(__file__).with_name("openapi_hooks.py")
_DEFAULT_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
CONTENT_RULES = {
    ("POST", "/api/v1/artifacts"): ["400"],
    ("PUT", "/api/v1/models/{name}/versions/{version}"): ["400"],
    ("PUT", "/api/v1/models/{name}/versions/{version}/reference"): ["400", "422"],
    ("POST", "/api/v1/agent/releases"): ["400"],
    ("PUT", "/api/v1/engines/{key}"): ["400"],
    ("PUT", "/api/v1/engines/{key}/failure"): ["400"],
    ("POST", "/api/v1/deployments"): ["400", "422"],
    ("POST", "/api/v1/rollouts"): ["400"],
    ("PUT", "/api/v1/configs/{name}"): ["400"],
    ("POST", "/api/v1/enroll"): ["410"],
}
"""Operations whose refusals depend on content no schema states, and what they may answer."""


def _config(token: str) -> str:
    lines = [
        f"seed = {SEED}",
        "continue-on-failure = true",
        # one worker: its threads parse lambdas with ast.parse at once, and Python 3.11 keeps
        # one AST recursion counter for all threads (CPython gh-106905: a run failed with
        # "SystemError: AST constructor recursion depth mismatch" in hypothesis)
        "workers = 1",
        f'headers = {{ Authorization = "Bearer {token}" }}',
        "[generation]",
        f"max-examples = {MAX_EXAMPLES}",
        'database = "none"',
        "[checks]",
        "enabled = true",
        "[[operations]]",  # one include-name: two include-* keys would match either one
        'include-name = "DELETE /api/v1/tokens/{token_id}"',
        "enabled = false",
    ]
    for (method, path), statuses in CONTENT_RULES.items():
        lines += [
            "[[operations]]",
            f'include-name = "{method} {path}"',
            f"checks.positive_data_acceptance.expected-statuses = "
            f"{json.dumps(_DEFAULT_ACCEPTED + statuses)}",
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def contract_controller(
    mosquitto: str, sqlite_url: str, data_dir: Path, prefix: str
) -> Iterator[Controller]:
    c = start_controller(sqlite_settings(mosquitto, sqlite_url, data_dir, prefix))
    yield c
    c.stop()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_schemathesis_finds_no_failure_against_a_real_controller(
    contract_controller: Controller, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(admin_token(contract_controller, "schemathesis")))
    reports = tmp_path / "reports"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{contract_controller.http_url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--no-color",
        "--report",
        "json",
        "--report-dir",
        str(reports),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path
    )
    took = time.monotonic() - started
    report = json.loads(next(reports.glob("*.json")).read_text())
    cases, operations = report["test_cases"], report["operations"]
    print(
        f"schemathesis {report['schemathesis_version']}: {cases['generated']} cases, "
        f"{operations['tested']} of {operations['total']} operations, "
        f"{cases['with_failures']} failing, {cases['errored']} errored, seed {SEED}, "
        f"{MAX_EXAMPLES} examples per operation, {took:.0f} s"
    )
    assert report["failures"] == [], done.stdout[-20_000:]
    assert report["errors"] == [], done.stdout[-20_000:]
    assert done.returncode == 0, done.stdout[-20_000:]
