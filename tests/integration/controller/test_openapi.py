"""The controller's OpenAPI document declares every answer a route can give, with its real body.

Generated clients handle only what ``/openapi.json`` declares. The document is fetched from a
real running controller; what each route "can answer" comes from the table next to the routes
(:mod:`controller.api.answers`), and real requests show the answers match their declarations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import onnx
import pytest
from onnx import TensorProto, helper

from controller.api.answers import ROUTE_ERRORS, answers_of
from controller.server import Controller
from tests.integration.controller.conftest import (
    admin_token,
    bearer,
    new_token,
    sqlite_settings,
    start_controller,
)

UPLOAD_LIMIT = 4096


@pytest.fixture
def small_controller(
    mosquitto: str, sqlite_url: str, data_dir: Path, prefix: str
) -> Iterator[Controller]:
    """A controller with tokens required and a 4 KiB upload limit."""
    settings = sqlite_settings(
        mosquitto, sqlite_url, data_dir, prefix, max_upload_bytes=UPLOAD_LIMIT
    )
    c = start_controller(settings)
    yield c
    c.stop()


@pytest.fixture
def document(small_controller: Controller) -> dict[str, Any]:
    token = admin_token(small_controller)
    answer = httpx.get(f"{small_controller.http_url}/openapi.json", headers=bearer(token))
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


def _operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "responses" in operation
    }


def test_every_operation_declares_every_answer_its_route_can_give(
    document: dict[str, Any],
) -> None:
    operations = _operations(document)
    assert sorted(set(operations) - set(ROUTE_ERRORS)) == [], "routes missing from the table"
    assert sorted(set(ROUTE_ERRORS) - set(operations)) == [], "table rows of no route"
    undeclared = []
    for (method, path), operation in operations.items():
        validated = bool(operation.get("parameters")) or "requestBody" in operation
        for code in sorted(answers_of(method, path, validated)):
            declared = operation["responses"].get(str(code))
            if declared is None:
                undeclared.append(f"{method} {path} {code}: not declared")
            elif method != "HEAD" and "schema" not in declared.get("content", {}).get(
                "application/json", {}
            ):
                undeclared.append(f"{method} {path} {code}: no JSON schema")
    assert undeclared == []
    assert "ErrorBody" in document["components"]["schemas"]


def test_downloads_and_raw_uploads_declare_their_media_types(document: dict[str, Any]) -> None:
    operations = _operations(document)
    download = operations[("GET", "/api/v1/artifacts/{sha256}")]
    for code in ("200", "206"):
        assert list(download["responses"][code]["content"]) == ["application/octet-stream"]
    assert "Content-Range" in download["responses"]["206"]["headers"]
    assert "Content-Range" in download["responses"]["416"]["headers"]
    assert any(p["name"] == "Range" and p["in"] == "header" for p in download["parameters"])
    head = operations[("HEAD", "/api/v1/artifacts/{sha256}")]
    assert {"200", "206", "404", "416"} <= set(head["responses"])
    metrics = operations[("GET", "/metrics")]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain; version=0.0.4; charset=utf-8"]
    reference = operations[("PUT", "/api/v1/models/{name}/versions/{version}/reference")]
    assert "application/x-npz" in reference["requestBody"]["content"]
    for key in [("PUT", "/api/v1/models/{name}/versions/{version}"), ("POST", "/api/v1/artifacts")]:
        assert "application/octet-stream" in operations[key]["requestBody"]["content"]


def test_real_answers_match_their_declared_status_media_type_and_schema(
    small_controller: Controller, document: dict[str, Any]
) -> None:
    operations = _operations(document)
    url = small_controller.http_url
    admin = bearer(admin_token(small_controller))
    viewer = bearer(new_token(small_controller, "openapi-viewer", "viewer"))
    model, other = _onnx_model(1.0), _onnx_model(2.0)
    version_path = "/api/v1/models/{name}/versions/{version}"

    def check(template: str, answer: httpx.Response, status: int) -> None:
        assert answer.status_code == status, answer.text
        declared = operations[(answer.request.method, template)]["responses"].get(str(status))
        assert declared is not None, f"{answer.request.method} {template} answered {status}"
        if answer.request.method == "HEAD" or status == 204:
            return
        media = answer.headers["content-type"].split(";")[0].strip()
        content = declared["content"]
        assert media in {m.split(";")[0] for m in content}, f"{media} not in {list(content)}"
        if media == "application/json":
            schema = next(c["schema"] for m, c in content.items() if m.startswith(media))
            problems = _violations(answer.json(), schema, document)
            assert problems == [], f"{answer.request.method} {template} {status}: {problems}"

    with httpx.Client(base_url=url, timeout=10) as http:
        check("/api/v1/models", http.get("/api/v1/models"), 401)
        check("/api/v1/enroll", http.post("/api/v1/enroll", json={"token": "nope"}), 401)
        check(
            "/api/v1/configs/{name}",
            http.put("/api/v1/configs/c1", json={"scope": "*", "values": {}}, headers=viewer),
            403,
        )
        check("/api/v1/models/{name}", http.get("/api/v1/models/nope", headers=admin), 404)
        check(
            version_path, http.put("/api/v1/models/m/versions/1", content=model, headers=admin), 201
        )
        check(version_path, http.get("/api/v1/models/m/versions/1", headers=admin), 200)
        check(
            version_path, http.put("/api/v1/models/m/versions/1", content=other, headers=admin), 409
        )
        check(
            "/api/v1/artifacts",
            http.post("/api/v1/artifacts", content=b"x" * (UPLOAD_LIMIT + 1), headers=admin),
            413,
        )
        check(
            f"{version_path}/reference",
            http.put("/api/v1/models/m/versions/1/reference", content=b"not npz", headers=admin),
            422,
        )
        check("/api/v1/deployments", http.post("/api/v1/deployments", json={}, headers=admin), 422)
        sha = hashlib.sha256(model).hexdigest()
        artifact = "/api/v1/artifacts/{sha256}"
        ranged = http.get(f"/api/v1/artifacts/{sha}", headers={**admin, "Range": "bytes=0-3"})
        check(artifact, ranged, 206)
        assert ranged.content == model[:4]
        check(artifact, http.get(f"/api/v1/artifacts/{sha}", headers=admin), 200)
        too_far = {**admin, "Range": f"bytes={len(model) + 10}-"}
        check(artifact, http.get(f"/api/v1/artifacts/{sha}", headers=too_far), 416)
        check(artifact, http.head(f"/api/v1/artifacts/{'0' * 64}", headers=admin), 404)


def _onnx_model(scale: float) -> bytes:
    """A one-node model (y = x * scale); different scales make different bytes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    k = helper.make_tensor("k", TensorProto.FLOAT, [1], [scale])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "g", [x], [y], [k])
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    built.ir_version = 8
    onnx.checker.check_model(built)
    data: bytes = built.SerializeToString()
    return data


def _violations(
    value: Any, schema: dict[str, Any], doc: dict[str, Any], at: str = "$"
) -> list[str]:
    """Where ``value`` breaks ``schema`` (the JSON Schema subset FastAPI emits)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _violations(value, doc["components"]["schemas"][name], doc, at)
    if "anyOf" in schema:
        tries = [_violations(value, option, doc, at) for option in schema["anyOf"]]
        return [] if any(not t for t in tries) else [f"{at}: matches no anyOf option {tries}"]
    kind = schema.get("type")
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
        "null": type(None),
    }
    if kind is not None and not isinstance(value, types[kind]):
        return [f"{at}: {type(value).__name__}, not {kind}"]
    problems: list[str] = []
    if isinstance(value, dict):
        problems += [f"{at}.{k}: missing" for k in schema.get("required", []) if k not in value]
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problems += _violations(value[key], sub, doc, f"{at}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += _violations(item, schema["items"], doc, f"{at}[{i}]")
    return problems
