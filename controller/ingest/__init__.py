"""Ingest: device messages from the broker into the database.

:mod:`.inbox` (between the MQTT network thread and ingest), :mod:`.handlers` (decode one
message; store reported state and presence, queue telemetry and events, or count it as
rejected), :mod:`.batch` (bounded queue, one writer thread), :mod:`.link` (a lean MQTT
subscriber for workers), :mod:`.pool` and :mod:`.worker` (ingest in worker processes),
:mod:`.log_throttle`.

Layer: below the API, beside fleet; may use broker_admin (the shared subscription's topic
filter), db, the leaves and ``shared``.
"""
