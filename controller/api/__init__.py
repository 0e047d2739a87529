"""The controller's HTTP API (``/api/v1``, ``/healthz``, ``/metrics``): FastAPI routes over the
services the composition root wires (:class:`controller.services.Services`).

:mod:`.app` (``create_app``: the app, error statuses, devices/models/deployments/configs/artifacts
routes), one ``routes_*`` module per area (engines, enrolment, health and the dashboard, jobs,
rollouts), :mod:`.schemas` and :mod:`.schemas_engines` (request and response bodies),
:mod:`.convert` (records → bodies: services take and return :mod:`controller.records` types and
never build a body), :mod:`.error_bodies` (short 4xx bodies),
:mod:`.answers` (the error answers each route can give, declared in its OpenAPI document).

Layer (pyproject's controller layers contract): below cli, server and client; may use dashboard,
rollouts, jobs, fleet, ingest, analysis, artifacts, trust, auth, broker_admin and db, plus the
leaves (records, errors, settings) and ``shared``.
"""
