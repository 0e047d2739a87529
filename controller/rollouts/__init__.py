"""Rollouts in waves gated on each device's inference health, with automatic rollback.

``model`` (the records, kept in :mod:`controller.records.rollouts`), ``targeting`` / ``waves`` /
``health`` / ``machine`` / ``delegation`` (pure logic with an injected clock; slot phases are
:class:`shared.messages.SlotPhase`), ``service`` (API operations), ``loop`` (the leader's
background loop), ``wave_publisher`` (the loop's chunks of a wave: previous slots and baselines
recorded, documents published, generations stored), ``agent_gate`` / ``agent_plan`` (pure:
which devices an agent release may be ordered to, how their update reports are judged),
``agent_waves`` (the loop's chunks of an agent rollout's wave), ``schemas`` (HTTP bodies).
Database access lives in ``controller.db.rollout_store``.

Layer: below the API, beside jobs; may use fleet (deploy and restore slots), db, the leaves and
``shared``.
"""
