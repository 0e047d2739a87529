"""Replicas starting at the same moment on an empty database and one data directory each
bootstrap an admin token; none of them stops, and the token file holds a working admin token
(before, they wrote the file through one shared temporary name and the losers' rename failed:
FileNotFoundError ended the replica's start; found by bench/scale.py at 10,000 devices)."""

from __future__ import annotations

import threading
from pathlib import Path

from controller.auth.service import ADMIN_TOKEN_FILE, AccessControl
from controller.db import migrate
from controller.db.session import make_engine
from controller.db.token_store import TokenStore

RACERS = 8


def test_replicas_bootstrapping_the_admin_token_at_once_all_start(
    db_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(db_url)
    data_dir = tmp_path / "shared-data"
    engines = [make_engine(db_url) for _ in range(RACERS)]
    start = threading.Barrier(RACERS)
    errors: list[BaseException] = []

    def replica(i: int) -> None:
        access = AccessControl(TokenStore(engines[i]))
        start.wait()
        try:
            access.ensure_admin_token(data_dir)
        except BaseException as exc:  # what ended a replica's start before the fix
            errors.append(exc)

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(RACERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        token = (data_dir / ADMIN_TOKEN_FILE).read_text().strip()
        assert AccessControl(TokenStore(engines[0])).authenticate(token).role == "admin"
        assert sorted(p.name for p in data_dir.iterdir()) == [ADMIN_TOKEN_FILE]  # no leftovers
    finally:
        for engine in engines:
            engine.dispose()
