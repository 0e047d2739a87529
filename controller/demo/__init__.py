"""The demo fleet: one controller and N simulated gateways as real processes, and the sample
models (generated in code, nothing downloaded) the demo, tests and benches push.

:mod:`.fleet` (start and stop the processes, wait for them; it drives the controller over HTTP
with :mod:`controller.client`, as an operator would), :mod:`.sample_models` (pure).

Layer: below cli (``jetfleet demo``), beside server (it starts a controller as a process, never
imports one); may use client, auth and db (the demo's own admin token) and the leaves.
"""
