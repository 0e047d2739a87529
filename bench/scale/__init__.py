"""The scale-out bench: R ``jetfleet serve`` replicas on PostgreSQL and their
own Mosquitto, N lightweight simulated gateways with per-device credentials in a few processes,
two rollouts in waves, the rollout leader killed with -9 in the middle of the second.

``bench/scale.py`` is the command; :mod:`bench.scale.run` the run, :mod:`bench.scale.gateways`
the simulated gateways, :mod:`bench.scale.broker` the broker and its credentials,
:mod:`bench.scale.replicas` the controller processes, :mod:`bench.scale.measure` what is counted.
"""
