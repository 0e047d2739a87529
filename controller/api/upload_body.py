"""Request bodies of uploads: streamed into a pending artifact, or read whole within a limit."""

from __future__ import annotations

from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from controller.artifacts.store import PendingArtifact, check_upload_size


def refuse_declared_oversize(request: Request, limit: int) -> None:
    """413 before a byte is read when ``Content-Length`` already exceeds ``limit``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        check_upload_size(int(declared), limit)


async def stream_into(request: Request, pending: PendingArtifact) -> None:
    """Write the request body into ``pending`` chunk by chunk, off the event loop (the pending
    artifact refuses, 413, once it grows past the store's limit); aborted when anything fails."""
    try:
        async for chunk in request.stream():
            if chunk:
                await run_in_threadpool(pending.write, chunk)
    except BaseException:
        pending.abort()
        raise


async def body_within(request: Request, limit: int) -> bytes:
    """The whole request body, refused (413) as soon as it grows past ``limit`` bytes."""
    refuse_declared_oversize(request, limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        check_upload_size(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)
