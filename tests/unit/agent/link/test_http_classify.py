"""The agent's one reading of HTTP statuses (agent.link.http.classify) and its URLs."""

from __future__ import annotations

import pytest

from agent.link.http import HttpClient, classify, origin


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, "ok"),
        (206, "ok"),
        (304, "ok"),
        (400, "permanent"),
        (401, "permanent"),
        (403, "permanent"),
        (404, "permanent"),
        (409, "permanent"),
        (416, "permanent"),
        (408, "transient"),
        (425, "transient"),
        (429, "transient"),
        (500, "transient"),
        (502, "transient"),
        (503, "transient"),
        (504, "transient"),
    ],
)
def test_not_now_statuses_are_transient_and_other_4xx_permanent(status: int, verdict: str) -> None:
    assert classify(status) == verdict


def test_paths_go_under_the_base_url_and_origins_compare_scheme_host_and_port() -> None:
    client = HttpClient("https://ctl.example:8443/")
    assert client.url("/api/v1/x") == "https://ctl.example:8443/api/v1/x"
    assert client.url("https://cdn.example/m.onnx") == "https://cdn.example/m.onnx"
    with pytest.raises(ValueError, match="no base URL"):
        HttpClient().url("/api/v1/x")
    assert origin("https://CTL.example:8443/a") == origin("https://ctl.example:8443/b")
    assert origin("http://h/x") == ("http", "h:80")
    assert origin("/relative") is None
