"""One memory budget for every engine the agent loads: the slots' swaps and the jobs' engines.

Admission (:mod:`agent.swap.admission`) decides from the needs of the resident engines and the
measured headroom. Two threads load engines: the loop thread swaps slots in, the jobs thread
loads profiling and tuning candidates beside them. Each must see what the other committed to, so
every engine is counted here from its admission until it is gone: :meth:`MemoryBudget.reserve`
decides and records the need in one step under one lock, and the :class:`Reservation` it returns
is released when the engine is closed (or was never loaded).

The measured headroom already contains the engines that are loaded, not one whose reservation
was granted but whose load has not finished. Until its holder calls :meth:`Reservation.loaded`,
a reservation's need is also taken off the measured free memory. The jobs never call it: their
engines come and go within one reservation, so they are counted twice while they live, which
errs on the side of refusing.

Concurrency: every method takes the budget's lock. ``reserve`` reads the headroom under it (one
``/proc`` read or one CUDA/NVML query), so two decisions never share the same free memory.
"""

from __future__ import annotations

import dataclasses
import threading
from types import TracebackType

from agent.swap.admission import Admission, MiB, Need, decide
from agent.swap.headroom import HeadroomProbe


class Reservation:
    """One engine's share of the budget, from admission until :meth:`release`.

    A refused reservation (``admission.mode == "refuse"``) holds nothing; releasing it, or
    releasing twice, does nothing. Usable as a context manager that releases on exit.
    """

    def __init__(self, budget: MemoryBudget, label: str, need: Need, admission: Admission) -> None:
        self.label = label
        self.need = need
        self.admission = admission
        self._budget = budget

    @property
    def granted(self) -> bool:
        return self.admission.mode != "refuse"

    def loaded(self) -> None:
        """The engine is loaded: the measured headroom contains it from now on."""
        self._budget._loaded(self)

    def release(self) -> None:
        """The engine is gone (closed, or never loaded): its memory is free for others."""
        self._budget._release(self)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class MemoryBudget:
    """Every engine's reservation on this device, and the admission of new ones."""

    def __init__(self, probe: HeadroomProbe) -> None:
        self.probe = probe
        self._lock = threading.Lock()
        self._held: dict[int, Reservation] = {}
        self._pending: set[int] = set()

    def reserve(
        self,
        need: Need,
        label: str,
        replacing: Reservation | None = None,
        refittable: bool = False,
    ) -> Reservation:
        """Admit an engine of ``need`` (in place of ``replacing``, or beside every other one).

        The reservation holds its share unless its admission is ``refuse``; a ``cold``
        admission counts ``replacing`` as freed before the load, so the caller unloads it first.
        """
        with self._lock:
            room = self.probe.headroom()
            loading = sum(self._held[i].need.total for i in self._pending)
            if loading:
                room = dataclasses.replace(
                    room,
                    available_bytes=max(0, room.available_bytes - loading),
                    source=f"{room.source}, less {loading / MiB:.0f} MiB reserved by loads "
                    "in progress",
                )
            old = replacing.need if replacing is not None and self._holds(replacing) else None
            residents = [r.need for r in self._held.values()]
            reservation = Reservation(
                self, label, need, decide(need, old, residents, room, refittable)
            )
            if reservation.granted:
                self._held[id(reservation)] = reservation
                self._pending.add(id(reservation))
            return reservation

    def hold(self, need: Need, label: str) -> Reservation:
        """Count an engine without a decision (start-up restore: it served before the restart)."""
        admission = Admission("warm", "served before the agent restarted", need.total, 0, 0)
        reservation = Reservation(self, label, need, admission)
        with self._lock:
            self._held[id(reservation)] = reservation
            self._pending.add(id(reservation))
        return reservation

    def reserved(self) -> list[Reservation]:
        """The reservations held now (for reports and tests)."""
        with self._lock:
            return list(self._held.values())

    def _holds(self, reservation: Reservation) -> bool:
        return self._held.get(id(reservation)) is reservation

    def _loaded(self, reservation: Reservation) -> None:
        with self._lock:
            if self._holds(reservation):
                self._pending.discard(id(reservation))

    def _release(self, reservation: Reservation) -> None:
        with self._lock:
            if self._holds(reservation):
                del self._held[id(reservation)]
                self._pending.discard(id(reservation))
