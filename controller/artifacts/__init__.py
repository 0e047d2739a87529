"""Artifacts: the bytes the fleet downloads, and the engines built from them.

:mod:`.store` (content-addressed artifacts over a backend), :mod:`.backend` (the backend seam and
the filesystem backend), :mod:`.s3` (the S3-compatible backend, the only boto3 user, imported only
when chosen), :mod:`.local_cache` (verified local copies of remote artifacts, bounded),
:mod:`.byte_range` (HTTP ``Range``, pure), :mod:`.engines` (engine uploads, manifests, build leases;
docs/architecture.md#engine-identity; who may build now is :func:`controller.records.decide_lease`,
pure).
"""
