"""The fleet: model versions, delegate configs, deployments and the desired documents they make.

:mod:`.catalog` (push, list, show model versions), :mod:`.configs` and :mod:`.config_layers`
(layered delegate configs), :mod:`.deployments` (change the slots of target devices and publish),
:mod:`.desired` (pure slot planning and the desired document), :mod:`.selectors` (pure),
:mod:`.health` (device health from presence and telemetry, pure), :mod:`.agent_releases`
(push, sign and order agent releases; their files read by :mod:`.agent_packages`),
:mod:`.publisher` (what the fleet publishes through). Services here take and return
:mod:`controller.records` types; the API converts them at its edge.

Layer: below rollouts and jobs (which deploy through it) and the API; beside ingest. May use
analysis (inspect and analyse a pushed model), artifacts, trust (signing documents, labels),
auth, broker_admin, db, the leaves and ``shared``.
"""
