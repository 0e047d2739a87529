"""Rollouts in waves gated on each device's inference health, with automatic rollback (issue 5).

``model`` (records), ``targeting`` / ``waves`` / ``health`` / ``machine`` (pure logic with an
injected clock), ``service`` (API operations), ``loop`` (the leader's background loop),
``schemas`` (HTTP bodies). Database access lives in ``controller.db.rollout_store``.
"""
