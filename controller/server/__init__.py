"""``jetfleet serve``: database + artifact store + broker + bus + ingest + HTTP API, wired once.

Background threads: each long-lived one runs under :class:`shared.supervision.Supervised`,
set up where it is started (the inbox lanes, the ingest link and worker supervisor, the rollout
and jobs loops, the re-signing and analysis threads restart; the embedded broker's exits). A
controller without its API is useless: ``jetfleet serve`` (:func:`run`) serves HTTP on the main
thread, so a crash of uvicorn ends the process and systemd (``Restart=on-failure``) starts a new
one; :meth:`Controller.serve_in_thread` (tests, benches) gives its thread the ``exit`` policy
for the same effect. The one-shot republish thread after a (re)connect is not restarted (the
next connect republishes again), but its exception is logged with its name instead of going to
stderr only.

:class:`Controller` wires the parts in this order, each area in its own module: what is stored
(:mod:`.storage`: TLS files, schema, artifact store, database stores), the HTTP socket
(:mod:`.http_server`), trust and models (:mod:`.fleet_side`), telemetry ingest and the broker
links (:mod:`.ingest_side`), then the fleet, jobs and rollouts, the services the API is given,
and the threads only the rollout leader's work needs (:mod:`.fleet_side`).
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

from controller.broker_admin.startup import bind_client_ids
from controller.errors import ControllerError
from controller.ingest.gc_tuning import tune_garbage_collector
from controller.ingest.pool import IngestWorkers
from controller.ingest.report_duty import ReportDuty
from controller.rollouts.loop import RolloutLoop
from controller.server.fleet_side import (
    build_fleet,
    build_services,
    open_trust,
    start_leader_work,
    start_model_side,
)
from controller.server.http_server import HttpServer, bind_http, http_config
from controller.server.ingest_side import connect_broker, start_ingest
from controller.server.storage import open_stores, prepare_storage
from controller.services import Services
from controller.settings import Settings
from shared.supervision import Supervised
from shared.topics import Topics

logger = logging.getLogger(__name__)


class Controller:
    """One controller process: ``start()``, then ``serve()`` (blocking) or ``serve_in_thread()``."""

    def __init__(
        self, settings: Settings, on_fatal: Callable[[str, BaseException], None] | None = None
    ) -> None:
        self.settings = settings
        self._on_fatal = on_fatal
        """What a crash of the HTTP server thread does (None: end the process; tests observe
        it instead)."""
        self._stoppers: list[Callable[[], None]] = []
        self._on_exit: list[Callable[[], None]] = []
        """Called as soon as shutdown begins (SIGINT/SIGTERM or ``stop()``), before uvicorn
        waits for requests in flight: ends work that would hold one (a push's child process)."""
        self._sock: socket.socket | None = None
        self._server: HttpServer | None = None
        self._thread: Supervised | None = None
        self._republishers: list[threading.Thread] = []
        self.services: Services | None = None
        self.ingest_workers: IngestWorkers | None = None
        """Telemetry ingest processes (``Settings.ingest_workers`` > 0), else None."""
        self._report_duty: ReportDuty | None = None
        """Replicas only: follows reported state while this one runs the rollouts."""
        self.rollout_loop: RolloutLoop | None = None
        """The rollout loop of this replica (tests stop it to run one of their own)."""
        self.http_url = ""
        self.broker_url = ""

    def start(self) -> None:
        """Check the database, start the broker link and prepare the HTTP server."""
        s = self.settings
        try:
            self._start(s)
        except BaseException:
            self.stop()
            raise

    def _start(self, s: Settings) -> None:
        store = prepare_storage(s)
        self._sock = bind_http(s.http_host, s.http_port)
        port = int(self._sock.getsockname()[1])
        host = s.http_host if ":" not in s.http_host else f"[{s.http_host}]"
        self.http_url = f"{s.http_scheme}://{host}:{port}"
        public_url = s.resolved_public_url(port)

        stores = open_stores(s.db_url, self._stoppers)
        signer, access = open_trust(s, stores, self.http_url)
        topics = Topics(s.topic_prefix)
        models = start_model_side(
            s, stores, store, public_url, signer, self._stoppers, self._on_exit
        )
        ingest = start_ingest(s, stores, topics, self._stoppers)
        links = connect_broker(s, stores, topics, ingest, self._republish_soon, self._stoppers)
        self.broker_url = links.side.broker_url
        self.ingest_workers = links.workers
        fleet = build_fleet(s, stores, models, signer, links, topics, public_url, self._on_lead)
        self.rollout_loop = fleet.rollout_loop
        self._report_duty = fleet.report_duty
        self.services = build_services(
            s, stores, store, access, models, ingest, links, fleet, public_url
        )
        links.bus.start()
        self._stoppers.append(links.bus.stop)
        links.inbound.start()
        self._stoppers.append(links.inbound.stop)
        if self.services.enrolment is not None:
            self.services.enrolment.reapply_revocations()
            bind_client_ids(links.side.admin, stores.identities)
        start_leader_work(fleet, signer, self._stoppers)
        self._server = HttpServer(http_config(s, self.services), self._shutdown_begins)
        logger.info("jetfleet controller: http %s, broker %s", self.http_url, self.broker_url)

    def serve(self) -> None:
        """Serve HTTP in this thread until SIGINT/SIGTERM (main thread) or ``stop()``."""
        assert self._server is not None, "call start() first"
        assert self._sock is not None, "call start() first"
        self._server.run(sockets=[self._sock])

    def serve_in_thread(self, timeout_s: float = 15.0) -> None:
        """Serve HTTP in a background thread; return once it accepts requests.

        The thread is supervised with the ``exit`` policy: if uvicorn's loop dies, the process
        ends (:data:`shared.supervision.EXIT_THREAD_DIED`) for systemd to start it again.
        """
        server = self._server
        assert server is not None, "call start() first"
        thread = Supervised("jetfleet-http", self.serve, policy="exit", on_fatal=self._on_fatal)
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ControllerError(f"the HTTP server did not start on {self.http_url}")
            time.sleep(0.02)

    def _shutdown_begins(self) -> None:
        for end in self._on_exit:
            end()

    def stop(self) -> None:
        """Stop HTTP, the bus, the broker and the database engine, newest first."""
        self._shutdown_begins()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None
        for thread in self._republishers:
            thread.join(15)
        self._republishers.clear()
        while self._stoppers:
            self._stoppers.pop()()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _on_lead(self) -> None:
        """This replica took the rollout lease: store reported state now, republish."""
        if self._report_duty is not None:
            self._report_duty.sync()
        self._republish_soon()

    def _republish_soon(self) -> None:
        """After every (re)connect, republish desired documents off the network thread.

        Only the replica holding the rollout lease does: three replicas starting
        together, or reconnecting after a broker restart, publish every device's document once,
        not three times. A replica that takes the lease republishes then, so a leader that died
        before its broker came back is made up for by the next one.
        """
        services = self.services
        if services is None:
            return
        loop = self.rollout_loop
        if loop is not None and not loop.leader:
            logger.info("desired documents are republished by the replica running the rollouts")
            return

        def republish() -> None:
            try:
                count = services.fleet.republish_all(
                    yield_to=(lambda: loop.busy) if loop is not None else None
                )
                logger.info("republished the desired state of %d devices", count)
            except ControllerError as exc:
                logger.error("could not republish desired state: %s", exc)
            except Exception:  # one shot, not restarted: the next (re)connect republishes
                logger.exception("background thread %s crashed", threading.current_thread().name)

        self._republishers = [t for t in self._republishers if t.is_alive()]
        thread = threading.Thread(target=republish, name="jetfleet-republish", daemon=True)
        self._republishers.append(thread)
        thread.start()


def run(settings: Settings) -> None:
    """Start the controller and serve until SIGINT/SIGTERM, then stop everything.

    uvicorn shuts down gracefully on either signal and then re-raises it; SIGTERM is mapped to
    ``SystemExit(0)`` and SIGINT's ``KeyboardInterrupt`` is absorbed, so the cleanup below runs.
    """
    controller = Controller(settings)
    controller.start()
    tune_garbage_collector()
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        controller.serve()
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()
        signal.signal(signal.SIGTERM, previous)
        logger.info("jetfleet controller stopped")


def _exit_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)
