"""The soak and chaos bench: a real fleet under a seeded fault schedule.

``faults`` plans the schedule (pure), ``proxy`` is the TCP proxy that partitions an agent's broker
link, ``parts`` starts and kills the processes (Mosquitto, ``jetfleet serve``, agents, inference
clients, simulated gateways), ``measure`` counts telemetry, failed requests and per-process
resources, ``report`` prints the table and the ``soak:`` line, and ``run`` ties them together.
``bench/soak.py`` is the command; ``tests/integration/soak/`` runs a short version.
"""
