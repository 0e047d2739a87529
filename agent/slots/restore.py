"""Start-up: serve what the swap journal says each model served before a restart or crash.

For each model, ``active`` first, ``rollback`` when ``active`` no longer loads; a ``pending``
swap never reached its switch and is ignored (:mod:`agent.swap.journal`). A restored slot serves
before the broker answers; reconcile then moves on from there.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agent.engines.cache import EngineCache
from agent.engines.identity import tuning_matches
from agent.engines.resolver import Resolved
from agent.errors import AgentError
from agent.runtimes.base import ModelLoader
from agent.slots.records import SlotRecord, SlotTable
from agent.swap.admission import need_of
from agent.swap.hotswap import Candidate, HotSwapper
from shared.engine_keys import TuningTag
from shared.messages import SlotPhase

log = logging.getLogger(__name__)


def restore_from_journal(
    swapper: HotSwapper,
    engines: EngineCache,
    table: SlotTable,
    runtime: str,
    loader: ModelLoader,
    tuning: TuningTag,
) -> None:
    """Load each journaled model of ``runtime`` with ``loader``; a record per model served.

    ``tuning`` is the device's tuning tag now: a restored engine reports whether it matches.
    """
    for name, pointers in swapper.journal.models().items():
        for pointer in (pointers.active, pointers.rollback):
            if pointer is None or pointer.runtime != runtime:
                continue
            path = Path(pointer.engine_path)
            if not path.is_file():
                continue
            candidate = Candidate(
                name=name,
                version=pointer.version,
                sha256=pointer.sha256,
                load=lambda p=path, ld=loader: ld(p, intra_op_threads=1),  # type: ignore[misc]
                need=need_of(path.stat().st_size),
                pointer=pointer,
            )
            try:
                swapper.restore(name, candidate)
            except AgentError as exc:
                log.warning("journal: %s %s does not load: %s", name, pointer.version, exc)
                continue
            hit = engines.get(pointer.engine_key) if pointer.engine_key else None
            engine = None
            if hit is not None:
                matches = tuning_matches(hit.manifest.tuning, tuning)
                engine = Resolved(hit.path, hit.manifest, "cached", matches)
                rollback = pointers.rollback.engine_key if pointers.rollback else None
                engines.pin(name, active=hit.manifest.engine_key, rollback=rollback)
            table.put(
                SlotRecord(
                    name,
                    None,
                    pointer.version,
                    pointer.sha256,
                    phase=SlotPhase.SERVING,
                    engine=engine,
                    runtime=runtime,
                )
            )
            log.info("journal: serving %s %s again", name, pointer.version)
            break
