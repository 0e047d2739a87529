"""How the agent's slot side is put together: the table, the hot-swap, the engines, the stages.

:func:`assemble_slots` builds the parts the slot pipeline owns from the agent's settings (the
artifact downloader and the engine store client, which talk to the controller; the swap journal,
the engine cache and resolver; the stages) and takes the parts it shares with the rest of the
agent (the serving registry and batcher, the trust checks, the memory budget, the power modes,
the event publisher). The daemon calls it once; it starts nothing. :meth:`SlotParts.close`
releases the HTTP connection pools at shutdown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from agent.engines.cache import EngineCache
from agent.engines.identity import tuning_tag
from agent.engines.resolver import EngineResolver
from agent.engines.store_client import StoreClient
from agent.hardware.runtime_kinds import ONNXRUNTIME
from agent.link.downloader import Downloader
from agent.link.http import controller_tls
from agent.runtimes.base import ModelLoader
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry
from agent.settings import AgentSettings
from agent.slots.pipeline import Emit, SlotPipeline, Stages
from agent.slots.records import SlotTable
from agent.slots.restore import restore_from_journal
from agent.slots.stages import (
    ConfigureBatching,
    DownloadModel,
    FetchReference,
    PowerModes,
    ResolveEngine,
    SwapIn,
    VerifyModel,
)
from agent.swap.budget import MemoryBudget
from agent.swap.hotswap import HotSwapper
from agent.swap.journal import SwapJournal
from agent.swap.loaders import loader_for, slot_loader
from agent.trust.verifier import ArtifactVerifier


@dataclass(frozen=True)
class SlotParts:
    """The slot side of one agent."""

    table: SlotTable
    swapper: HotSwapper
    engines: EngineCache
    pipeline: SlotPipeline
    downloader: Downloader
    store: StoreClient | None
    runtime: str
    loader: ModelLoader
    power: PowerModes
    fallback_loader: ModelLoader | None = None
    """ONNX Runtime's loader on a TensorRT device: slots that fell back are restored with it."""

    def restore(self) -> None:
        """Serve what the swap journal names (start-up, before the broker answers)."""
        restore_from_journal(
            self.swapper,
            self.engines,
            self.table,
            self.runtime,
            self.loader,
            tuning_tag(self.power.facts),
            fallback_loader=self.fallback_loader,
        )

    def close(self) -> None:
        """Release the downloader's and the store client's connections."""
        self.downloader.close()
        if self.store is not None:
            self.store.close()


def assemble_slots(
    settings: AgentSettings,
    *,
    device_id: str,
    runtime: str,
    registry: ModelRegistry,
    batcher: Batcher,
    budget: MemoryBudget,
    verifier: ArtifactVerifier,
    power: PowerModes,
    loader: ModelLoader,
    custom_loader: bool,
    emit: Emit,
    report: Callable[[], None],
    stopping: Callable[[], bool],
    supervising: Callable[[], bool],
) -> SlotParts:
    """The slot side: ``report`` publishes the agent's state after a phase change,
    ``supervising`` is polled by downloads and builds (it beats the watchdog; True to cancel),
    ``custom_loader`` says ``loader`` is a test's own (it then loads every engine)."""
    state_dir = settings.state_dir
    token = settings.api_token.get_secret_value() if settings.api_token else None
    verify = controller_tls(settings.controller_ca_file)
    downloader = Downloader(state_dir, base_url=settings.controller_url, token=token, verify=verify)
    store = (
        StoreClient(settings.controller_url, token=token, verify=verify)
        if settings.controller_url
        else None
    )
    table = SlotTable()
    swapper = HotSwapper(
        registry,
        SwapJournal(state_dir),
        budget.probe,
        state_dir,
        drain_timeout_s=settings.swap_drain_timeout_s,
        budget=budget,
    )
    engines = EngineCache(
        state_dir / "engines",
        settings.engine_cache_mib * 1024 * 1024,
        on_corrupt=lambda key, reason: emit("error", None, reason, engine_key=key),
    )
    jetson = power.facts.jetson
    resolver = EngineResolver(
        engines,
        store,
        device_id,
        build_timeout_s=settings.build_timeout_s,
        lease_ttl_s=settings.build_lease_s,
        emit=emit,
        dla_cores=jetson.dla_cores if jetson else None,
        cancelled=supervising,
        verify=verifier.check_engine,
    )
    swap_mode = settings.swap_mode
    load_for = functools.partial(
        slot_loader,
        runtime=runtime,
        swap_mode=swap_mode,
        fallback=loader,
        custom=custom_loader,
        engine_cache_dir=state_dir / "ort-trt",  # ONNX Runtime's TensorRT EP keeps its builds
    )
    fallback = None
    fallback_loader = None
    if runtime != ONNXRUNTIME.name:  # slots TensorRT cannot serve go to ONNX Runtime
        fallback_loader = loader if custom_loader else loader_for(ONNXRUNTIME.name, swap_mode)
        ort_load_for = functools.partial(
            load_for, runtime=ONNXRUNTIME.name, fallback=fallback_loader
        )
        fallback = (
            ResolveEngine(resolver, power, ONNXRUNTIME.name, state_dir),
            SwapIn(swapper, engines, verifier, ONNXRUNTIME.name, state_dir, ort_load_for),
        )
    reference = FetchReference(downloader, on_progress=supervising)
    stages = Stages(
        verify=VerifyModel(verifier),
        download=DownloadModel(downloader, on_progress=supervising),
        batching=ConfigureBatching(batcher),
        resolve=ResolveEngine(resolver, power, runtime, state_dir, reference),
        reference=reference,
        swap=SwapIn(swapper, engines, verifier, runtime, state_dir, load_for),
        runtime=runtime,
        fallback=fallback,
    )
    pipeline = SlotPipeline(table, stages, emit=emit, report=report, stopping=stopping)
    return SlotParts(
        table,
        swapper,
        engines,
        pipeline,
        downloader,
        store,
        runtime,
        loader,
        power,
        fallback_loader,
    )
