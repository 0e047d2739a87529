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
from agent.hardware.runtime_kinds import ONNXRUNTIME
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
    *,
    fallback_loader: ModelLoader | None = None,
) -> None:
    """Load each journaled model of ``runtime`` with ``loader``; a record per model served.
    On a TensorRT device, a model that had fallen back to ONNX Runtime (its pointer says why)
    is loaded with ``fallback_loader``: it is not built for TensorRT again at every start.

    ``tuning`` is the device's tuning tag now: a restored engine reports whether it matches.
    """
    for name, pointers in swapper.journal.models().items():
        for pointer in (pointers.active, pointers.rollback):
            if pointer is None:
                continue
            fell_back = (
                fallback_loader is not None
                and pointer.runtime == ONNXRUNTIME.name != runtime
                and pointer.fallback_reason is not None
            )
            if pointer.runtime != runtime and not fell_back:
                continue
            load = fallback_loader if fell_back and fallback_loader is not None else loader
            path = Path(pointer.engine_path)
            if not path.is_file():
                continue
            candidate = Candidate(
                name=name,
                version=pointer.version,
                sha256=pointer.sha256,
                load=lambda p=path, ld=load: ld(p, intra_op_threads=1),  # type: ignore[misc]
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
                    runtime=pointer.runtime,
                    fallback_reason=pointer.fallback_reason if fell_back else None,
                )
            )
            log.info("journal: serving %s %s again", name, pointer.version)
            break
