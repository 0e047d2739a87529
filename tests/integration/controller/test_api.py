"""The HTTP API over a real uvicorn: uploads, downloads with Range, deploy errors."""

from __future__ import annotations

from pathlib import Path

import httpx

from controller.demo.sample_models import anomaly, classifier
from shared.canonical import sha256_hex


def stored_files(data_dir: Path) -> list[Path]:
    return sorted(p for p in (data_dir / "artifacts").rglob("*") if p.is_file())


def test_upload_valid_model_is_created_with_its_signature(api: httpx.Client) -> None:
    body = classifier()
    r = api.put("/api/v1/models/classifier/versions/1.0", content=body)
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["sha256"] == sha256_hex(body)
    assert out["size"] == len(body)
    assert out["inputs"][0]["datatype"] == "FP32"
    assert out["download_url"].endswith(f"/api/v1/artifacts/{out['sha256']}")
    assert api.get("/api/v1/models/classifier/versions/1.0").json() == out
    models = api.get("/api/v1/models").json()
    assert [m["name"] for m in models] == ["classifier"]
    assert [v["version"] for v in models[0]["versions"]] == ["1.0"]


def test_truncated_upload_is_400_and_leaves_nothing(api: httpx.Client, data_dir: Path) -> None:
    body = classifier()
    r = api.put("/api/v1/models/classifier/versions/1", content=body[: len(body) // 2])
    assert r.status_code == 400
    assert "ONNX" in r.json()["detail"]
    assert stored_files(data_dir) == []
    assert api.get("/api/v1/models").json() == []
    assert api.get("/api/v1/models/classifier/versions/1").status_code == 404


def test_bad_name_or_version_is_400(api: httpx.Client) -> None:
    assert api.put("/api/v1/models/Bad%20Name/versions/1", content=b"x").status_code == 400
    r = api.put("/api/v1/models/ok/versions/-1", content=b"x")
    assert r.status_code == 400
    assert "version" in r.json()["detail"]


def test_reupload_is_idempotent_and_other_bytes_conflict(api: httpx.Client, data_dir: Path) -> None:
    body = classifier()
    assert api.put("/api/v1/models/classifier/versions/1", content=body).status_code == 201
    again = api.put("/api/v1/models/classifier/versions/1", content=body)
    assert again.status_code == 200
    assert again.json()["sha256"] == sha256_hex(body)
    conflict = api.put("/api/v1/models/classifier/versions/1", content=anomaly())
    assert conflict.status_code == 409
    assert "new version" in conflict.json()["detail"]
    names = {p.name for p in stored_files(data_dir)}
    assert sha256_hex(body) in names  # with its reference outputs (an NPZ artifact)
    assert sha256_hex(anomaly()) not in names  # the conflicting upload left nothing
    # the same bytes under another version are stored once
    assert api.put("/api/v1/models/classifier/versions/2", content=body).status_code == 201
    assert {p.name for p in stored_files(data_dir)} == names


def test_artifact_download_honours_range(api: httpx.Client) -> None:
    body = anomaly()
    sha = api.put("/api/v1/models/anomaly/versions/1", content=body).json()["sha256"]
    url = f"/api/v1/artifacts/{sha}"

    full = api.get(url)
    assert full.status_code == 200
    assert full.content == body

    part = api.get(url, headers={"Range": "bytes=10-99"})
    assert part.status_code == 206
    assert part.content == body[10:100]
    assert part.headers["content-range"] == f"bytes 10-99/{len(body)}"

    tail = api.get(url, headers={"Range": "bytes=-7"})
    assert tail.content == body[-7:]

    resume = api.get(url, headers={"Range": f"bytes={len(body) - 20}-"})
    assert resume.content == body[-20:]

    beyond = api.get(url, headers={"Range": f"bytes={len(body)}-"})
    assert beyond.status_code == 416
    assert beyond.headers["content-range"] == f"bytes */{len(body)}"

    head = api.head(url)
    assert head.status_code == 200
    assert head.headers["content-length"] == str(len(body))


def test_unknown_or_malformed_artifact(api: httpx.Client) -> None:
    assert api.get(f"/api/v1/artifacts/{'0' * 64}").status_code == 404
    assert api.get("/api/v1/artifacts/not-a-sha").status_code == 400


def test_deploy_errors(api: httpx.Client) -> None:
    api.put("/api/v1/models/classifier/versions/1", content=classifier())
    unknown_device = api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "1", "device": "nope"}
    )
    assert unknown_device.status_code == 404
    assert unknown_device.json()["detail"] == "unknown device 'nope'"
    unknown_version = api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "9", "device": "nope"}
    )
    assert unknown_version.status_code == 404
    assert "classifier:9" in unknown_version.json()["detail"]
    both = api.post(
        "/api/v1/deployments",
        json={"model": "classifier", "version": "1", "device": "a", "selector": "x=y"},
    )
    assert both.status_code == 400
    neither = api.post("/api/v1/deployments/remove", json={"model": "classifier"})
    assert neither.status_code == 400
    no_match = api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "1", "selector": "x=y"}
    )
    assert no_match.status_code == 404
    assert "selector" in no_match.json()["detail"]


def test_unknown_device_and_model_are_404(api: httpx.Client) -> None:
    r = api.get("/api/v1/devices/ghost")
    assert r.status_code == 404
    assert r.json()["detail"] == "unknown device 'ghost'"
    assert api.get("/api/v1/devices/ghost/telemetry").status_code == 404
    assert api.get("/api/v1/models/ghost").status_code == 404


def test_health_and_openapi(api: httpx.Client) -> None:
    health = api.get("/healthz").json()
    assert health["status"] == "ok"
    assert (health["broker"], health["database"]) == ("mqtt", "sqlite")  # kinds, no URLs
    paths = api.get("/openapi.json").json()["paths"]
    assert "/api/v1/deployments" in paths
    assert "/api/v1/models/{name}/versions/{version}" in paths
