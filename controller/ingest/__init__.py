"""Ingest: device messages from the broker into the database.

:mod:`.inbox` (between the MQTT network thread and ingest), :mod:`.handlers` (decode one
message; store reported state and presence, queue telemetry and events, or count it as
rejected), :mod:`.batch` (bounded queue, one writer thread; its counters in :mod:`.batch_stats`),
:mod:`.link` (a lean MQTT subscriber for workers; its acknowledgements in :mod:`.link_acks`),
:mod:`.pool` and :mod:`.worker` (ingest in worker processes),
:mod:`.log_throttle`, :mod:`.sample_guard` (which telemetry samples are stored: timestamps
against the receive time, a per-device rate bound), :mod:`.gc_tuning` (the garbage collector of
a serving process).

Layer: below the API, beside fleet; may use broker_admin (the shared subscription's topic
filter), db, the leaves and ``shared``.
"""
