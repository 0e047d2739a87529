"""Jetfleet's controller: the control plane, one package per capability.

Where things are, top to bottom (each package may import the ones below it, never one above;
pyproject.toml's controller layers contract checks it):

- ``cli``: the ``jetfleet`` commands (operator commands over HTTP, ``serve``, ``demo``).
- ``server`` (the composition root: wires the services, starts the threads) | ``demo``
  (a controller and simulated gateways as processes).
- ``client``: the HTTP client for the controller API and the operator's credentials.
- ``api``: HTTP routes and bodies; records become bodies here.
- ``dashboard``: the built-in web pages.
- ``rollouts`` (waves, gates, rollback) | ``jobs`` (profiling and tuning on devices).
- ``fleet`` (versions, configs, deployments, desired documents) | ``ingest`` (device
  messages into the database).
- ``analysis``: what a pushed model is, and how much TensorRT can take.
- ``artifacts``: content-addressed bytes, engines, build leases.
- ``trust``: the fleet's signing key, enrolment, labels, engine trust.
- ``auth`` (API tokens, roles, audit) | ``broker_admin`` (broker credentials and ACLs).
- ``db``: the only SQLAlchemy user; it returns records.

Leaves any layer may use: ``records`` (plain frozen records), ``errors``, ``settings``. Also at
the top level: ``services`` (what the API is handed) and ``mqtt_bus`` (the paho adapter).
"""
