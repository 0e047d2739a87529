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
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from types import FrameType

import uvicorn

from controller.analysis.reference_runner import ReferenceRunner
from controller.analysis.runner import AnalysisRunner
from controller.api.app import create_app
from controller.artifacts.engines import EngineStore
from controller.artifacts.store import open_store
from controller.auth.service import AccessControl, bootstrap_admin
from controller.broker_admin.startup import bind_client_ids, start_broker_side
from controller.db import migrate
from controller.db.config_store import ConfigStore
from controller.db.engine_store import EngineStoreDb
from controller.db.identity_store import IdentityStore
from controller.db.job_store import JobStore
from controller.db.rate_store import RateBucketStore
from controller.db.repository import Repository
from controller.db.rollout_store import RolloutStore
from controller.db.schema import utcnow
from controller.db.session import make_engine, redact
from controller.db.signing_store import SigningStore
from controller.db.telemetry_store import Retention, TelemetryStore
from controller.db.token_store import TokenStore
from controller.errors import ControllerError, DatabaseError
from controller.fleet.catalog import Catalog
from controller.fleet.configs import Configs
from controller.fleet.deployments import Fleet
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest, tune_garbage_collector
from controller.ingest.inbox import Inbox
from controller.ingest.pool import (
    IngestWorkers,
    main_subscriptions,
    reports_follow_the_lease,
    start_ingest_workers,
    telemetry_link,
)
from controller.ingest.report_duty import ReportDuty
from controller.jobs.carry import pending_jobs
from controller.jobs.loop import JobLoop
from controller.jobs.service import JobService
from controller.mqtt_bus import MQTT5, MQTT311, MqttBus
from controller.rollouts.loop import RolloutLoop
from controller.rollouts.service import RolloutService
from controller.services import Services
from controller.settings import Settings
from controller.trust.enrolment import EnrolmentService
from controller.trust.enrolment_rate import SharedRateLimiter
from controller.trust.refresher import SignatureRefresher
from controller.trust.signing import FleetSigner
from controller.trust.tls_files import check_broker_tls, check_server_tls
from shared.messages import Status
from shared.supervision import Supervised
from shared.topics import Channel, Topics

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
        self._server: uvicorn.Server | None = None
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
        check_server_tls(s.tls_cert_file, s.tls_key_file)
        check_broker_tls(s.broker_auth)
        s.data_dir.mkdir(parents=True, exist_ok=True)
        if not migrate.is_up_to_date(s.db_url):
            if not s.auto_migrate:
                raise DatabaseError(
                    f"database {redact(s.db_url)} is not at this controller's schema: run "
                    f"`jetfleet db upgrade --db {redact(s.db_url)}` first "
                    "(or start with --auto-migrate)"
                )
            migrate.upgrade(s.db_url)
        store = open_store(s)
        store.check()
        logger.info("artifact store: %s", store.label)
        self._sock = _bind(s.http_host, s.http_port)
        port = int(self._sock.getsockname()[1])
        host = s.http_host if ":" not in s.http_host else f"[{s.http_host}]"
        self.http_url = f"{s.http_scheme}://{host}:{port}"
        public_url = s.resolved_public_url(port)

        engine = make_engine(s.db_url)
        self._stoppers.append(engine.dispose)
        signer = FleetSigner(SigningStore(engine), s.data_dir)
        key, created = signer.ensure_key()
        logger.info("fleet signing key %s%s", key.key_id, " (created)" if created else "")
        repo = Repository(engine)
        access = AccessControl(TokenStore(engine), required=s.auth_required)
        bootstrap_admin(access, s.data_dir, self.http_url)
        topics = Topics(s.topic_prefix)
        analyses = AnalysisRunner(repo, store, s.analysis_timeout_s)
        analyses.start()
        self._stoppers.append(analyses.stop)
        references = ReferenceRunner(s.reference_timeout_s)
        self._stoppers.append(references.stop)
        self._on_exit.append(references.stop)
        catalog = Catalog(
            repo,
            store,
            public_url,
            queue_analysis=analyses.submit,
            compute_reference=references.compute,
            max_model_nodes=s.max_model_nodes,
        )
        configs = Configs(ConfigStore(engine), repo, catalog)
        engines = EngineStore(EngineStoreDb(engine), store, signer=signer)
        telemetry = TelemetryStore(engine)
        retention = Retention(raw_s=s.retention_raw_s, rollup_s=s.retention_rollup_s)
        batcher = IngestBatcher(telemetry, retention=retention)
        batcher.start()
        self._stoppers.append(batcher.stop)
        identities = IdentityStore(engine)
        ingest = Ingest(
            repo,
            topics,
            batcher=batcher,
            max_payload_bytes=s.max_mqtt_payload_bytes,
            revoked=identities.revoked_among,
        )

        broker_side = start_broker_side(s, identities)
        self._stoppers.extend(broker_side.stoppers)
        broker_url = broker_side.broker_url
        self.broker_url = broker_url
        inbox = Inbox(ingest.handle, admit=ingest.admit, handle_many=ingest.handle_many)
        inbox.start()
        self._stoppers.append(inbox.stop)
        workers = start_ingest_workers(s, broker_url, broker_side.bus_auth, ingest, batcher)
        if workers is not None:
            self._stoppers.append(workers.stop)
            self.ingest_workers = workers
        else:
            link = telemetry_link(topics, broker_url, broker_side.bus_auth, ingest, s)
            link.start()
            self._stoppers.append(link.stop)
        reports_follow_lease = reports_follow_the_lease(s)
        # Two connections: desired documents go out over 3.1.1 (a wide publish window), what
        # agents publish comes in over 5.0 where the broker speaks it (a receive maximum: a
        # burst of reports waits in the socket, not in the broker's droppable queue). The
        # embedded broker is 3.1.1 only. See controller.mqtt_bus.
        bus = MqttBus(
            broker_url,
            topics,
            lambda _topic, _payload: None,
            on_connected=self._republish_soon,
            auth=broker_side.bus_auth,
            subscriptions=[],
        )
        inbound = MqttBus(
            broker_url,
            topics,
            inbox.put,
            auth=broker_side.bus_auth,
            subscriptions=main_subscriptions(topics, reported=not reports_follow_lease),
            client_name="jetfleet-controller-in",
            protocol=MQTT311 if s.broker_url is None else MQTT5,
        )
        job_store = JobStore(engine)
        fleet = Fleet(
            repo,
            catalog,
            configs,
            bus,
            topics,
            public_url,
            signer=signer,
            pending_jobs=pending_jobs(job_store),
        )
        jobs = JobService(job_store, repo, catalog, configs, fleet, signer=signer)
        rollout_store = RolloutStore(engine)
        rollout_loop = RolloutLoop(
            rollout_store,
            repo,
            fleet,
            lease_ttl_s=s.rollout_lease_ttl_s,
            holder=f"{s.resolved_replica_id()}-{uuid.uuid4().hex[:6]}",
            on_lead=self._on_lead,
        )
        self.rollout_loop = rollout_loop
        if reports_follow_lease:
            self._report_duty = ReportDuty(
                inbound, [topics.every_device(Channel.REPORTED)], lambda: rollout_loop.leader
            )
        rollouts = RolloutService(rollout_store, repo, catalog, configs, wake=rollout_loop.wake)
        self.services = Services(
            repo=repo,
            store=store,
            catalog=catalog,
            configs=configs,
            engines=engines,
            fleet=fleet,
            ingest=ingest,
            database_label=redact(s.db_url),
            broker_label=broker_url,
            telemetry=telemetry,
            batcher=batcher,
            rollouts=rollouts,
            jobs=jobs,
            access=access,
            health=s.health,
            enrolment=EnrolmentService(
                identities,
                broker_side.admin,
                access,
                controller_url=public_url,
                broker_url=s.public_broker_url or broker_url,
                topic_prefix=s.topic_prefix,
                on_revoked=lambda device: repo.record_status(
                    Status(device_id=device, state="offline"), utcnow()
                ),
                devices=repo,
            ),
            enrol_limiter=SharedRateLimiter(RateBucketStore(engine)),
        )
        bus.start()
        self._stoppers.append(bus.stop)
        inbound.start()
        self._stoppers.append(inbound.stop)
        if self.services.enrolment is not None:
            self.services.enrolment.reapply_revocations()
            bind_client_ids(broker_side.admin, identities)
        rollout_loop.start()
        self._stoppers.append(rollout_loop.stop)
        if self._report_duty is not None:
            self._report_duty.start()
            self._stoppers.append(self._report_duty.stop)

        # Singleton work runs in the replica holding the rollout lease (issue 17): job events
        # and re-signing, like the rollouts and the republishing of desired documents.
        def leads() -> bool:
            return rollout_loop.leader

        job_loop = JobLoop(jobs, active=leads)
        job_loop.start()
        self._stoppers.append(job_loop.stop)
        refresher = SignatureRefresher(signer.stale, fleet.republish_all, active=leads)
        refresher.start()
        self._stoppers.append(refresher.stop)
        config = uvicorn.Config(
            create_app(self.services),
            lifespan="off",
            log_config=None,
            access_log=False,
            ssl_certfile=s.tls_cert_file,
            ssl_keyfile=s.tls_key_file,
            # X-Forwarded-For names the client (rate limits, audit) only from listed proxies:
            # uvicorn's default trusts it from loopback, where any local process can forge it.
            proxy_headers=bool(s.trusted_proxies),
            forwarded_allow_ips=list(s.trusted_proxies) or None,
        )
        self._server = _Server(config, self._shutdown_begins)
        logger.info("jetfleet controller: http %s, broker %s", self.http_url, broker_url)

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

        Only the replica holding the rollout lease does (issue 17): three replicas starting
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


class _Server(uvicorn.Server):
    """uvicorn's server, telling the controller when a signal starts the shutdown."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ControllerError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --http HOST:PORT"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


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
