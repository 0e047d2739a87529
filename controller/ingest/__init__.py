"""Ingest: device messages from the broker into the database.

:mod:`.inbox` (between the MQTT network thread and ingest), :mod:`.handlers` (decode one
message; store reported state and presence, queue telemetry and events, or count it as
rejected), :mod:`.batch` (bounded queue, one writer thread), :mod:`.link` (a lean MQTT
subscriber for workers), :mod:`.pool` and :mod:`.worker` (ingest in worker processes),
:mod:`.log_throttle`, :mod:`.sample_guard` (which telemetry samples are stored: timestamps
against the receive time, a per-device rate bound).

Layer: below the API, beside fleet; may use broker_admin (the shared subscription's topic
filter), db, the leaves and ``shared``.
"""
