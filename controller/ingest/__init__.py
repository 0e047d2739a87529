"""Ingest: device messages from the broker into the database.

:mod:`.inbox` (between the MQTT network thread and ingest), :mod:`.handlers` (decode one
message, store or count it as rejected), :mod:`.batch` (bounded queue, one writer thread),
:mod:`.link` (a lean MQTT subscriber for workers), :mod:`.pool` and :mod:`.worker` (ingest in
worker processes), :mod:`.log_throttle`.
"""
