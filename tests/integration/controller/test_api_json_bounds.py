"""Every JSON body the controller's API reads is bounded in nesting: a deeply
nested body is a 400 with a JSON error, never a 500 or a RecursionError in the log, and the
controller answers the next request. (FastAPI's body parser turns the decoder's RecursionError
into "There was an error parsing the body"; the typed schemas admit no free-form nesting, so
nothing deep is ever stored and re-sent to agents, whose decoder stops at 64 levels.)"""

from __future__ import annotations

import httpx
import pytest

DEEP = 100_000


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/deployments"),
        ("POST", "/api/v1/rollouts"),
        ("PUT", "/api/v1/configs/classifier"),
    ],
)
def test_a_deeply_nested_body_is_refused_with_400(
    api: httpx.Client, method: str, path: str
) -> None:
    body = "[" * DEEP + "]" * DEEP
    answer = api.request(method, path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["detail"]
    assert api.get("/api/v1/models").status_code == 200
