"""``jetfleet serve --artifact-store s3://...`` stops at start with one line naming the fix when
the bucket cannot be used (real SeaweedFS, real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.object_store import SeaweedS3
from tests.ports import free_port


def serve(tmp_path: Path, store: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JETFLEET_", "AWS_"))}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--auto-migrate",
            "--http",
            f"127.0.0.1:{free_port()}",
            "--embedded-broker",
            f"127.0.0.1:{free_port()}",
            "--artifact-store",
            store,
            "--s3-addressing",
            "path",
        ],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("wrong-secret", "refused the credentials for bucket"),
        ("no-bucket", "there is no bucket 'jf-missing-bucket'"),
        ("unreachable", "cannot reach the object store"),
    ],
)
def test_a_bucket_that_cannot_be_used_stops_the_start_with_one_line(
    seaweedfs: SeaweedS3, s3_bucket: str, tmp_path: Path, case: str, expected: str
) -> None:
    env = seaweedfs.env()
    store = f"s3://{s3_bucket}/fleet"
    if case == "wrong-secret":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    elif case == "no-bucket":
        store = "s3://jf-missing-bucket/fleet"
    else:
        env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    ended = serve(tmp_path, store, env)
    assert ended.returncode == 1, ended.stderr
    last = ended.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: "), ended.stderr
    assert expected in last
    assert "Traceback" not in ended.stderr
    if case == "wrong-secret":
        assert "AWS_SECRET_ACCESS_KEY" in last
