"""The agent's links to the controller and the broker: everything that crosses the network.

:mod:`.mqtt_link` (the only paho user), :mod:`.outbox` and :mod:`.spool` (telemetry and events
written to disk first, forwarded in order), :mod:`.http` (the only httpx user: clients to the
controller and the one reading of HTTP statuses as transient or permanent), :mod:`.downloader`
(artifacts over HTTP, resumable), :mod:`.enrolment` (one-time token → device identity) and
:mod:`.broker_probe` (the doctor's connection check).

May use: :mod:`agent.hardware`, the agent's leaves (:mod:`agent.settings`, :mod:`agent.errors`,
:mod:`agent.identity_file`, :mod:`agent.durable_files`) and :mod:`shared`.
"""
