"""Replicas starting at the same moment on an empty database agree on one fleet signing key
(before, the loser of the race stopped with "the fleet already has an active signing key", or on
PostgreSQL both stored a first key)."""

from __future__ import annotations

import threading
from pathlib import Path

from controller.db import migrate
from controller.db.session import make_engine
from controller.db.signing_store import KeyRecord, SigningStore
from controller.trust.signing import FleetSigner

RACERS = 4


def test_replicas_creating_the_first_key_at_once_all_get_the_same_one(
    db_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(db_url)
    data_dir = tmp_path / "shared-data"  # the replicas' shared mount
    engines = [make_engine(db_url) for _ in range(RACERS)]
    start = threading.Barrier(RACERS)
    got: list[KeyRecord] = []
    errors: list[BaseException] = []

    def replica(i: int) -> None:
        signer = FleetSigner(SigningStore(engines[i]), data_dir)
        start.wait()
        try:
            got.append(signer.ensure_key()[0])
        except BaseException as exc:  # what ended a replica's start before the fix
            errors.append(exc)

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(RACERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert len({k.key_id for k in got}) == 1, got
        keys = SigningStore(engines[0]).all_keys()
        assert [k.key_id for k in keys if k.retired_at is None] == [got[0].key_id]
        # the private half of the one key is on the shared mount; the losers left no key file
        assert sorted(p.stem for p in (data_dir / "keys").glob("*.key")) == [got[0].key_id]
    finally:
        for engine in engines:
            engine.dispose()
