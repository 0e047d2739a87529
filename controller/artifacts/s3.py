"""The S3 backend: artifacts in an S3-compatible bucket (the only boto3 user).

Keys are ``<prefix>/artifacts/<sha[:2]>/<sha>``. An upload is verified before it leaves the
controller (its sha256 is the key) and is sent as one PUT up to :data:`PART_BYTES`, else as a
multipart upload: S3 makes either visible under its key only once complete, so no reader ever
sees part of an object, and a failed multipart upload is aborted. Each request body carries its
``Content-MD5``, which every S3-compatible server checks; the size is checked once stored.

boto3's own checksum defaults (CRC trailers since 1.36) are turned off
(``when_required``) because several S3-compatible servers refuse them; MD5 does the same work
everywhere. Every boto3/botocore error is translated here, once, into NotFound or
:class:`~controller.errors.StorageError` with a message naming what to fix.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)

from controller.artifacts.backend import Chunks
from controller.errors import NotFound, StorageError
from controller.settings import ObjectStoreSettings

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

PART_BYTES = 16 * 1024**2
"""Uploads up to this size are one PUT; larger ones go in parts of this size (S3's minimum part
is 5 MiB; 10,000 parts of 16 MiB allow 160 GiB)."""
CHUNK = 1 << 16
_MISSING = {"404", "NoSuchKey", "NotFound"}
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden"}


class S3Backend:
    """One bucket (and key prefix) of an S3-compatible store."""

    def __init__(self, settings: ObjectStoreSettings, client: S3Client | None = None) -> None:
        self.settings = settings
        self.bucket = settings.bucket
        self._prefix = f"{settings.prefix}/" if settings.prefix else ""
        self._client = client or _client(settings)
        self.endpoint = self._client.meta.endpoint_url
        self.label = f"{settings.url} at {self.endpoint}"

    def _key(self, key: str) -> str:
        return self._prefix + key

    # --- start-up ----------------------------------------------------------------------------

    def check(self) -> None:
        """HEAD the bucket: one line naming the fix when it is missing, unreachable or refuses
        these credentials."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING or code == "NoSuchBucket":
                raise StorageError(
                    f"there is no bucket {self.bucket!r} at {self.endpoint}: create it "
                    f"(e.g. `aws s3 mb s3://{self.bucket} --endpoint-url {self.endpoint}`) or "
                    "fix --artifact-store"
                ) from exc
            if code in _DENIED:
                raise StorageError(
                    f"the object store at {self.endpoint} refused the credentials for bucket "
                    f"{self.bucket!r} ({_answer(exc)}): check AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the bucket's policy"
                ) from exc
            if code in {"301", "PermanentRedirect", "AuthorizationHeaderMalformed"}:
                raise StorageError(
                    f"bucket {self.bucket!r} lives in another region than "
                    f"{self._client.meta.region_name}: set --s3-region (or AWS_REGION)"
                ) from exc
            raise self._error(exc, "check the bucket") from exc
        except BotoCoreError as exc:
            raise self._error(exc, "check the bucket") from exc

    # --- objects -----------------------------------------------------------------------------

    def size(self, key: str) -> int | None:
        try:
            head = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise self._error(exc, f"look up {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"look up {key}") from exc
        return int(head["ContentLength"])

    def put_file(self, key: str, path: Path, size: int) -> None:
        try:
            if size <= PART_BYTES:
                data = path.read_bytes()
                self._client.put_object(
                    Bucket=self.bucket, Key=self._key(key), Body=data, ContentMD5=_md5(data)
                )
            else:
                self._multipart(key, path)
        except ClientError as exc:
            raise self._error(exc, f"store {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"store {key}") from exc
        stored = self.size(key)
        if stored != size:
            self._delete(key)
            raise StorageError(
                f"the object store kept {stored} of the {size} bytes of {key}: nothing was "
                "stored; send the upload again"
            )

    def _multipart(self, key: str, path: Path) -> None:
        upload = self._client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key))
        upload_id = upload["UploadId"]
        parts: list[Any] = []
        try:
            with path.open("rb") as f:
                while data := f.read(PART_BYTES):
                    number = len(parts) + 1
                    self.before_part(number)
                    sent = self._client.upload_part(
                        Bucket=self.bucket,
                        Key=self._key(key),
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=data,
                        ContentMD5=_md5(data),
                    )
                    parts.append({"ETag": sent["ETag"], "PartNumber": number})
            self._client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self._key(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            self._abort(key, upload_id)
            raise

    def before_part(self, number: int) -> None:
        """Called before each part of a multipart upload is sent (tests cut uploads here)."""

    def _abort(self, key: str, upload_id: str) -> None:
        # Never completed, so nothing is visible either way; when the abort fails too, the
        # bucket's AbortIncompleteMultipartUpload lifecycle rule reclaims the parts.
        with contextlib.suppress(ClientError, BotoCoreError):
            self._client.abort_multipart_upload(
                Bucket=self.bucket, Key=self._key(key), UploadId=upload_id
            )

    def _delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"delete {key}") from exc

    def open_range(self, key: str, start: int, end: int) -> Iterator[bytes]:
        try:
            got = self._client.get_object(
                Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{end}"
            )
        except ClientError as exc:
            if _code(exc) in _MISSING:
                raise NotFound(f"unknown artifact {key.rsplit('/', 1)[-1]}") from exc
            raise self._error(exc, f"read {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"read {key}") from exc
        body = got["Body"]

        def chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(CHUNK)
            except BotoCoreError as exc:
                raise self._error(exc, f"read {key}") from exc

        return Chunks(chunks(), body.close)

    def local_file(self, key: str) -> Path | None:
        return None

    def fetch(self, key: str, write: Callable[[bytes], object]) -> None:
        size = self.size(key)
        if size is None:
            raise NotFound(f"unknown artifact {key.rsplit('/', 1)[-1]}")
        if size == 0:
            return
        for chunk in self.open_range(key, 0, size - 1):
            write(chunk)

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, ContentMD5=_md5(data)
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"store {key}") from exc

    def get_bytes(self, key: str) -> bytes | None:
        try:
            got = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            return got["Body"].read()
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise self._error(exc, f"read {key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"read {key}") from exc

    def presign(self, key: str, expires_s: int) -> str | None:
        try:
            return self._client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": self._key(key)},
                ExpiresIn=expires_s,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"presign {key}") from exc

    def _error(self, exc: Exception, what: str) -> StorageError:
        """``exc`` as one line naming the store and what to fix."""
        where = f"the object store {self.settings.url} at {self.endpoint}"
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return StorageError(
                f"no credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or AWS_PROFILE)"
            )
        if isinstance(exc, EndpointConnectionError):
            return StorageError(
                f"cannot reach {where} to {what}: check --s3-endpoint (or AWS_ENDPOINT_URL) "
                "and that the server runs"
            )
        if isinstance(exc, ClientError):
            code = _code(exc)
            if code in _DENIED:
                return StorageError(
                    f"{where} refused to {what} ({_answer(exc)}): check "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY and the bucket's policy"
                )
            return StorageError(f"{where} could not {what}: {_answer(exc)}")
        return StorageError(f"{where} could not {what}: {exc}")


def _client(settings: ObjectStoreSettings) -> S3Client:
    session = boto3.session.Session()
    region = settings.region or session.region_name or "us-east-1"
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": settings.addressing},
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=5,
        read_timeout=60,
        max_pool_connections=32,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client(
        "s3", region_name=region, endpoint_url=settings.endpoint_url, config=config
    )


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _answer(exc: ClientError) -> str:
    """``HTTP 403 AccessDenied`` (or ``HTTP 403`` when the server gave no other code)."""
    status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?"))
    code = _code(exc)
    return f"HTTP {status}" if code in ("", status) else f"HTTP {status} {code}"
