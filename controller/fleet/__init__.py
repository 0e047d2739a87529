"""The fleet: model versions, delegate configs, deployments and the desired documents they make.

:mod:`.catalog` (push, list, show model versions), :mod:`.configs` and :mod:`.config_layers`
(layered delegate configs), :mod:`.deployments` (change the slots of target devices and publish),
:mod:`.desired` (pure slot planning), :mod:`.selectors` and :mod:`.labels` (pure),
:mod:`.health` (device health from presence and telemetry, pure).
"""
